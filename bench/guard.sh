#!/usr/bin/env bash
# The guard's HTTP cost, each figure beside the bare baseline of bench/bare
# in the same run (ratios travel between machines; absolute numbers do not):
#
#   call   POST /t/dev/mcp/{server}: tools/call of list_files, forwarded to
#          the Rust reference upstream (sessionless 2026-07-28 request:
#          auth, the route, the review, argument validation, the calls
#          policy, the forward, the answer read and rewritten)
#          [bare POST /mcp: the same bytes to the same upstream and its
#          answer back, nothing else]
#   list   the served tools/list (auth, the route, the reviewed view)
#          [bare POST /bytes: the same answer's bytes from memory]
#
# Pinfold runs with RUST_LOG=warn, as in bench/load.sh: the bare server logs
# nothing, and per-request spans and logs are an operator's choice.
#
# Closed loop (wrk) for throughput, then open loop (bench/bare's openloop)
# at half the guard's call throughput for both, for the mean latency the
# guard adds. Servers and the upstream on CPU 0, the load on CPU 1.
#
# Beside each closed-loop throughput, the server's own CPU time per request
# (user and system, from /proc, over the same run): on its one CPU the
# server's throughput is the inverse of that cost, and the cost does not
# move with how the load generator is scheduled on the other CPU. The
# ratio of the bare server's CPU per request to the guard's is reported
# next to the throughput ratio; for the call it leaves the upstream out.
#
# On a shared VM one run's figures move by a tenth or more between runs
# with nothing changed, so the runs come in ROUNDS (default 5), each one
# measuring every pair back to back (bare, then the guard), and the figures
# reported are the medians of the rounds' ratios and differences, with
# their range.
#
#   bench/guard.sh        # PINFOLD_BIN, UPSTREAM_BIN, BARE_BIN default to target/release/
#   ROUNDS=3 DURATION=5s bench/guard.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PINFOLD_BIN=${PINFOLD_BIN:-target/release/pinfold}
UPSTREAM_BIN=${UPSTREAM_BIN:-target/release/pinfold-example-upstream}
BARE_BIN=${BARE_BIN:-target/release/bare}
OPENLOOP_BIN=${OPENLOOP_BIN:-target/release/openloop}
DURATION=${DURATION:-5s}
ROUNDS=${ROUNDS:-5}
CONNECTIONS=${CONNECTIONS:-8}
export PINFOLD_RATE_LIMITS__ENABLED=false
[ -x "$PINFOLD_BIN" ] || cargo build --release --locked --bin pinfold >&2
[ -x "$UPSTREAM_BIN" ] || cargo build --release --locked -p pinfold-example-upstream >&2
[ -x "$BARE_BIN" ] && [ -x "$OPENLOOP_BIN" ] || cargo build --release --locked --manifest-path bench/bare/Cargo.toml --target-dir target >&2
if ! command -v wrk >/dev/null; then
    echo "wrk is not installed; installing it (Debian package 'wrk')" >&2
    apt-get install -y wrk >/dev/null || { echo "cannot install wrk; install it and retry" >&2; exit 1; }
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
PORT=$(free_port); UP=$(free_port); BARE=$(free_port)
RUST_LOG=warn taskset -c 0 "$PINFOLD_BIN" serve --data-dir "$work/data" --listen "127.0.0.1:$PORT" >"$work/out.txt" 2>"$work/err.txt" &
pids+=($!)
PINFOLD_PID=$!
taskset -c 0 "$UPSTREAM_BIN" --listen "127.0.0.1:$UP" >"$work/up.txt" 2>&1 &
pids+=($!)
for _ in $(seq 1 150); do curl -fs "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && curl -fs "http://127.0.0.1:$UP/calls" >/dev/null 2>&1 && break; sleep 0.1; done
ADMIN=$(sed -n 's/.*export PINFOLD_TOKEN=\([^ ]*\).*/\1/p' "$work/out.txt")
REVIEWER=$("$PINFOLD_BIN" token --data-dir "$work/data" --sub rita --tenant dev --roles reviewer)
CLIENT=$("$PINFOLD_BIN" token --data-dir "$work/data" --sub carl --tenant dev --roles client)
T="http://127.0.0.1:$PORT/v1/tenants/dev"
S="$T/servers/io.github.pinfold%2Fmanage-files"
curl -fsS -o /dev/null -X PUT "$S/versions/1.0.0" -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' --data-binary @examples/manage-files-1.0.0.json
curl -fsS -o /dev/null -X POST "$S/versions/1.0.0/review" -H "Authorization: Bearer $REVIEWER" -H 'Content-Type: application/json' -d '{"decision":"approve"}'
curl -fsS -o /dev/null -X PUT "$S/guard" -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
    -d "{\"upstream\": {\"url\": \"http://127.0.0.1:$UP/mcp\"}, \"mode\": \"strict\"}"
