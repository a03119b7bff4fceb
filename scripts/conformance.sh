#!/usr/bin/env bash
# The official MCP conformance suite (npm @modelcontextprotocol/conformance,
# pinned in examples/mcp-peers) runs its client scenarios with
# `pinfold capture` as the client: the suite starts a test server per
# scenario and runs the command with the server's URL as its last argument.
#
# Which scenarios, and why (a capture lists; it never calls a tool and has
# no OAuth client):
#   initialize  the handshake; every check must pass. Its test server
#               answers every method it does not know (server/discover
#               included) with {}: the probe must fall back to initialize.
#   tools_call  the handshake and tools/list must work and the card must hold
#               add_numbers; its one check, "the client called add_numbers",
#               cannot apply and must be the only failure.
#   sse-retry   the handshake (again {} for server/discover), the listing and
#               the GET event stream: "reconnects via GET" must pass; its two
#               timing checks measure the reconnection after a tools/call
#               stream closes, which a capture never opens, and must be the
#               only warnings.
# Not run: elicitation-sep1034-client-defaults (answers an elicitation during
# a tools/call) and every auth/* scenario (OAuth authorization flows; capture
# sends static --header credentials).
#
# The suite needs Node >= 22: when the machine's node is older, node@22 from
# the npm registry is installed into target/node22 and put first on PATH.
# Non-interactive (no standard input). Results: target/conformance/<scenario>/.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE22=22.23.3
PEERS=examples/mcp-peers
SUITE=$PEERS/node_modules/@modelcontextprotocol/conformance/dist/index.js
OUT=target/conformance-results

if [ ! -f "$SUITE" ]; then
    npm ci --prefix "$PEERS" --no-audit --no-fund </dev/null
fi

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
echo "node $(node --version)"

cargo build --quiet --locked --bin pinfold
PINFOLD=$PWD/target/debug/pinfold

failed=0
for scenario in initialize tools_call sse-retry; do
    dir=$OUT/$scenario
    rm -rf "$dir"
    mkdir -p "$dir"
    echo "==> conformance client scenario $scenario"
    # The suite splits --command on spaces: no spaces in these paths.
    set +e
    node "$SUITE" client --scenario "$scenario" --timeout 60000 -o "$dir/results" \
        --command "$PINFOLD capture --out $PWD/$dir/card.json" </dev/null >"$dir/suite.log" 2>&1
    code=$?
    set -e
    if python3 scripts/conformance-check.py "$scenario" "$dir" "$code"; then
        echo "    $scenario: passed"
    else
        failed=1
        echo "    $scenario: FAILED (the suite's log: $dir/suite.log)"
        tail -n 40 "$dir/suite.log"
    fi
done
exit $failed
