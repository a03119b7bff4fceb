#!/usr/bin/env bash
# Sets up a release Pinfold (SQLite) and the Rust reference upstream, opens a
# session, and runs bench/miss-overhead.py: the mean cost Pinfold adds to a
# resolve miss over calling the upstream directly, beside what the bare
# forwarder of bench/bare (the same second HTTP hop, nothing else) adds.
#
#   bench/miss-overhead.sh [N]     # PINFOLD_BIN, UPSTREAM_BIN default to target/release/
set -euo pipefail
cd "$(dirname "$0")/.."
PINFOLD_BIN=${PINFOLD_BIN:-target/release/pinfold}
# Measure the server, not its rate limits.
export PINFOLD_RATE_LIMITS__ENABLED=false
UPSTREAM_BIN=${UPSTREAM_BIN:-target/release/pinfold-example-upstream}
BARE_BIN=${BARE_BIN:-target/release/bare}
[ -x "$PINFOLD_BIN" ] || cargo build --release --locked --bin pinfold >&2
[ -x "$UPSTREAM_BIN" ] || cargo build --release --locked -p pinfold-example-upstream >&2
[ -x "$BARE_BIN" ] || cargo build --release --locked --manifest-path bench/bare/Cargo.toml --target-dir target >&2
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
PORT=$(free_port); UP=$(free_port); BARE=$(free_port)
"$PINFOLD_BIN" serve --data-dir "$work/data" --listen "127.0.0.1:$PORT" >"$work/out.txt" 2>"$work/err.txt" &
pids+=($!)
"$UPSTREAM_BIN" --listen "127.0.0.1:$UP" >"$work/up.txt" 2>&1 &
pids+=($!)
# The bare forwarder: the same second hop without anything Pinfold adds.
"$BARE_BIN" "$BARE" "http://127.0.0.1:$UP/mcp" >"$work/bare.txt" 2>&1 &
pids+=($!)
for _ in $(seq 1 150); do curl -fs "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && curl -fs "http://127.0.0.1:$UP/calls" >/dev/null 2>&1 && curl -fs "http://127.0.0.1:$BARE/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
TOKEN=$(sed -n 's/.*export PINFOLD_TOKEN=\([^ ]*\).*/\1/p' "$work/out.txt")
REVIEWER=$("$PINFOLD_BIN" token --data-dir "$work/data" --sub rita --tenant dev --roles reviewer)
T="http://127.0.0.1:$PORT/v1/tenants/dev"
M="$T/servers/io.github.pinfold%2Fmanage-files/versions/1.0.0"
curl -fsS -o /dev/null -X PUT "$M" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' --data-binary @examples/manage-files-1.0.0.json
curl -fsS -o /dev/null -X POST "$M/review" -H "Authorization: Bearer $REVIEWER" -H 'Content-Type: application/json' -d '{"decision":"approve"}'
ID=$(curl -fsS -X POST "$T/sessions" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -d "{\"server\":\"io.github.pinfold/manage-files\",\"upstream\":{\"url\":\"http://127.0.0.1:$UP/mcp\"}}" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
python3 bench/miss-overhead.py "http://127.0.0.1:$PORT" "$TOKEN" "/v1/tenants/dev/sessions/$ID" "http://127.0.0.1:$UP/mcp" "${1:-2000}" "http://127.0.0.1:$BARE"
