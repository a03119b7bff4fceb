#!/usr/bin/env bash
# Instructions per request, counted by valgrind's callgrind, for the bare
# baseline (bench/bare) and Pinfold side by side. Unlike req/s these counts do
# not depend on what else the machine is running.
#
#   bench/instructions.sh                     # healthz not-modified resolve
#   bench/instructions.sh healthz             # chosen scenarios
#   bench/instructions.sh guard-list          # the guard's served tools/list
#                                             # beside a bare handler of its bytes
#   bench/instructions.sh guard-call          # a tools/call through the guard
#                                             # beside the bare forwarder (the
#                                             # upstream's own work is not counted)
#   GATE=1 bench/instructions.sh              # exit 1 when a gate is missed
#
# Each server runs under callgrind (SQLite, a temporary data directory for
# Pinfold). Per scenario, one keep-alive connection sends N1 requests and then
# N2 requests, the counters zeroed before and dumped after each batch; the
# figure is (count(N2) - count(N1)) / (N2 - N1), so start-up, connection
# set-up and other fixed costs cancel out. Counts cover every thread of the
# server in user space (the kernel's TCP work is not in them).
#
# Gates (issue on the thin HTTP edge): healthz ≤ 1.3 × bare; 304 ≤ 25,000.
#
# Environment: PINFOLD_BIN (default target/release/pinfold), BARE_BIN (default
# target/release/bare), N1 (500), N2 (1500), PORT (18180), BARE_PORT (18181),
# UPSTREAM_URL (see bench/load.sh), UPSTREAM_BIN (guard-list: default
# target/release/pinfold-example-upstream), GATE, CG_OUT (a directory: keeps the
# callgrind dumps of every batch there, for `callgrind_annotate --inclusive=yes`;
# build with CARGO_PROFILE_RELEASE_DEBUG=line-tables-only to see lines).
set -euo pipefail
cd "$(dirname "$0")/.."

PINFOLD_BIN=${PINFOLD_BIN:-target/release/pinfold}
# Measure the server, not its rate limits.
export PINFOLD_RATE_LIMITS__ENABLED=false
BARE_BIN=${BARE_BIN:-target/release/bare}
N1=${N1:-500}
N2=${N2:-1500}
PORT=${PORT:-18180}
BARE_PORT=${BARE_PORT:-18181}
BASE="http://127.0.0.1:$PORT"
BARE="http://127.0.0.1:$BARE_PORT"

command -v valgrind >/dev/null || { echo "valgrind is not installed (Debian package 'valgrind')" >&2; exit 1; }
command -v callgrind_control >/dev/null || { echo "callgrind_control is missing (part of valgrind)" >&2; exit 1; }
[ -x "$PINFOLD_BIN" ] || cargo build --release --locked --bin pinfold >&2
[ -x "$BARE_BIN" ] || cargo build --release --locked --manifest-path bench/bare/Cargo.toml --target-dir target >&2

