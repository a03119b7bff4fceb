#!/usr/bin/env bash
# End-to-end check of the Swagger UI at /docs in a real (headless) browser:
# publish -> review -> fetch round trip driven through the UI itself, with a
# publisher token and then a reviewer token (another sub: separation of
# duties), and no request leaving the Pinfold origin. See
# scripts/swagger-roundtrip/roundtrip.mjs for the steps and assertions.
#
#   scripts/swagger-roundtrip.sh                                  # builds pinfold if needed
#   PINFOLD_BIN=target/release/pinfold scripts/swagger-roundtrip.sh
#
# Non-interactive (CI): installs Debian chromium if missing, `npm ci` in
# scripts/swagger-roundtrip, starts pinfold on a free port with a temp data
# dir, always stops it, and exits with the check's status. Screenshots land in
# target/swagger-roundtrip/.
set -euo pipefail
cd "$(dirname "$0")/.."

PINFOLD_BIN=${PINFOLD_BIN:-target/debug/pinfold}
DIR=scripts/swagger-roundtrip
die() { printf 'swagger-roundtrip: %s\n' "$*" >&2; exit 1; }

# --- tools ---------------------------------------------------------------
command -v node >/dev/null && command -v npm >/dev/null \
    || die "node and npm are required (node >= 18)"
command -v curl >/dev/null || die "curl is required"

CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -z "$CHROMIUM" ]; then
    echo "swagger-roundtrip: installing Debian chromium (headless browser)" >&2
    SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get install -y -qq chromium >/dev/null 2>&1 || {
        $SUDO apt-get update -qq >/dev/null
        $SUDO apt-get install -y -qq chromium >/dev/null
    } || die "could not install chromium with apt-get"
    CHROMIUM=$(command -v chromium) || die "chromium is still missing after apt-get install"
fi
export CHROMIUM

[ -x "$PINFOLD_BIN" ] || cargo build --locked --bin pinfold >&2
[ -x "$PINFOLD_BIN" ] || die "no pinfold binary at $PINFOLD_BIN"

# playwright-core only (no browser download); exact versions from the lock file.
(cd "$DIR" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) \
    || die "npm ci in $DIR failed"

# pinfold reads every PINFOLD_* variable as configuration and refuses unknown
# ones (PINFOLD_BIN, the tokens below, ...), so it runs without any of them.
# (`env` execs pinfold, so $! below is the server's own pid.)
clean_env=(env)
for v in $(compgen -e); do [[ $v == PINFOLD_* ]] && clean_env+=(-u "$v"); done
pinfold=("${clean_env[@]}" "$PINFOLD_BIN")

# --- pinfold on a free port, temp data dir --------------------------------
data=$(mktemp -d)
pid=
cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    fi
    [ -n "$pid" ] && wait "$pid" 2>/dev/null || true
    rm -rf "$data"
}
trap cleanup EXIT

free_port() {
    node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

up=
for attempt in 1 2 3; do
    port=$(free_port)
    base="http://127.0.0.1:$port"
    "${pinfold[@]}" serve --data-dir "$data" --listen "127.0.0.1:$port" >"$data/serve.out" 2>"$data/serve.err" &
    pid=$!
    for _ in $(seq 1 300); do
        if curl -fs "$base/healthz" >/dev/null 2>&1; then up=1; break; fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$up" ] && break
    echo "swagger-roundtrip: pinfold did not come up on port $port (attempt $attempt)" >&2
    cat "$data/serve.err" >&2 || true
    kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=
done
[ -n "$up" ] || die "pinfold serve never answered /healthz"
echo "swagger-roundtrip: pinfold at $base (data dir $data)"

# Two principals: the reviewer must not be the publisher (separation of duties).
mint() { "${pinfold[@]}" token --data-dir "$data" --tenant dev --ttl 1h --sub "$1" --roles "$2"; }
PINFOLD_PUBLISHER_TOKEN=$(mint swagger-publisher publisher) || die "cannot mint the publisher token"
PINFOLD_REVIEWER_TOKEN=$(mint swagger-reviewer reviewer) || die "cannot mint the reviewer token"
export PINFOLD_URL=$base PINFOLD_TENANT=dev PINFOLD_PUBLISHER_TOKEN PINFOLD_REVIEWER_TOKEN

# --- the check -------------------------------------------------------------
rc=0
node "$DIR/roundtrip.mjs" || rc=$?
if [ "$rc" -ne 0 ]; then
    echo "swagger-roundtrip: FAILED (exit $rc); pinfold log tail:" >&2
    tail -n 40 "$data/serve.err" >&2 || true
fi
exit "$rc"