GUARD="http://127.0.0.1:$PORT/t/dev/mcp/io.github.pinfold/manage-files"
META='"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}, "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"}}'
echo "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/call\", \"params\": {\"name\": \"list_files\", \"arguments\": {\"dir\": \"/\"}, $META}}" >"$work/call.json"
echo "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/list\", \"params\": {$META}}" >"$work/list.json"
common=$'Accept: application/json, text/event-stream\nContent-Type: application/json\nMCP-Protocol-Version: 2026-07-28'
call_h="$common"$'\nMcp-Method: tools/call\nMcp-Name: list_files'
list_h="$common"$'\nMcp-Method: tools/list'
auth=$'\n'"Authorization: Bearer $CLIENT"
# The guard's served list, for the bare server to answer the same bytes.
curl -fsS -X POST "$GUARD" -H "Authorization: Bearer $CLIENT" -H 'Accept: application/json, text/event-stream' \
    -H 'Content-Type: application/json' -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/list' \
    --data-binary @"$work/list.json" >"$work/served-list.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["result"]["tools"]) == 3, d' "$work/served-list.json"
curl -fsS -X POST "$GUARD" -H "Authorization: Bearer $CLIENT" -H 'Accept: application/json, text/event-stream' \
    -H 'Content-Type: application/json' -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: list_files' \
    --data-binary @"$work/call.json" | grep -q 'list_files' || { echo "the guard did not forward the call" >&2; exit 1; }
BARE_BYTES_FILE="$work/served-list.json" taskset -c 0 "$BARE_BIN" "$BARE" "http://127.0.0.1:$UP/mcp" >"$work/bare.txt" 2>&1 &
pids+=($!)
BARE_PID=$!
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$BARE/healthz" >/dev/null 2>&1 && break; sleep 0.1; done

# cpu_ticks PID → the process's user + system CPU time, in clock ticks
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)
# wrk_run NAME PID URL BODY HEADERS → "NAME req/s, µs of PID's CPU per
# request"; the figures in $work/NAME.rps and $work/NAME.cpu
wrk_run() {
    local name=$1 pid=$2 url=$3
    BODY_FILE=$4 HEADERS=$5 taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d2s -s bench/post.lua "$url" >/dev/null
    local out rps non2xx reqs before after cpu
    before=$(cpu_ticks "$pid")
    out=$(BODY_FILE=$4 HEADERS=$5 taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d"$DURATION" --latency -s bench/post.lua "$url")
    after=$(cpu_ticks "$pid")
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    reqs=$(awk '/requests in/ {print $1}' <<<"$out")
    non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
    [ -z "$non2xx" ] || { echo "$name: $non2xx answers were not 2xx" >&2; exit 1; }
    cpu=$(awk -v t="$((after - before))" -v hz="$TICK" -v n="$reqs" 'BEGIN{printf "%.2f", t / hz * 1e6 / n}')
    printf '%-16s %10s req/s   %6s us CPU per request\n' "$name" "$rps" "$cpu"
    echo "$rps" >"$work/$name.rps"
    echo "$cpu" >"$work/$name.cpu"
}
# ol_run NAME RATE URL BODY HEADERS → mean and p99 at RATE; the mean in $work/NAME.mean (µs)
ol_run() {
    local name=$1 rate=$2 url=$3 body=$4 headers=$5 args=() line
    while IFS= read -r h; do [ -n "$h" ] && args+=(-H "$h"); done <<<"$headers"
    line=$(taskset -c 1 "$OPENLOOP_BIN" "$url" --rate "$rate" --connections "$CONNECTIONS" --duration "${DURATION%s}" \
        --method POST --body-file "$body" "${args[@]}" 2>&1 | grep '^openloop ') || { echo "open loop on $name failed" >&2; exit 1; }
    local mean p99
    mean=$(sed -n 's/.* mean_us=\([0-9]*\).*/\1/p' <<<"$line")
    p99=$(sed -n 's/.* p99_us=\([0-9]*\).*/\1/p' <<<"$line")
    printf '%-16s %10s req/s   mean %6.3f ms   p99 %6.3f ms (open loop)\n' "$name" "$rate" \
        "$(awk -v u="$mean" 'BEGIN{print u/1000}')" "$(awk -v u="$p99" 'BEGIN{print u/1000}')"
    echo "$mean" >"$work/$name.mean"
}

