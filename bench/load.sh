#!/usr/bin/env bash
# HTTP load scenarios for Pinfold, measured with wrk, each beside a bare
# axum/tokio server doing only the same answer in the same run.
#
#   bench/load.sh                          # healthz, tenant, not-modified, resolve on SQLite
#   bench/load.sh healthz publish          # chosen scenarios
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/pinfold_bench bench/load.sh healthz publish
#
# Starts the bare baseline (bench/bare, built in release) and a release build
# of `pinfold serve` (dev mode, a temporary data directory; SQLite unless
# DATABASE_URL is set — a PostgreSQL database named there is dropped and
# recreated), both pinned to CPU 0, and runs wrk pinned to CPU 1, so servers
# and load generator do not fight for a core (the targets in
# bench/README.md). For each scenario the bare counterpart is measured right
# before Pinfold, each with a warm-up, then a measured run; the summary prints
# every Pinfold figure as a ratio to the bare one of the same run, because
# ratios travel between machines and absolute numbers do not.
#
# Scenarios (bare counterpart in brackets):
#   healthz       GET /healthz, no auth, no database           [GET /healthz]
#   tenant        GET /v1/tenants/dev with a bearer token      [GET /healthz]
#                 (auth cache + one read)
#   not-modified  GET a version record with If-None-Match      [GET /v with its ETag → 304]
#                 (auth + ETag index → 304)
#   resolve       POST .../sessions/{id}/resolve, the same     [POST /resolve: parse, canonical
#                 arguments every time (a resolve-cache hit)    key, moka get, cached bytes]
#                 against the TypeScript-SDK upstream in
#                 examples/ts-upstream (or UPSTREAM_URL);
#                 skipped with a message when this Pinfold has
#                 no resolve routes
#   publish       PUT distinct ~58 KiB signatures, 8           [GET /healthz]
#                 connections (validate, canonicalise, digest,
#                 insert, audit, commit)
#   read          GET READ_COUNT (1000) distinct version       [GET /healthz]
#                 records in rotation, no If-None-Match: each
#                 a 200 read from the database (version and
#                 reviews), never from an in-process cache
#
# Open loop: after the closed-loop runs of healthz, not-modified and resolve,
# each is driven again by bench/bare's `openloop` at half the rate Pinfold
# reached (the bare counterpart at the same rate), and the p99 measured from
# each request's intended send time is printed beside the target (≤ 1 ms).
# wrk is closed-loop and cannot show that figure. OPEN_LOOP=0 skips it.
#
# Environment: PINFOLD_BIN (default target/release/pinfold), BARE_BIN (default
# target/release/bare), OPENLOOP_BIN (target/release/openloop), OPEN_LOOP (1),
# DURATION (10s), CONNECTIONS (64), PORT (18080),
# BARE_PORT (18081), SERVER_CPU (0), CLIENT_CPU (1), DATABASE_URL, READ_COUNT
# (1000), PG_MAX_CONNECTIONS (the server's pool size; its default when unset),
# UPSTREAM_URL (an MCP endpoint serving the seed's manage_files; default: start
# examples/ts-upstream --shape seed, which needs node and npm).
set -euo pipefail
cd "$(dirname "$0")/.."

PINFOLD_BIN=${PINFOLD_BIN:-target/release/pinfold}
# Measure the server, not its rate limits.
export PINFOLD_RATE_LIMITS__ENABLED=false
BARE_BIN=${BARE_BIN:-target/release/bare}
OPENLOOP_BIN=${OPENLOOP_BIN:-target/release/openloop}
OPEN_LOOP=${OPEN_LOOP:-1}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-64}
PORT=${PORT:-18080}
BARE_PORT=${BARE_PORT:-18081}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
BASE="http://127.0.0.1:$PORT"
BARE="http://127.0.0.1:$BARE_PORT"

if ! command -v wrk >/dev/null; then
    echo "wrk is not installed; installing it (Debian package 'wrk')" >&2
    apt-get install -y wrk >/dev/null || { echo "cannot install wrk; install it and retry" >&2; exit 1; }
fi
if [ ! -x "$PINFOLD_BIN" ]; then
    echo "building $PINFOLD_BIN (release)" >&2
    cargo build --release --locked --bin pinfold >&2
