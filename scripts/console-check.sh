#!/usr/bin/env bash
# End-to-end check of the review console (/console) in headless Chromium,
# with a real OpenID provider (examples/oidc-provider): sign-in with its
# login and consent pages, a pending version whose escalation is on top,
# and every action by keyboard alone (Tab to it, Enter; Space or arrows on
# a checkbox or radio button) with its effect checked: approve (and the
# attestation), reject, deprecate, revoke (with the confirmation naming
# the server and version), the audit log's filters, the "Next page" links
# of the queue and the audit log, the navigation, sign-out; the publisher
# of a version sees no approve button and a forged POST is refused;
# axe-core (npm axe-core) finds no serious or critical violation on any
# console page. See scripts/console-check/check.mjs.
#
#   scripts/console-check.sh                          # SQLite, builds pinfold if needed
#   PINFOLD_CHECK_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
#     scripts/console-check.sh                        # a fresh database on that server
#   PINFOLD_BIN=target/release/pinfold scripts/console-check.sh
#
# Non-interactive (CI): installs Debian chromium if missing, `npm ci` in
# scripts/console-check and examples/oidc-provider, starts the provider and
# pinfold on free ports with a temp data dir (and, on PostgreSQL, a database
# of its own, dropped afterwards), always stops them. Screenshots land in
# target/console-check/.
set -euo pipefail
cd "$(dirname "$0")/.."

PINFOLD_BIN=${PINFOLD_BIN:-target/debug/pinfold}
DIR=scripts/console-check
AUDIENCE=https://pinfold.console-check
die() { printf 'console-check: %s\n' "$*" >&2; exit 1; }

command -v node >/dev/null && command -v npm >/dev/null || die "node and npm are required"
command -v curl >/dev/null || die "curl is required"
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -z "$CHROMIUM" ]; then
    echo "console-check: installing Debian chromium (headless browser)" >&2
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
(cd "$DIR" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) || die "npm ci in $DIR failed"
npm ci --prefix examples/oidc-provider --no-audit --no-fund --loglevel=error >/dev/null \
    || die "npm ci in examples/oidc-provider failed"

# pinfold reads every PINFOLD_* variable as configuration: run it without them.
clean_env=(env)
for v in $(compgen -e); do [[ $v == PINFOLD_* ]] && clean_env+=(-u "$v"); done
pinfold=("${clean_env[@]}" "$PINFOLD_BIN")

data=$(mktemp -d)
pid= idp= dropdb=
cleanup() {
    for p in $pid $idp; do
        kill "$p" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    if [ -n "$dropdb" ]; then psql -q "$PINFOLD_CHECK_DATABASE_URL" -c "DROP DATABASE IF EXISTS $dropdb" >/dev/null 2>&1 || true; fi
    rm -rf "$data"
}
trap cleanup EXIT

free_port() {
    node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}
port=$(free_port)
base="http://127.0.0.1:$port"

# --- the identity provider --------------------------------------------------
(cd examples/oidc-provider && exec node server.mjs --port 0 --redirect http://127.0.0.1:9/callback \
    --console-redirect "$base/console/callback" --console-resource "$AUDIENCE") >"$data/idp.out" 2>"$data/idp.err" &
idp=$!
for _ in $(seq 1 100); do [ -s "$data/idp.out" ] && break; sleep 0.1; done
provider="http://127.0.0.1:$(head -n1 "$data/idp.out")"
curl -fs "$provider/.well-known/openid-configuration" >/dev/null || die "the provider did not start: $(cat "$data/idp.err")"

# --- the database -----------------------------------------------------------
db_line=
if [ -n "${PINFOLD_CHECK_DATABASE_URL:-}" ]; then
    command -v psql >/dev/null || die "psql is required for PINFOLD_CHECK_DATABASE_URL"
    dropdb="pinfold_console_check_$$"
    psql -q "$PINFOLD_CHECK_DATABASE_URL" -c "CREATE DATABASE $dropdb" >/dev/null || die "cannot create a database"
    url=$(python3 -c 'import sys,urllib.parse as u; p=u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/"+sys.argv[2])))' "$PINFOLD_CHECK_DATABASE_URL" "$dropdb")
    db_line="database_url = \"$url\""
fi

cat >"$data/pinfold.toml" <<TOML
public_url = "$base"
$db_line

[egress]
allow_loopback = true

[[auth.issuers]]
issuer = "$provider"
audience = "$AUDIENCE"
algorithms = ["RS256"]
jwks_url = "$provider/jwks"