data=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ -n "${CG_OUT:-}" ]; then mkdir -p "$CG_OUT" && cp "$data"/*.cg.* "$CG_OUT"/ 2>/dev/null || true; fi
    rm -rf "$data"
}
trap cleanup EXIT

# under_callgrind NAME URL CMD... → starts CMD under callgrind, waits for URL/healthz; sets VG_PID
under_callgrind() {
    local name=$1 url=$2; shift 2
    valgrind --tool=callgrind --dump-instr=no --callgrind-out-file="$data/$name.cg" "$@" >"$data/$name.out" 2>"$data/$name.err" &
    VG_PID=$!
    pids+=("$VG_PID")
    for _ in $(seq 1 1200); do
        curl -fs "$url/healthz" >/dev/null 2>&1 && return 0
        kill -0 "$VG_PID" 2>/dev/null || break
        sleep 0.1
    done
    cat "$data/$name.err" >&2
    echo "$name did not come up under valgrind" >&2
    exit 1
}

# requests PORT N METHOD PATH [HEADERS-JSON [BODY]] → N requests on one keep-alive connection
requests() {
    python3 - "$@" <<'EOF'
import http.client, json, sys
port, n, method, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
headers = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
body = sys.argv[6].encode() if len(sys.argv) > 6 else None
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
for _ in range(n):
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    r.read()
    if r.status >= 400:
        sys.exit(f"{method} {path} answered {r.status}")
EOF
}

# count PID NAME PORT N METHOD PATH [HEADERS-JSON [BODY]] → instructions of N requests
count() {
    local pid=$1 name=$2; shift 2
    callgrind_control -z "$pid" >/dev/null 2>&1
    requests "$@"
    callgrind_control -d "$name" "$pid" >/dev/null 2>&1
    local file
    file=$(grep -l "^desc: Trigger: dump $name\$" "$data"/*.cg.* | tail -n1)
    awk '/^summary:/ {print $2}' "$file"
}

# measure PID LABEL PORT METHOD PATH [HEADERS-JSON [BODY]] → prints and stores instructions per request
declare -A per_request=()
measure() {
    local pid=$1 label=$2 port=$3; shift 3
    local slug=${label// /-}
    requests "$port" 50 "$@"   # warm the caches of the path
    local a b
    a=$(count "$pid" "$slug-n1" "$port" "$N1" "$@")
    b=$(count "$pid" "$slug-n2" "$port" "$N2" "$@")
    per_request[$label]=$(( (b - a) / (N2 - N1) ))
    printf '%-20s %9d instructions/request\n' "$label" "${per_request[$label]}"
}

scenarios=("$@")
[ ${#scenarios[@]} -eq 0 ] && scenarios=(healthz not-modified resolve)
want() { local s; for s in "${scenarios[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

echo "callgrind, N1=$N1 N2=$N2 requests per batch, one keep-alive connection"
under_callgrind bare "$BARE" "$BARE_BIN" "$BARE_PORT"
bare_pid=$VG_PID
want healthz && measure "$bare_pid" "bare healthz" "$BARE_PORT" GET /healthz
if want not-modified; then
    etag=$(curl -fsS -D - -o /dev/null "$BARE/v" | awk -F': ' 'tolower($1)=="etag" {print $2}' | tr -d '\r')
    measure "$bare_pid" "bare not-modified" "$BARE_PORT" GET /v "{\"If-None-Match\": $(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$etag")}"
fi
# shellcheck source=bench/resolve-session.sh
source bench/resolve-session.sh
want resolve && measure "$bare_pid" "bare resolve" "$BARE_PORT" POST /resolve '{"Content-Type": "application/json"}' "$RESOLVE_BODY"
kill "$bare_pid"

RUST_LOG=warn under_callgrind pinfold "$BASE" "$PINFOLD_BIN" serve --data-dir "$data" --listen "127.0.0.1:$PORT"
pinfold_pid=$VG_PID
TOKEN=$(sed -n 's/.*export PINFOLD_TOKEN=\([^ ]*\).*/\1/p' "$data/pinfold.out")
auth="{\"Authorization\": \"Bearer $TOKEN\""
want healthz && measure "$pinfold_pid" healthz "$PORT" GET /healthz
if want not-modified; then
    v="/v1/tenants/dev/servers/io.github.acme%2Ffiles/versions/1.0.0"
    curl -fsS -X PUT "$BASE$v" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
        --data-binary @examples/files-1.0.0.json -o /dev/null
    etag=$(curl -fsS -D - -o /dev/null "$BASE$v" -H "Authorization: Bearer $TOKEN" | awk -F': ' 'tolower($1)=="etag" {print $2}' | tr -d '\r')
    measure "$pinfold_pid" not-modified "$PORT" GET "$v" "$auth, \"If-None-Match\": $(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$etag")}"
fi
if want resolve; then
    if prepare_resolve; then
        measure "$pinfold_pid" resolve "$PORT" POST "$RESOLVE_PATH" "$auth, \"Content-Type\": \"application/json\"}" "$RESOLVE_BODY"
    else
        echo "resolve              skipped (see above)"
    fi
fi

