#!/usr/bin/env bash
# Runs the steps of docs/RESOLVE.md against a fresh Pinfold and checks each
# answer, with three real upstream MCP servers:
#
#   rust        examples/upstream (the official Rust SDK, rmcp)
#   ts-seed     examples/ts-upstream --shape seed       (the official TypeScript SDK;
#               tools/resolve answers {tool})
#   ts-ext      examples/ts-upstream --shape extension  (the tool-resolution
#               extension: {resultType: "complete", name, annotations})
#
#   scripts/resolve-walkthrough.sh     # PINFOLD_BIN / UPSTREAM_BIN default to target/debug/
# Needs curl, python3, node (>= 20) and npm.
set -euo pipefail
cd "$(dirname "$0")/.."
PINFOLD_BIN=${PINFOLD_BIN:-target/debug/pinfold}
UPSTREAM_BIN=${UPSTREAM_BIN:-target/debug/pinfold-example-upstream}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
[ -x "$PINFOLD_BIN" ] || cargo build --locked --bin pinfold >&2
[ -x "$UPSTREAM_BIN" ] || cargo build --locked -p pinfold-example-upstream >&2
fail() { echo "resolve walkthrough FAILED: $*" >&2; exit 1; }
command -v node >/dev/null || fail "node is not installed (the TypeScript upstream needs node >= 20)"

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
wait_http() { for _ in $(seq 1 150); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }

PORT=$(free_port)
"$PINFOLD_BIN" serve --data-dir "$work/data" --listen "127.0.0.1:$PORT" >"$work/out.txt" 2>"$work/err.txt" &
pids+=($!)
wait_http "http://127.0.0.1:$PORT/healthz" || { cat "$work/err.txt" >&2; fail "pinfold did not start"; }
PINFOLD_TOKEN=$(sed -n 's/.*export PINFOLD_TOKEN=\([^ ]*\).*/\1/p' "$work/out.txt")
[ -n "$PINFOLD_TOKEN" ] || fail "serve printed no token"
REVIEWER=$("$PINFOLD_BIN" token --data-dir "$work/data" --sub rita --tenant dev --roles reviewer)
T="http://127.0.0.1:$PORT/v1/tenants/dev"
auth=(-H "Authorization: Bearer $PINFOLD_TOKEN")
json=(-H 'Content-Type: application/json')
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval('d' + sys.argv[1]))" "$1"; }

# publish CARD, approve it; prints the server name
publish() {
    local name enc code
    name=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' "$1")
    enc=${name//\//%2F}
    code=$(curl -sS -o /dev/null -w '%{http_code}' -X PUT "$T/servers/$enc/versions/1.0.0" "${auth[@]}" "${json[@]}" --data-binary @"$1")
    [ "$code" = 201 ] || fail "publish $1: $code"
    code=$(curl -sS -o /dev/null -w '%{http_code}' -X POST "$T/servers/$enc/versions/1.0.0/review" \
        -H "Authorization: Bearer $REVIEWER" "${json[@]}" -d '{"decision":"approve"}')
    [ "$code" = 200 ] || fail "approve $1: $code"
    echo "$name"
}

# session SERVER URL → session id
session() {
    curl -sS -X POST "$T/sessions" "${auth[@]}" "${json[@]}" \
        -d "{\"server\": \"$1\", \"upstream\": {\"url\": \"$2\"}}" | field '["id"]'
}

# resolve ID ACTION → the answer
resolve() {
    curl -sS -X POST "$T/sessions/$1/resolve" "${auth[@]}" "${json[@]}" \
        -d "{\"name\": \"manage_files\", \"arguments\": {\"path\": \"/notes.txt\", \"action\": \"$2\"}}"
}

# check LABEL SERVER URL CALLS_URL: read → read-only, delete → destructive,
# read again → the cache, and the upstream saw two calls.
check() {
    local label=$1 id answer
    id=$(session "$2" "$3") || fail "$label: no session"
    answer=$(resolve "$id" read)
    [ "$(echo "$answer" | field '["source"]')" = upstream ] || fail "$label read: $answer"
    [ "$(echo "$answer" | field '["tool"]["annotations"]["readOnlyHint"]')" = True ] || fail "$label read: $answer"
    [ "$(echo "$answer" | field '["conformant"]')" = True ] || fail "$label read: $answer"
    answer=$(resolve "$id" delete)
    [ "$(echo "$answer" | field '["tool"]["annotations"]["destructiveHint"]')" = True ] || fail "$label delete: $answer"
    answer=$(resolve "$id" read)
    [ "$(echo "$answer" | field '["source"]')" = cache ] || fail "$label read again: $answer"
    local calls
    # The Rust upstream counts {"calls": n}; the TypeScript one {"resolve": n, ...}.
    calls=$(curl -sS "$4" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("calls", d.get("resolve", 0)))')
    [ "$calls" -ge 2 ] || fail "$label: the upstream counted $calls calls"
    # Closing the session: its answers are gone.
    code=$(curl -sS -o /dev/null -w '%{http_code}' -X DELETE "$T/sessions/$id" "${auth[@]}")
    [ "$code" = 204 ] || fail "$label close: $code"
    code=$(curl -sS -o /dev/null -w '%{http_code}' -X POST "$T/sessions/$id/resolve" "${auth[@]}" "${json[@]}" \
        -d '{"name": "manage_files", "arguments": {"path": "/a", "action": "read"}}')
    [ "$code" = 404 ] || fail "$label resolve after close: $code"
    echo "  $label: read → read-only, delete → destructive, repeat → cache, close → 404"
}

# 1. The Rust reference upstream.
UP=$(free_port)
"$UPSTREAM_BIN" --listen "127.0.0.1:$UP" >"$work/up.txt" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$UP/calls" || fail "the reference upstream did not start"
check rust "$(publish examples/manage-files-1.0.0.json)" "http://127.0.0.1:$UP/mcp" "http://127.0.0.1:$UP/calls"

# 2. The TypeScript SDK upstream, in the seed's and the extension's shape.
(cd examples/ts-upstream && npm ci --no-audit --no-fund --loglevel=error) >&2
for shape in seed extension; do
    node examples/ts-upstream/server.mjs --shape "$shape" --port 0 >"$work/ts-$shape.txt" 2>&1 &
    pids+=($!)
    for _ in $(seq 1 100); do [ -s "$work/ts-$shape.txt" ] && break; sleep 0.1; done
    TSPORT=$(head -n1 "$work/ts-$shape.txt" | tr -dc '0-9')
    [ -n "$TSPORT" ] || fail "the TypeScript upstream ($shape) printed no port: $(cat "$work/ts-$shape.txt")"
    name=$(publish "examples/ts-upstream/manage-files-$shape-1.0.0.json")
    check "ts-$shape" "$name" "http://127.0.0.1:$TSPORT/mcp" "http://127.0.0.1:$TSPORT/calls"
done
echo "resolve walkthrough passed"