[[auth.issuers.rules]]
match = { sub = "rita" }
tenant = "dev"
roles = ["reviewer"]

[[auth.issuers.rules]]
match = { sub = "bob" }
tenant = "dev"
roles = ["publisher", "reviewer"]

[console.oidc]
name = "the test provider"
issuer = "$provider"
client_id = "pinfold-console"
client_secret = "pinfold-console-test-secret-0123456789"
scopes = ["openid", "pinfold"]
resource = "$AUDIENCE"
TOML

"${pinfold[@]}" serve --config "$data/pinfold.toml" --dev --data-dir "$data" --listen "127.0.0.1:$port" \
    >"$data/serve.out" 2>"$data/serve.err" &
pid=$!
for _ in $(seq 1 300); do
    curl -fs "$base/healthz" >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || die "pinfold serve exited: $(tail -n 20 "$data/serve.err")"
    sleep 0.1
done
curl -fs "$base/healthz" >/dev/null || die "pinfold serve never answered /healthz"
grep -q "/console/t/dev/sign-in" "$data/serve.out" || die "the banner does not print the console's dev sign-in"
echo "console-check: pinfold at $base ($( [ -n "$db_line" ] && echo PostgreSQL || echo SQLite )), provider at $provider"

# --- the versions to review -------------------------------------------------
mint() { "${pinfold[@]}" token --data-dir "$data" --tenant dev --ttl 1h --sub "$1" --roles "$2"; }
BOB=$(mint bob publisher) CAROL=$(mint carol reviewer) ADMIN=$(mint check-admin admin)
server=io.github.acme%2Ffiles
card() { # version, tools
    printf '{"name":"io.github.acme/files","version":"%s","description":"Files","signature":{"tools":[%s],"prompts":[],"resources":[],"resourceTemplates":[]}}' "$1" "$2"
}
read_tool='{"name":"read_file","description":"Read a file","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}},"annotations":{"readOnlyHint":true,"openWorldHint":false}}'
read_or_delete='{"name":"read_file","description":"Read or delete a file","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}},"annotations":[{"readOnlyHint":true,"openWorldHint":false},{"readOnlyHint":false,"destructiveHint":true,"openWorldHint":false}]}'
stat_tool='{"name":"stat","description":"Size of a file","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true,"openWorldHint":false}}'
api() { # method, path, token, body
    curl -fsS -X "$1" "$base/v1/tenants/dev/servers/$server$2" -H "authorization: Bearer $3" \
        -H 'content-type: application/json' --data "$4" >/dev/null || die "$1 $2 failed"
}
api PUT /versions/1.0.0 "$BOB" "$(card 1.0.0 "$read_tool")"
api POST /versions/1.0.0/review "$CAROL" '{"decision":"approve"}'
api PUT /versions/1.1.0 "$BOB" "$(card 1.1.0 "$read_or_delete")"
api PUT /versions/1.2.0 "$BOB" "$(card 1.2.0 "$read_or_delete,$stat_tool")"
api PUT /versions/1.3.0 "$BOB" "$(card 1.3.0 "$read_tool,$stat_tool")"   # rita rejects it
api PUT /versions/1.4.0 "$BOB" "$(card 1.4.0 "$read_tool")"              # rita revokes it
# Enough pending versions of another server for a second page of the queue
# and of the audit log (25 a page), by two publishers (a caller may publish
# 20 at once: [rate_limits.publish]).
NORA=$(mint nora publisher) NICK=$(mint nick publisher)
for n in $(seq 1 26); do
    who=$NORA; [ "$n" -gt 13 ] && who=$NICK
    curl -fsS -X PUT "$base/v1/tenants/dev/servers/io.github.acme%2Fnotes/versions/5.0.$n" \
        -H "authorization: Bearer $who" -H 'content-type: application/json' \
        --data "$(card 5.0.$n "$read_tool" | sed 's#io.github.acme/files#io.github.acme/notes#')" >/dev/null \
        || die "publishing io.github.acme/notes 5.0.$n failed"
done

rc=0
PINFOLD_URL=$base PROVIDER_URL=$provider PINFOLD_ADMIN=$ADMIN node "$DIR/check.mjs" || rc=$?
if [ "$rc" -ne 0 ]; then
    echo "console-check: FAILED (exit $rc); pinfold log tail:" >&2
    tail -n 40 "$data/serve.err" >&2 || true
fi
exit "$rc"
