#!/usr/bin/env bash
# The official MCP conformance suite's server scenarios (npm
# @modelcontextprotocol/conformance, pinned in examples/mcp-peers), run over
# Streamable HTTP against two reference servers, each twice: directly, and
# through the Pinfold guard, with the server's signature captured by
# `pinfold capture`, published, approved and bound to a guard route in
# strict mode. Every scenario that passes directly must pass through the
# guard (scripts/guard-conformance/compare.py prints both results of each
# server and fails the step otherwise).
#
# - @modelcontextprotocol/server-everything (the suite's active scenarios):
#   it offers few of the suite's fixtures. Two scenarios pass directly only
#   because it answers a call of a tool it does not have with a tool error;
#   the guard refuses that undeclared tool with -32010, and for those two
#   the check is that exactly this happens.
# - examples/mcp-peers/conformance-server.mjs (all scenarios, pending ones
#   included): a server on the official TypeScript SDK that implements every
#   fixture the scenarios ask for, all in its signature, so the comparison
#   has no exception: a scenario passing directly and failing through the
#   guard fails the step. Its stream resumption (SEP-1699), which the
#   suite's server-sse-polling does not reach, is checked the same way with
#   examples/mcp-peers/sdk-resume.mjs.
#
# The suite's server scenarios connect without credentials and the guard
# needs a tenant's token, so the guarded runs go through
# scripts/guard-conformance/bearer-proxy.mjs, which adds the token and
# nothing else.
#
# Needs Node >= 22 (installed into target/node22 when older, as
# scripts/conformance.sh does). Non-interactive. Results:
# target/conformance-guard/{everything,fixtures}/{direct,guarded}/ and a
# summary.txt beside them.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE22=22.23.3
PEERS=examples/mcp-peers
SUITE=$PEERS/node_modules/@modelcontextprotocol/conformance/dist/index.js
EVERYTHING=$PEERS/node_modules/@modelcontextprotocol/server-everything/dist/index.js
OUT=target/conformance-guard
FIXTURES=$PEERS/conformance-server.mjs
NAME=io.github.modelcontextprotocol/everything
FIXTURES_NAME=io.github.pinfold/conformance-fixtures

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

# The reference servers.
EPORT=$(free_port)
PORT=$EPORT node "$EVERYTHING" streamableHttp >"$work/everything.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$EPORT/" || fail "server-everything did not start ($(tail -5 "$work/everything.log"))"
FPORT=$(free_port)
node "$FIXTURES" "$FPORT" >"$work/fixtures.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do grep -q . "$work/fixtures.log" && break; sleep 0.1; done
grep -q "^http://127.0.0.1:$FPORT/mcp$" "$work/fixtures.log" \
    || fail "the conformance fixture server did not start ($(tail -5 "$work/fixtures.log"))"

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

# guard_run LABEL NAME UPSTREAM [SUITE ARGS...]: captures the server's
# signature, publishes and approves it, binds a strict guard route, puts the
# token-adding forwarder in front of the guard and runs the suite's server
# scenarios directly against UPSTREAM and through the guard, into
# $OUT/LABEL/{direct,guarded}.
guard_run() {
    local label=$1 name=$2 upstream=$3 code xport
    shift 3
    "$PINFOLD_BIN" capture "$upstream" --name "$name" --version 1.0.0 --out "$work/$label-card.json" \
        >/dev/null 2>"$work/$label-capture.txt" || fail "pinfold capture $label: $(tail -5 "$work/$label-capture.txt")"
    grep "^capture: $upstream:" "$work/$label-capture.txt" || true
    PINFOLD_TOKEN=$PUBLISHER "$PINFOLD_BIN" publish "$work/$label-card.json" --server "$BASE" --tenant dev >/dev/null \
        || fail "pinfold publish $label"
    local s="$BASE/v1/tenants/dev/servers/${name//\//%2F}"
    code=$(curl -sS -o "$work/$label-review.json" -w '%{http_code}' -X POST "$s/versions/1.0.0/review" \
        -H "Authorization: Bearer $REVIEWER" -H 'Content-Type: application/json' -d '{"decision":"approve"}')
    [ "$code" = 200 ] || fail "approve $label: $code $(cat "$work/$label-review.json")"
    code=$(curl -sS -o "$work/$label-route.json" -w '%{http_code}' -X PUT "$s/guard" \
        -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
        -d "{\"upstream\": {\"url\": \"$upstream\"}, \"mode\": \"strict\"}")
    case "$code" in 200|201) ;; *) fail "guard route $label: $code $(cat "$work/$label-route.json")" ;; esac

    xport=$(free_port)
    node scripts/guard-conformance/bearer-proxy.mjs "$xport" "$BASE/t/dev/mcp/$name" "$CLIENT" >"$work/$label-proxy.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 1 100); do grep -q . "$work/$label-proxy.log" && break; sleep 0.1; done

    mkdir -p "$OUT/$label"
    echo "==> server scenarios, directly against $label"
    node "$SUITE" server "$@" --url "$upstream" -o "$OUT/$label/direct" </dev/null >"$OUT/$label/direct.log" 2>&1 || true
    echo "==> server scenarios, against $label through the guard"
    node "$SUITE" server "$@" --url "http://127.0.0.1:$xport/mcp" -o "$OUT/$label/guarded" \
        </dev/null >"$OUT/$label/guarded.log" 2>&1 || true
}

rm -rf "$OUT"
mkdir -p "$OUT"
guard_run everything "$NAME" "http://127.0.0.1:$EPORT/mcp"
guard_run fixtures "$FIXTURES_NAME" "http://127.0.0.1:$FPORT/mcp" --suite all
# The suite's server-sse-polling declares protocol 2025-03-26, gets no
# priming event and so never sees a stream closed mid-call; an SDK client
# that negotiates 2025-11-25 does, and must resume it with Last-Event-ID
# through the guard as it does directly.
resumed() {
    node "$PEERS/sdk-resume.mjs" "$1" </dev/null 2>&1 | tee -a "$OUT/fixtures/resume.log" | python3 -c '
import json, sys
try:
    d = json.loads(sys.stdin.read().strip().splitlines()[-1])
    ok = d["resumed"] and d["result"] and not d["result"].get("isError")
except Exception:
    ok = False
print("yes" if ok else "no")'
}
resume_direct=$(resumed "http://127.0.0.1:$FPORT/mcp")
resume_guarded=$(resumed "http://127.0.0.1:$(head -1 "$work/fixtures-proxy.log")/mcp")

status=0
echo
echo "server-everything ($OUT/everything):"
python3 scripts/guard-conformance/compare.py "$OUT/everything/direct" "$OUT/everything/guarded" \
    | tee "$OUT/everything/summary.txt" || status=1
echo
echo "the conformance fixture server ($OUT/fixtures):"
python3 scripts/guard-conformance/compare.py --fixtures "$OUT/fixtures/direct" "$OUT/fixtures/guarded" \
    | tee "$OUT/fixtures/summary.txt" || status=1
echo "test_reconnection's stream closed mid-call, resumed with Last-Event-ID (SEP-1699, an SDK client on 2025-11-25):" \
    "directly $resume_direct, through the guard $resume_guarded" | tee -a "$OUT/fixtures/summary.txt"
if [ "$resume_direct" = yes ] && [ "$resume_guarded" != yes ]; then
    echo "resumes directly but not through the guard ($OUT/fixtures/resume.log)" >&2
    status=1
fi
exit $status