if want guard-list || want guard-call; then
    # A strict guard route on the Rust reference upstream, and its served
    # tools/list and a forwarded tools/call (sessionless 2026-07-28, as
    # bench/guard.sh sends them). The upstream runs outside valgrind.
    UPSTREAM_BIN=${UPSTREAM_BIN:-target/release/pinfold-example-upstream}
    [ -x "$UPSTREAM_BIN" ] || cargo build --release --locked -p pinfold-example-upstream >&2
    UP_PORT=$((PORT + 2))
    "$UPSTREAM_BIN" --listen "127.0.0.1:$UP_PORT" >"$data/up.out" 2>&1 &
    pids+=($!)
    for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$UP_PORT/calls" >/dev/null 2>&1 && break; sleep 0.1; done
    REVIEWER=$("$PINFOLD_BIN" token --data-dir "$data" --sub rita --tenant dev --roles reviewer)
    CLIENT=$("$PINFOLD_BIN" token --data-dir "$data" --sub carl --tenant dev --roles client)
    S="$BASE/v1/tenants/dev/servers/io.github.pinfold%2Fmanage-files"
    curl -fsS -o /dev/null -X PUT "$S/versions/1.0.0" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' --data-binary @examples/manage-files-1.0.0.json
    curl -fsS -o /dev/null -X POST "$S/versions/1.0.0/review" -H "Authorization: Bearer $REVIEWER" -H 'Content-Type: application/json' -d '{"decision":"approve"}'
    curl -fsS -o /dev/null -X PUT "$S/guard" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
        -d "{\"upstream\": {\"url\": \"http://127.0.0.1:$UP_PORT/mcp\"}, \"mode\": \"strict\"}"
    GUARD_PATH=/t/dev/mcp/io.github.pinfold/manage-files
    LIST_BODY='{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}, "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"}}}}'
    list_h='"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"'
    curl -fsS -X POST "$BASE$GUARD_PATH" -H "Authorization: Bearer $CLIENT" -H 'Accept: application/json, text/event-stream' \
        -H 'Content-Type: application/json' -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/list' \
        --data-binary "$LIST_BODY" >"$data/served-list.json"
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["result"]["tools"]) == 3, d' "$data/served-list.json"
    CALL_BODY='{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_files", "arguments": {"dir": "/"}, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}, "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"}}}}'
    call_h='"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "list_files"'
    want guard-list && measure "$pinfold_pid" guard-list "$PORT" POST "$GUARD_PATH" "{\"Authorization\": \"Bearer $CLIENT\", $list_h}" "$LIST_BODY"
    want guard-call && measure "$pinfold_pid" guard-call "$PORT" POST "$GUARD_PATH" "{\"Authorization\": \"Bearer $CLIENT\", $call_h}" "$CALL_BODY"
    kill "$pinfold_pid"
    # The bare handlers, counted the same way: the same bytes from memory,
    # and the same call forwarded to the same upstream.
    # (on a port of its own: the first bare server may still be exiting)
    BYTES_PORT=$((BARE_PORT + 3))
    BARE_BYTES_FILE="$data/served-list.json" under_callgrind bare-bytes "http://127.0.0.1:$BYTES_PORT" "$BARE_BIN" "$BYTES_PORT" "http://127.0.0.1:$UP_PORT/mcp"
    want guard-list && measure "$VG_PID" "bare guard-list" "$BYTES_PORT" POST /bytes "{$list_h}" "$LIST_BODY"
    want guard-call && measure "$VG_PID" "bare guard-call" "$BYTES_PORT" POST /mcp "{$call_h}" "$CALL_BODY"
    kill "$VG_PID"
fi

echo
missed=0
gate() {  # gate LABEL OK(0|1) TEXT
    if [ "$2" = 1 ]; then echo "  met     $1: $3"; else echo "  MISSED  $1: $3"; missed=1; fi
}
for s in healthz not-modified resolve guard-list guard-call; do
    [ -n "${per_request[$s]:-}" ] && [ -n "${per_request[bare $s]:-}" ] || continue
    ratio=$(awk -v a="${per_request[$s]}" -v b="${per_request[bare $s]}" 'BEGIN { printf "%.2f", a / b }')
    printf '%-14s %9d vs bare %9d   %5sx\n' "$s" "${per_request[$s]}" "${per_request[bare $s]}" "$ratio"
done
[ -n "${per_request[healthz]:-}" ] && [ -n "${per_request[bare healthz]:-}" ] &&
    gate healthz "$(awk -v a="${per_request[healthz]}" -v b="${per_request[bare healthz]}" 'BEGIN { print (a <= 1.3 * b) ? 1 : 0 }')" \
        "${per_request[healthz]} ≤ 1.3 × ${per_request[bare healthz]}"
[ -n "${per_request[not-modified]:-}" ] &&
    gate not-modified "$([ "${per_request[not-modified]}" -le 25000 ] && echo 1 || echo 0)" "${per_request[not-modified]} ≤ 25000"
[ "${GATE:-0}" = 1 ] && [ "$missed" = 1 ] && exit 1
exit 0