fi
if [ ! -x "$BARE_BIN" ] || [ ! -x "$OPENLOOP_BIN" ]; then
    echo "building $BARE_BIN and $OPENLOOP_BIN (release; bench/bare is its own workspace)" >&2
    cargo build --release --locked --manifest-path bench/bare/Cargo.toml --target-dir target >&2
fi

data=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$data"
}
trap cleanup EXIT

# wait_healthy URL LOGFILE
wait_healthy() {
    for _ in $(seq 1 200); do
        curl -fs "$1/healthz" >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    curl -fs "$1/healthz" >/dev/null || { cat "$2" >&2; echo "$1 did not come up" >&2; exit 1; }
}

# The bare baseline first.
taskset -c "$SERVER_CPU" "$BARE_BIN" "$BARE_PORT" >"$data/bare.out" 2>"$data/bare.err" &
pids+=($!)
wait_healthy "$BARE" "$data/bare.err"

db_args=()
if [ -n "${DATABASE_URL:-}" ]; then
    url_base=${DATABASE_URL%%\?*}                # without "?host=/var/run/postgresql" etc.
    query=${DATABASE_URL#"$url_base"}
    dbname=${url_base##*/}
    admin_url=${url_base%/*}/postgres$query
    psql -q "$admin_url" -c "DROP DATABASE IF EXISTS $dbname" -c "CREATE DATABASE $dbname" >/dev/null
    db_args=(--database-url "$DATABASE_URL")
fi

if [ -n "${PG_MAX_CONNECTIONS:-}" ]; then
    export PINFOLD_POSTGRES__MAX_CONNECTIONS=$PG_MAX_CONNECTIONS
fi
RUST_LOG=warn taskset -c "$SERVER_CPU" "$PINFOLD_BIN" serve --data-dir "$data" --listen "127.0.0.1:$PORT" "${db_args[@]}" \
    >"$data/out.txt" 2>"$data/err.txt" &
pids+=($!)
wait_healthy "$BASE" "$data/err.txt"
TOKEN=$(sed -n 's/.*export PINFOLD_TOKEN=\([^ ]*\).*/\1/p' "$data/out.txt")
export TOKEN

# run NAME CONNS URL [wrk args...] → prints "NAME req/s p50 p99"; keeps the figures in $data/NAME.{rps,p99}
run() {
    local name=$1 conns=$2 url=$3; shift 3
    RUN_ID=0 taskset -c "$CLIENT_CPU" wrk -t1 -c"$conns" -d2s "$@" "$url" >/dev/null
    local out
    out=$(RUN_ID=1 taskset -c "$CLIENT_CPU" wrk -t1 -c"$conns" -d"$DURATION" --latency "$@" "$url")
    local rps p50 p99 non2xx
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1=="50%" {print $2}' <<<"$out")
    p99=$(awk '$1=="99%" {print $2}' <<<"$out")
    non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
    printf '%-22s %12s req/s   p50 %-9s p99 %-9s %s\n' "$name" "$rps" "$p50" "$p99" "${non2xx:+non-2xx/3xx: $non2xx}"
    echo "$rps" >"$data/$name.rps"
    echo "$p99" >"$data/$name.p99"
    [ -z "$non2xx" ] || echo "$non2xx" >"$data/$name.errors"
}

# openloop_run NAME RATE URL [openloop args...] → the open-loop p99 at RATE req/s,
# kept in $data/NAME.olp99 (milliseconds)
openloop_run() {
    local name=$1 rate=$2 url=$3; shift 3
    local out line
    out=$(taskset -c "$CLIENT_CPU" "$OPENLOOP_BIN" "$url" --rate "$rate" --connections "$CONNECTIONS" \
        --duration "${DURATION%s}" "$@" 2>&1) || { echo "$out" >&2; echo "open loop on $name failed" >&2; exit 1; }
    line=$(grep '^openloop ' <<<"$out")
    local p99 p50 achieved
    p99=$(sed -n 's/.* p99_us=\([0-9]*\).*/\1/p' <<<"$line")
    p50=$(sed -n 's/.* p50_us=\([0-9]*\).*/\1/p' <<<"$line")
    achieved=$(sed -n 's/.*rate=\([0-9]*\).*/\1/p' <<<"$line")
    printf '%-22s %12s req/s   p50 %-9s p99 %-9s (open loop)\n' "$name" "$achieved" \
        "$(awk -v u="$p50" 'BEGIN{printf "%.2fms", u/1000}')" "$(awk -v u="$p99" 'BEGIN{printf "%.2fms", u/1000}')"
    awk -v u="$p99" 'BEGIN{printf "%.3f\n", u/1000}' >"$data/$name.olp99"
}

# half RATE-FILE → half of the req/s recorded there, as an integer
half() { awk '{printf "%d", $1 / 2}' "$1"; }

# shellcheck source=bench/resolve-session.sh
source bench/resolve-session.sh

scenarios=("$@")
[ ${#scenarios[@]} -eq 0 ] && scenarios=(healthz tenant not-modified resolve)

backend=sqlite; [ -n "${DATABASE_URL:-}" ] && backend=postgres
pool=""; [ "$backend" = postgres ] && pool=" (pool ${PG_MAX_CONNECTIONS:-default})"
echo "pinfold $("$PINFOLD_BIN" --version | awk '{print $2}') on $(nproc) cores, $backend$pool; load average $(cut -d' ' -f1-3 /proc/loadavg); servers on CPU $SERVER_CPU, wrk on CPU $CLIENT_CPU; $DURATION per scenario"
run "bare healthz" "$CONNECTIONS" "$BARE/healthz"
run healthz "$CONNECTIONS" "$BASE/healthz"
# scenario → its bare counterpart, for the summary
declare -A reference=([healthz]="bare healthz")
if [ "$OPEN_LOOP" = 1 ]; then
    rate=$(half "$data/healthz.rps")
    openloop_run "bare healthz" "$rate" "$BARE/healthz"
    openloop_run healthz "$rate" "$BASE/healthz"
fi
for s in "${scenarios[@]}"; do
    case $s in
        healthz) ;;
        tenant)
            run tenant "$CONNECTIONS" "$BASE/v1/tenants/dev" -H "Authorization: Bearer $TOKEN"
            reference[tenant]="bare healthz" ;;
        not-modified)
            bare_etag=$(curl -fsS -D - -o /dev/null "$BARE/v" | awk -F': ' 'tolower($1)=="etag" {print $2}' | tr -d '\r')
            run "bare not-modified" "$CONNECTIONS" "$BARE/v" -H "If-None-Match: $bare_etag"
            v="$BASE/v1/tenants/dev/servers/io.github.acme%2Ffiles/versions/1.0.0"
            curl -fsS -X PUT "$v" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
                --data-binary @examples/files-1.0.0.json -o /dev/null
            etag=$(curl -fsS -D - -o /dev/null "$v" -H "Authorization: Bearer $TOKEN" | awk -F': ' 'tolower($1)=="etag" {print $2}' | tr -d '\r')
            code=$(curl -s -o /dev/null -w '%{http_code}' "$v" -H "Authorization: Bearer $TOKEN" -H "If-None-Match: $etag")
            [ "$code" = 304 ] || { echo "expected 304, got $code" >&2; exit 1; }
            # wrk counts 304 as a success (2xx or 3xx).
            run not-modified "$CONNECTIONS" "$v" -H "Authorization: Bearer $TOKEN" -H "If-None-Match: $etag"
            if [ "$OPEN_LOOP" = 1 ]; then
                rate=$(half "$data/not-modified.rps")
                openloop_run "bare not-modified" "$rate" "$BARE/v" -H "If-None-Match: $bare_etag"
                openloop_run not-modified "$rate" "$v" -H "Authorization: Bearer $TOKEN" -H "If-None-Match: $etag"
            fi
            reference[not-modified]="bare not-modified" ;;
        resolve)
            code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$BARE/resolve" -H 'Content-Type: application/json' \
                -d '{"name":"manage_files","arguments":{"action":"read","path":"/tmp/notes.txt"}}')
            [ "$code" = 200 ] || { echo "bare /resolve answered $code, not a hit" >&2; exit 1; }
            run "bare resolve" "$CONNECTIONS" "$BARE/resolve" -s bench/resolve.lua
            if prepare_resolve; then
                run resolve "$CONNECTIONS" "$BASE$RESOLVE_PATH" -s bench/resolve.lua -H "Authorization: Bearer $TOKEN"
                if [ "$OPEN_LOOP" = 1 ]; then
                    body="$data/resolve-body.json"
                    default_body='{"name":"manage_files","arguments":{"path":"/tmp/notes.txt","action":"read"}}'
                    printf '%s' "${RESOLVE_BODY:-$default_body}" >"$body"
                    rate=$(half "$data/resolve.rps")
                    openloop_run "bare resolve" "$rate" "$BARE/resolve" --body-file "$body" -H 'Content-Type: application/json'
                    openloop_run resolve "$rate" "$BASE$RESOLVE_PATH" --body-file "$body" -H 'Content-Type: application/json' \
                        -H "Authorization: Bearer $TOKEN"
                fi
                reference[resolve]="bare resolve"
            else
                echo "resolve                skipped (see above)"
            fi ;;
        publish)
            run publish 8 "$BASE/" -s bench/publish.lua
            published=$(curl -fsS "$BASE/v1/tenants/dev/servers/io.github.bench%2Frecords" -H "Authorization: Bearer $TOKEN" \
                | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["versions"]))')
            echo "                       ($published versions stored)"
            reference[publish]="bare healthz" ;;
        read)
            READ_COUNT=${READ_COUNT:-1000}
            export READ_COUNT
            python3 bench/publish-reads.py "$BASE" "$TOKEN" "$READ_COUNT" | sed 's/^/                       /'
            if [ -n "${DATABASE_URL:-}" ]; then
                # The steady state: autovacuum analyzes a table within a
                # minute of this many new rows. Read at once, the planner
                # still holds the empty tables' statistics and may scan
                # every version of the server through another index
                # (bench/README.md, "Uncached reads").
                psql -q "$DATABASE_URL" -c "ANALYZE" >/dev/null
            fi
            v="$BASE/v1/tenants/dev/servers/io.github.bench%2Freads/versions/1.0.$READ_COUNT"
            code=$(curl -s -o /dev/null -w '%{http_code}' "$v" -H "Authorization: Bearer $TOKEN")
            [ "$code" = 200 ] || { echo "expected 200 reading $v, got $code" >&2; exit 1; }
            run read "$CONNECTIONS" "$BASE/" -s bench/read.lua
            reference[read]="bare healthz" ;;
        *) echo "unknown scenario $s" >&2; exit 2 ;;
    esac
