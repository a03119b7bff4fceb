#!/usr/bin/env bash
# The official MCP conformance suite's server scenarios (npm
# @modelcontextprotocol/conformance, pinned in examples/mcp-peers), run
# against the reference server @modelcontextprotocol/server-everything over
# Streamable HTTP twice: directly, and through the Pinfold guard, with the
# server's signature captured by `pinfold capture`, published, approved and
# bound to a guard route in strict mode. Every scenario that passes
# directly must pass through the guard (scripts/guard-conformance/compare.py
# prints both results).
#
# The suite's server scenarios connect without credentials and the guard
# needs a tenant's token, so the guarded run goes through
# scripts/guard-conformance/bearer-proxy.mjs, which adds the token and
# nothing else.
#
# Needs Node >= 22 (installed into target/node22 when older, as
# scripts/conformance.sh does). Non-interactive. Results:
# target/conformance-guard/{direct,guarded}/.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE22=22.23.3
PEERS=examples/mcp-peers
SUITE=$PEERS/node_modules/@modelcontextprotocol/conformance/dist/index.js
EVERYTHING=$PEERS/node_modules/@modelcontextprotocol/server-everything/dist/index.js
OUT=target/conformance-guard
NAME=io.github.modelcontextprotocol/everything

[ -f "$SUITE" ] && [ -f "$EVERYTHING" ] || npm ci --prefix "$PEERS" --no-audit --no-fund </dev/null

node_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }
if [ "$(node_major)" -lt 22 ]; then
    prefix=target/node22
    if [ ! -x "$prefix/node_modules/.bin/node" ] \
        || [ "$("$prefix/node_modules/.bin/node" -p 'process.versions.node')" != "$NODE22" ]; then
        echo "node $(node --version 2>/dev/null || echo none) is older than 22: installing node@$NODE22 into $prefix"
        npm install --prefix "$prefix" --no-audit --no-fund --no-save "node@$NODE22" </dev/null
    fi
    PATH="$PWD/$prefix/node_modules/.bin:$PATH"
    export PATH
fi
[ "$(node_major)" -ge 22 ] || { echo "the conformance suite needs node >= 22" >&2; exit 1; }

PINFOLD_BIN=${PINFOLD_BIN:-target/debug/pinfold}
[ -x "$PINFOLD_BIN" ] || cargo build --quiet --locked --bin pinfold
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
fail() { echo "guard conformance FAILED: $*" >&2; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

wait_http() { for _ in $(seq 1 200); do curl -s -o /dev/null "$1" && return 0; sleep 0.1; done; return 1; }

# The reference server.
EPORT=$(free_port)
PORT=$EPORT node "$EVERYTHING" streamableHttp >"$work/everything.log" 2>&1 &
pids+=($!)
UPSTREAM="http://127.0.0.1:$EPORT/mcp"
wait_http "http://127.0.0.1:$EPORT/" || fail "server-everything did not start ($(tail -5 "$work/everything.log"))"

# Pinfold, in dev mode on loopback (which lets the guard reach loopback).
PPORT=$(free_port)
"$PINFOLD_BIN" serve --data-dir "$work/data" --listen "127.0.0.1:$PPORT" >"$work/out.txt" 2>"$work/err.txt" &
pids+=($!)
wait_http "http://127.0.0.1:$PPORT/healthz" || fail "pinfold did not start"
BASE="http://127.0.0.1:$PPORT"
PUBLISHER=$("$PINFOLD_BIN" token --data-dir "$work/data" --sub pat --tenant dev --roles publisher)
REVIEWER=$("$PINFOLD_BIN" token --data-dir "$work/data" --sub rita --tenant dev --roles reviewer)
ADMIN=$("$PINFOLD_BIN" token --data-dir "$work/data" --sub alice --tenant dev --roles admin)
CLIENT=$("$PINFOLD_BIN" token --data-dir "$work/data" --sub carl --tenant dev --roles client)

# Capture, publish, approve, route.
"$PINFOLD_BIN" capture "$UPSTREAM" --name "$NAME" --version 1.0.0 --out "$work/card.json" >/dev/null \
    || fail "pinfold capture"
PINFOLD_TOKEN=$PUBLISHER "$PINFOLD_BIN" publish "$work/card.json" --server "$BASE" --tenant dev >/dev/null \
    || fail "pinfold publish"
S="$BASE/v1/tenants/dev/servers/${NAME//\//%2F}"
code=$(curl -sS -o "$work/review.json" -w '%{http_code}' -X POST "$S/versions/1.0.0/review" \
    -H "Authorization: Bearer $REVIEWER" -H 'Content-Type: application/json' -d '{"decision":"approve"}')
[ "$code" = 200 ] || fail "approve: $code $(cat "$work/review.json")"
code=$(curl -sS -o "$work/route.json" -w '%{http_code}' -X PUT "$S/guard" \
    -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
    -d "{\"upstream\": {\"url\": \"$UPSTREAM\"}, \"mode\": \"strict\"}")
case "$code" in 200|201) ;; *) fail "guard route: $code $(cat "$work/route.json")" ;; esac

# The token-adding forwarder in front of the guard.
XPORT=$(free_port)
node scripts/guard-conformance/bearer-proxy.mjs "$XPORT" "$BASE/t/dev/mcp/$NAME" "$CLIENT" >"$work/proxy.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do grep -q . "$work/proxy.log" && break; sleep 0.1; done

rm -rf "$OUT"
mkdir -p "$OUT"
echo "==> server scenarios, directly against server-everything"
node "$SUITE" server --url "$UPSTREAM" -o "$OUT/direct" </dev/null >"$OUT/direct.log" 2>&1 || true
echo "==> server scenarios, through the guard"
node "$SUITE" server --url "http://127.0.0.1:$XPORT/mcp" -o "$OUT/guarded" </dev/null >"$OUT/guarded.log" 2>&1 || true
python3 scripts/guard-conformance/compare.py "$OUT/direct" "$OUT/guarded" | tee "$OUT/summary.txt"
