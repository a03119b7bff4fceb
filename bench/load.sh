#!/usr/bin/env bash
# HTTP load scenarios for Signet, measured with wrk.
#
#   bench/load.sh                 # all scenarios
#   bench/load.sh healthz         # just the baseline
#
# Starts a release build of `signet serve` (SQLite, dev mode, a temporary data
# directory) pinned to CPU 0 and runs wrk pinned to CPU 1, so server and load
# generator do not fight for a core (DESIGN.md, "Non-functional targets").
# Each scenario gets a warm-up, then a measured run; every figure is printed
# beside the /healthz baseline of the same run, because ratios travel between
# machines and absolute numbers do not.
#
# Environment: SIGNET_BIN (default target/release/signet), DURATION (10s),
# CONNECTIONS (64), PORT (18080), SERVER_CPU (0), CLIENT_CPU (1).
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

RUST_LOG=warn taskset -c "$SERVER_CPU" "$SIGNET_BIN" serve --data-dir "$data" --listen "127.0.0.1:$PORT" \
    >"$data/out.txt" 2>"$data/err.txt" &
pid=$!
for _ in $(seq 1 100); do
    curl -fs "$BASE/healthz" >/dev/null 2>&1 && break
    sleep 0.05
done
curl -fs "$BASE/healthz" >/dev/null || { cat "$data/err.txt" >&2; exit 1; }
TOKEN=$(sed -n 's/.*export SIGNET_TOKEN=\([^ ]*\).*/\1/p' "$data/out.txt")

# run NAME PATH [wrk args...] → prints "NAME req/s p50 p99"
run() {
    local name=$1 path=$2; shift 2
    taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNECTIONS" -d2s "$@" "$BASE$path" >/dev/null
    local out
    out=$(taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNECTIONS" -d"$DURATION" --latency "$@" "$BASE$path")
    local rps p50 p99 non2xx
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1=="50%" {print $2}' <<<"$out")
    p99=$(awk '$1=="99%" {print $2}' <<<"$out")
    non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
    printf '%-28s %12s req/s   p50 %-9s p99 %-9s %s\n' "$name" "$rps" "$p50" "$p99" "${non2xx:+non-2xx: $non2xx}"
    echo "$rps" >"$data/$name.rps"
}

scenarios=("$@")
[ ${#scenarios[@]} -eq 0 ] && scenarios=(healthz tenant policy)

echo "signet $("$SIGNET_BIN" --version | awk '{print $2}') on $(nproc) cores; server on CPU $SERVER_CPU, wrk on CPU $CLIENT_CPU; $CONNECTIONS connections, $DURATION"
run healthz /healthz
base=$(cat "$data/healthz.rps")
for s in "${scenarios[@]}"; do
    case $s in
        healthz) ;;
        # Auth (cached token) + tenant check + one database read.
        tenant) run "GET tenant (auth+db)" /v1/tenants/dev -H "Authorization: Bearer $TOKEN" ;;
        # Auth + tenant check + one database read, JSON with ETag.
        policy) run "GET policy (auth+db)" /v1/tenants/dev/policy -H "Authorization: Bearer $TOKEN" ;;
        *) echo "unknown scenario $s" >&2; exit 2 ;;
    esac
done
echo
for f in "$data"/*.rps; do
    name=$(basename "$f" .rps)
    [ "$name" = healthz ] && continue
    awk -v n="$name" -v r="$(cat "$f")" -v b="$base" 'BEGIN { printf "%-28s %.2f x /healthz baseline\n", n, r / b }'
done