echo "pinfold $("$PINFOLD_BIN" --version | awk '{print $2}') on $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds of $DURATION per run, $CONNECTIONS connections"
: >"$work/call.ratios"; : >"$work/list.ratios"; : >"$work/latency.diffs"
: >"$work/call.cpu.ratios"; : >"$work/list.cpu.ratios"
for round in $(seq 1 "$ROUNDS"); do
    echo "round $round"
    wrk_run "bare mcp" "$BARE_PID" "http://127.0.0.1:$BARE/mcp" "$work/call.json" "$call_h"
    wrk_run "guard call" "$PINFOLD_PID" "$GUARD" "$work/call.json" "$call_h$auth"
    wrk_run "bare bytes" "$BARE_PID" "http://127.0.0.1:$BARE/bytes" "$work/list.json" "$list_h"
    wrk_run "guard list" "$PINFOLD_PID" "$GUARD" "$work/list.json" "$list_h$auth"
    rate=$(awk '{printf "%d", $1 / 2}' "$work/guard call.rps")
    ol_run "bare mcp" "$rate" "http://127.0.0.1:$BARE/mcp" "$work/call.json" "$call_h"
    ol_run "guard call" "$rate" "$GUARD" "$work/call.json" "$call_h$auth"
    awk -v g="$(cat "$work/guard call.rps")" -v b="$(cat "$work/bare mcp.rps")" 'BEGIN{print g/b}' >>"$work/call.ratios"
    awk -v g="$(cat "$work/guard list.rps")" -v b="$(cat "$work/bare bytes.rps")" 'BEGIN{print g/b}' >>"$work/list.ratios"
    awk -v g="$(cat "$work/guard call.cpu")" -v b="$(cat "$work/bare mcp.cpu")" 'BEGIN{print b/g}' >>"$work/call.cpu.ratios"
    awk -v g="$(cat "$work/guard list.cpu")" -v b="$(cat "$work/bare bytes.cpu")" 'BEGIN{print b/g}' >>"$work/list.cpu.ratios"
    awk -v g="$(cat "$work/guard call.mean")" -v b="$(cat "$work/bare mcp.mean")" 'BEGIN{print (g-b)/1000}' >>"$work/latency.diffs"
done
# summary FILE FORMAT → "median (min .. max)" of the numbers in FILE
summary() {
    sort -g "$1" | awk -v f="$2" '{v[NR]=$1} END {m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2;
        printf f " (" f " .. " f ")", m, v[1], v[NR]}'
}
echo
echo "medians of $ROUNDS rounds (range):"
echo "tools/call pass-through: $(summary "$work/call.ratios" %.2f) x the bare forwarder's throughput (target >= 0.8)"
echo "served tools/list:       $(summary "$work/list.ratios" %.2f) x a bare handler of the same bytes (target >= 0.8)"
echo "server CPU per request, bare / guard: call $(summary "$work/call.cpu.ratios" %.2f), list $(summary "$work/list.cpu.ratios" %.2f)"
echo "added mean latency at half load: $(summary "$work/latency.diffs" %.3f) ms (target <= 0.15 ms)"
