#!/usr/bin/env bash
# HTTP load scenarios for Signet, measured with wrk.
#
#   bench/load.sh                          # healthz, tenant, not-modified on SQLite
#   bench/load.sh healthz publish          # chosen scenarios
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/signet_bench bench/load.sh healthz publish
#
# Starts a release build of `signet serve` (dev mode, a temporary data
# directory; SQLite unless DATABASE_URL is set — a PostgreSQL database named
# there is dropped and recreated) pinned to CPU 0, and runs wrk pinned to
# CPU 1, so server and load generator do not fight for a core (the targets
# in bench/README.md). Each scenario gets a warm-up, then a measured
# run; every figure is printed beside the /healthz baseline of the same run,
# because ratios travel between machines and absolute numbers do not.
#
# Scenarios:
#   healthz       GET /healthz (the baseline: no auth, no database)
#   tenant        GET /v1/tenants/dev with a bearer token (auth cache + one read)
#   not-modified  GET a version record with If-None-Match (auth + ETag index → 304)
#   publish       PUT distinct ~58 KiB signatures, 8 connections (validate,
#                 canonicalise, digest, insert, audit, commit)
#
# Environment: SIGNET_BIN (default target/release/signet), DURATION (10s),
# CONNECTIONS (64), PORT (18080), SERVER_CPU (0), CLIENT_CPU (1), DATABASE_URL.
set -euo pipefail
cd "$(dirname "$0")/.."

SIGNET_BIN=${SIGNET_BIN:-target/release/signet}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-64}
PORT=${PORT:-18080}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
BASE="http://127.0.0.1:$PORT"

if ! command -v wrk >/dev/null; then
    echo "wrk is not installed; installing it (Debian package 'wrk')" >&2
    apt-get install -y wrk >/dev/null || { echo "cannot install wrk; install it and retry" >&2; exit 1; }
fi
if [ ! -x "$SIGNET_BIN" ]; then
    echo "building $SIGNET_BIN (release)" >&2
    cargo build --release --locked --bin signet >&2
fi

data=$(mktemp -d)
cleanup() { [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$data"; }
trap cleanup EXIT

db_args=()
if [ -n "${DATABASE_URL:-}" ]; then
    url_base=${DATABASE_URL%%\?*}                # without "?host=/var/run/postgresql" etc.
    query=${DATABASE_URL#"$url_base"}
    dbname=${url_base##*/}
    admin_url=${url_base%/*}/postgres$query
    psql -q "$admin_url" -c "DROP DATABASE IF EXISTS $dbname" -c "CREATE DATABASE $dbname" >/dev/null
    db_args=(--database-url "$DATABASE_URL")
fi

RUST_LOG=warn taskset -c "$SERVER_CPU" "$SIGNET_BIN" serve --data-dir "$data" --listen "127.0.0.1:$PORT" "${db_args[@]}" \
    >"$data/out.txt" 2>"$data/err.txt" &
pid=$!
for _ in $(seq 1 200); do
    curl -fs "$BASE/healthz" >/dev/null 2>&1 && break
    sleep 0.05
done
curl -fs "$BASE/healthz" >/dev/null || { cat "$data/err.txt" >&2; exit 1; }
TOKEN=$(sed -n 's/.*export SIGNET_TOKEN=\([^ ]*\).*/\1/p' "$data/out.txt")
export TOKEN

# run NAME CONNS PATH [wrk args...] → prints "NAME req/s p50 p99"
run() {
    local name=$1 conns=$2 path=$3; shift 3
    RUN_ID=0 taskset -c "$CLIENT_CPU" wrk -t1 -c"$conns" -d2s "$@" "$BASE$path" >/dev/null
    local out
    out=$(RUN_ID=1 taskset -c "$CLIENT_CPU" wrk -t1 -c"$conns" -d"$DURATION" --latency "$@" "$BASE$path")
    local rps p50 p99 non2xx
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1=="50%" {print $2}' <<<"$out")
    p99=$(awk '$1=="99%" {print $2}' <<<"$out")
    non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
    printf '%-22s %12s req/s   p50 %-9s p99 %-9s %s\n' "$name" "$rps" "$p50" "$p99" "${non2xx:+non-2xx/3xx: $non2xx}"
    echo "$rps" >"$data/$name.rps"
}

scenarios=("$@")
[ ${#scenarios[@]} -eq 0 ] && scenarios=(healthz tenant not-modified)

backend=sqlite; [ -n "${DATABASE_URL:-}" ] && backend=postgres
echo "signet $("$SIGNET_BIN" --version | awk '{print $2}') on $(nproc) cores, $backend; server on CPU $SERVER_CPU, wrk on CPU $CLIENT_CPU; $DURATION per scenario"
run healthz "$CONNECTIONS" /healthz
base=$(cat "$data/healthz.rps")
for s in "${scenarios[@]}"; do
    case $s in
        healthz) ;;
        tenant) run tenant "$CONNECTIONS" /v1/tenants/dev -H "Authorization: Bearer $TOKEN" ;;
        not-modified)
            v="$BASE/v1/tenants/dev/servers/io.github.acme%2Ffiles/versions/1.0.0"
            curl -fsS -X PUT "$v" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
                --data-binary @examples/files-1.0.0.json -o /dev/null
            etag=$(curl -fsS -D - -o /dev/null "$v" -H "Authorization: Bearer $TOKEN" | awk -F': ' 'tolower($1)=="etag" {print $2}' | tr -d '\r')
            code=$(curl -s -o /dev/null -w '%{http_code}' "$v" -H "Authorization: Bearer $TOKEN" -H "If-None-Match: $etag")
            [ "$code" = 304 ] || { echo "expected 304, got $code" >&2; exit 1; }
            # wrk counts 304 as a success (2xx or 3xx).
            run not-modified "$CONNECTIONS" "/v1/tenants/dev/servers/io.github.acme%2Ffiles/versions/1.0.0" \
                -H "Authorization: Bearer $TOKEN" -H "If-None-Match: $etag" ;;
        publish)
            run publish 8 / -s bench/publish.lua
            published=$(curl -fsS "$BASE/v1/tenants/dev/servers/io.github.bench%2Frecords" -H "Authorization: Bearer $TOKEN" \
                | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["versions"]))')
            echo "                       ($published versions stored)" ;;
        *) echo "unknown scenario $s" >&2; exit 2 ;;
    esac
done
echo
for f in "$data"/*.rps; do
    name=$(basename "$f" .rps)
    [ "$name" = healthz ] && continue
    awk -v n="$name" -v r="$(cat "$f")" -v b="$base" 'BEGIN { printf "%-22s %.2f x /healthz baseline\n", n, r / b }'
done
