#!/usr/bin/env bash
# Installs the TypeScript-SDK upstream from its lock file (npm ci) and checks
# it over real HTTP with curl, in every mode Pinfold's resolve is driven
# against:
#
#   seed       {tool: Tool}; `resolve: true` marker; capabilities.tools.resolve
#   seed, SSE  the same, answered on an SSE stream instead of a JSON body
#   extension  {resultType: "complete", name, annotations}; the _meta marker;
#              capabilities.extensions; -32021 without the client capability
#   extension, stateless
#              no MCP session; the client capability travels in each
#              request's _meta
#
# Each mode: initialize, notifications/initialized, tools/list, tools/resolve
# for read / delete / append / replace and an unknown action, an unknown tool
# (-32602), and the /calls counter. Needs node (>= 20), npm and curl.
set -euo pipefail
cd "$(dirname "$0")"

command -v node >/dev/null || { echo "node is not installed" >&2; exit 1; }
command -v curl >/dev/null || { echo "curl is not installed" >&2; exit 1; }
echo "node $(node --version); installing from package-lock.json"
npm ci --no-audit --no-fund --loglevel=error

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

failures=0
passes=0
fail() { echo "  FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { passes=$((passes + 1)); }

# start NAME ARGS... → sets PORT; the server prints its port as the first line.
start() {
    local name=$1; shift
    node server.mjs --port 0 "$@" >"$work/$name.out" 2>"$work/$name.err" &
    pids+=($!)
    local pid=$!
    for _ in $(seq 1 200); do
        [ -s "$work/$name.out" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    PORT=$(head -n1 "$work/$name.out" 2>/dev/null || true)
    [[ "$PORT" =~ ^[0-9]+$ ]] || { cat "$work/$name.err" >&2; echo "$name did not start" >&2; exit 1; }
}

# rpc BODY [HEADERS...] → the JSON-RPC message of the answer on stdout (the
# JSON body, or the `data:` line of an SSE answer); response headers in $work/h.
rpc() {
    local body=$1; shift
    local raw
    raw=$(curl -sS -D "$work/h" "http://127.0.0.1:$PORT/mcp" \
        -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' \
        "$@" --data-binary "$body")
    if grep -qi '^content-type: text/event-stream' "$work/h"; then
        sed -n 's/^data: //p' <<<"$raw" | grep -v '^$' | tail -n1
    else
        printf '%s' "$raw"
    fi
}

# expect LABEL JSON JS-EXPRESSION-ON-r → passes when the expression is true.
expect() {
    local label=$1 json=$2 expr=$3
    if node -e 'const r = JSON.parse(process.argv[1]); if (!('"$expr"')) process.exit(1);' "$json" 2>/dev/null; then
        pass
    else
        fail "$label: expected ($expr), got: ${json:0:400}"
    fi
}

EXT='"io.modelcontextprotocol/tool-resolution"'
HINTS='["readOnlyHint","destructiveHint","idempotentHint","openWorldHint"]'

# check MODE-NAME SHAPE STATEFUL(yes|no) [server flags...]
check() {
    local name=$1 shape=$2 stateful=$3; shift 3
    echo "== $name (--shape $shape $*)"
    start "$name" --shape "$shape" "$@"
    local caps='{}' session=() meta=''
    if [ "$shape" = extension ]; then caps="{\"extensions\":{$EXT:{}}}"; fi
    if [ "$stateful" = no ]; then meta=",\"_meta\":{\"io.modelcontextprotocol/clientCapabilities\":$caps}"; fi

    local r
    r=$(rpc "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":$caps,\"clientInfo\":{\"name\":\"check.sh\",\"version\":\"1\"}}}")
    if [ "$shape" = seed ]; then
        expect "initialize declares tools.resolve" "$r" 'r.result.capabilities.tools.resolve === true'
    else
        expect "initialize declares the extension" "$r" "typeof r.result.capabilities.extensions[$EXT] === 'object'"
    fi
    local sid
    sid=$(awk -F': ' 'tolower($1)=="mcp-session-id" {print $2}' "$work/h" | tr -d '\r')
    if [ "$stateful" = yes ]; then
        [ -n "$sid" ] || fail "initialize returned no Mcp-Session-Id"
        session=(-H "mcp-session-id: $sid" -H 'mcp-protocol-version: 2025-06-18')
        local code
        code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/mcp" \
            -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' "${session[@]}" \
            --data-binary '{"jsonrpc":"2.0","method":"notifications/initialized"}')
        [ "$code" = 202 ] && pass || fail "notifications/initialized answered $code, not 202"
    else
        [ -z "$sid" ] && pass || fail "stateless server returned an Mcp-Session-Id"
    fi

    r=$(rpc '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' "${session[@]}")
    expect "tools/list worst case" "$r" \
        'r.result.tools.length === 1 && r.result.tools[0].name === "manage_files" && r.result.tools[0].annotations.destructiveHint === true && r.result.tools[0].annotations.readOnlyHint === false'
    if [ "$shape" = seed ]; then
        expect "tools/list seed marker" "$r" 'r.result.tools[0].resolve === true'
    else
        expect "tools/list extension marker" "$r" "r.result.tools[0]._meta[$EXT].resolvable === true && !('resolve' in r.result.tools[0])"
    fi

    # action → expected [readOnly, destructive, idempotent, openWorld], as the seed's reference refines them.
    local action want
    for pair in read:true,false,true,false append:false,false,false,false replace:false,true,true,false \
        delete:false,true,true,false bogus:false,true,false,false; do
        action=${pair%%:*}; want="[${pair#*:}]"
        r=$(rpc "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/resolve\",\"params\":{\"name\":\"manage_files\",\"arguments\":{\"path\":\"/tmp/notes.txt\",\"action\":\"$action\"}$meta}}" "${session[@]}")
        if [ "$shape" = seed ]; then
            expect "resolve $action (seed shape)" "$r" \
                "r.result.tool.name === 'manage_files' && r.result.tool.resolve === true && typeof r.result.tool.inputSchema === 'object' && JSON.stringify($HINTS.map(h => r.result.tool.annotations[h])) === JSON.stringify($want)"
        else
            expect "resolve $action (extension shape)" "$r" \
                "r.result.resultType === 'complete' && r.result.name === 'manage_files' && !('tool' in r.result) && JSON.stringify($HINTS.map(h => r.result.annotations[h])) === JSON.stringify($want)"
        fi
    done
    # Determinism: the same arguments, keys reordered, answer the same.
    local a b
    a=$(rpc "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/resolve\",\"params\":{\"name\":\"manage_files\",\"arguments\":{\"path\":\"/a\",\"action\":\"read\"}$meta}}" "${session[@]}")
    b=$(rpc "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/resolve\",\"params\":{\"name\":\"manage_files\",\"arguments\":{\"action\":\"read\",\"path\":\"/a\"}$meta}}" "${session[@]}")
    [ "$a" = "$b" ] && pass || fail "resolve is not deterministic: $a vs $b"

    r=$(rpc "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/resolve\",\"params\":{\"name\":\"no_such_tool\",\"arguments\":{}$meta}}" "${session[@]}")
    expect "unknown tool → -32602" "$r" 'r.error.code === -32602'
    r=$(rpc "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/resolve\",\"params\":{\"name\":\"manage_files\"$meta}}" "${session[@]}")
    expect "missing arguments → -32602" "$r" 'r.error.code === -32602'

    if [ "$shape" = extension ]; then
        # A client that never declared the extension: its own session, no capability.
        local bare=()
        r=$(rpc '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"check.sh","version":"1"}}}')
        if [ "$stateful" = yes ]; then
            bare=(-H "mcp-session-id: $(awk -F': ' 'tolower($1)=="mcp-session-id" {print $2}' "$work/h" | tr -d '\r')" -H 'mcp-protocol-version: 2025-06-18')
        fi
        r=$(rpc '{"jsonrpc":"2.0","id":7,"method":"tools/resolve","params":{"name":"manage_files","arguments":{"path":"/a","action":"read"}}}' "${bare[@]}")
        expect "no client capability → -32021" "$r" 'r.error.code === -32021'
    fi

    r=$(curl -fsS "http://127.0.0.1:$PORT/calls")
    local resolves=9; [ "$shape" = extension ] && resolves=10
    expect "/calls counts every request" "$r" "r.resolve === $resolves && r.methods['tools/list'] === 1 && r.total === r.resolve + 1 + r.methods.initialize"

    if [ "$stateful" = yes ]; then
        # The SDK's own client over the same transport: initialize, tools/list,
        # four tools/resolve in its own MCP session.
        if node client-check.mjs "http://127.0.0.1:$PORT/mcp" "$shape" >"$work/client.txt" 2>&1; then
            pass
        else
            fail "SDK client round trip: $(cat "$work/client.txt")"
        fi
        r=$(curl -fsS "http://127.0.0.1:$PORT/calls")
        expect "/calls after the SDK client" "$r" "r.resolve === $resolves + 4 && r.methods['tools/list'] === 2"
    fi
    code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "http://127.0.0.1:$PORT/calls")
    r=$(curl -fsS "http://127.0.0.1:$PORT/calls")
    expect "DELETE /calls resets" "$r" 'r.total === 0'
}

check seed seed yes
check seed-sse seed yes --sse
check extension extension yes --result-meta
check extension-stateless extension no --stateless

echo
echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