done

# Ratio targets (issues on performance); "—" where none is set.
declare -A printed=()
declare -A target=([healthz]="≥ 0.85" [not-modified]="≥ 0.70" [resolve]="≥ 0.60")
echo
printf '%-14s %12s %10s   %-18s %12s %10s   %7s %-7s   %-17s   %s\n' \
    scenario "pinfold req/s" p99 "bare reference" "req/s" p99 ratio target "open-loop p99 ½" "x pinfold /healthz"
for s in healthz "${scenarios[@]}"; do
    [ -f "$data/$s.rps" ] || continue
    [ -n "${printed[$s]:-}" ] && continue
    printed[$s]=1
    ref=${reference[$s]}
    awk -v n="$s" -v r="$(cat "$data/$s.rps")" -v p="$(cat "$data/$s.p99")" \
        -v rn="${ref#bare }" -v b="$(cat "$data/$ref.rps")" -v bp="$(cat "$data/$ref.p99")" \
        -v h="$(cat "$data/healthz.rps")" -v t="${target[$s]:-—}" \
        -v ol="$(cat "$data/$s.olp99" 2>/dev/null || echo -)" -v bol="$(cat "$data/$ref.olp99" 2>/dev/null || echo -)" \
        'BEGIN { o = (ol == "-") ? "—" : sprintf("%s (bare %s) ms", ol, bol);
                 printf "%-14s %12.0f %10s   bare %-13s %12.0f %10s   %6.2fx %-7s   %-17s   %.2fx\n", n, r, p, rn, b, bp, r / b, t, o, r / h }'
done
for f in "$data"/*.errors; do
    [ -e "$f" ] || continue
    echo "note: $(basename "$f" .errors) had $(cat "$f") non-2xx/3xx answers"
done
