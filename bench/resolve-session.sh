# Sourced by bench/load.sh and bench/instructions.sh: opens a Pinfold resolve
# session whose every later identical call is a cache hit.
#
# Expects from the caller: BASE (Pinfold's URL), TOKEN (a dev token with the
# publisher and client roles), PINFOLD_BIN, data (a scratch directory that is
# also Pinfold's --data-dir, for minting a reviewer token), pids (an array the
# caller's cleanup kills), and optionally UPSTREAM_URL.

RESOLVE_SERVER=dev.pinfold.examples/manage-files-ts-seed
RESOLVE_CARD=examples/ts-upstream/manage-files-seed-1.0.0.json
RESOLVE_BODY='{"name":"manage_files","arguments":{"path":"/tmp/notes.txt","action":"read"}}'

# json_field FIELD < JSON → the field's value (strings unquoted)
json_field() { python3 -c 'import json,sys; v=json.load(sys.stdin).get(sys.argv[1]); print("" if v is None else v)' "$1"; }

# no_route CODE BODY-FILE → true when the answer says the route does not
# exist (404/405 with an empty body or the problem code route_not_found), as
# opposed to a 404 about the request (unknown server, no trusted version...).
no_route() {
    case $1 in
        405) return 0 ;;
        404) [ ! -s "$2" ] || grep -q '"route_not_found"' "$2" ;;
        *) return 1 ;;
    esac
}

# Prepares Pinfold's resolve scenario: an upstream, the card published and
# approved, a session, one miss and one hit. Sets RESOLVE_PATH, or prints a
# reason on stderr and returns 1 to skip the scenario. (Not run in a
# subshell: the upstream's pid must reach the cleanup.)
prepare_resolve() {
    local upstream=${UPSTREAM_URL:-}
    if [ -z "$upstream" ]; then
        command -v node >/dev/null || { echo "node is not installed (needed for examples/ts-upstream; or set UPSTREAM_URL)" >&2; return 1; }
        if [ ! -d examples/ts-upstream/node_modules/@modelcontextprotocol/sdk ]; then
            npm ci --prefix examples/ts-upstream --no-audit --no-fund --loglevel=error >&2 || { echo "npm ci failed in examples/ts-upstream" >&2; return 1; }
        fi
        node examples/ts-upstream/server.mjs --shape seed --port 0 >"$data/upstream.out" 2>"$data/upstream.err" &
        pids+=($!)
        for _ in $(seq 1 200); do [ -s "$data/upstream.out" ] && break; sleep 0.05; done
        local up_port
        up_port=$(head -n1 "$data/upstream.out")
        [[ "$up_port" =~ ^[0-9]+$ ]] || { cat "$data/upstream.err" >&2; echo "examples/ts-upstream did not start" >&2; return 1; }
        upstream="http://127.0.0.1:$up_port/mcp"
    fi

    local code s="$BASE/v1/tenants/dev/servers/${RESOLVE_SERVER/\//%2F}/versions/1.0.0"
    code=$(curl -sS -o "$data/publish.json" -w '%{http_code}' -X PUT "$s" -H "Authorization: Bearer $TOKEN" \
        -H 'Content-Type: application/json' --data-binary @"$RESOLVE_CARD")
    [[ "$code" =~ ^20[01]$ ]] || { echo "publishing $RESOLVE_CARD answered $code: $(cat "$data/publish.json")" >&2; return 1; }
    local reviewer
    reviewer=$("$PINFOLD_BIN" token --data-dir "$data" --sub bench-reviewer --tenant dev --roles reviewer)
    code=$(curl -sS -o "$data/review.json" -w '%{http_code}' -X POST "$s/review" -H "Authorization: Bearer $reviewer" \
        -H 'Content-Type: application/json' -d '{"decision":"approve","note":"bench"}')
    [ "$code" = 200 ] || { echo "approving $RESOLVE_SERVER answered $code: $(cat "$data/review.json")" >&2; return 1; }

    code=$(curl -sS -o "$data/session.json" -w '%{http_code}' -X POST "$BASE/v1/tenants/dev/sessions" \
        -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
        -d "{\"server\":\"$RESOLVE_SERVER\",\"upstream\":{\"url\":\"$upstream\"}}")
    if no_route "$code" "$data/session.json"; then
        echo "this Pinfold has no resolve sessions (POST /v1/tenants/dev/sessions answered $code)" >&2
        return 1
    fi
    [ "$code" = 201 ] || { echo "creating a session answered $code: $(cat "$data/session.json")" >&2; return 1; }
    local id path
    id=$(json_field id <"$data/session.json")
    path="/v1/tenants/dev/sessions/$id/resolve"
    local body=$RESOLVE_BODY
    local first second
    for attempt in first second; do
        code=$(curl -sS -o "$data/resolve-$attempt.json" -w '%{http_code}' -X POST "$BASE$path" \
            -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d "$body")
        if [ "$attempt" = first ] && no_route "$code" "$data/resolve-first.json"; then
            echo "this Pinfold has no resolve route (POST $path answered 404)" >&2
            return 1
        fi
        [ "$code" = 200 ] || { echo "resolve answered $code: $(cat "$data/resolve-$attempt.json")" >&2; return 1; }
    done
    first=$(json_field source <"$data/resolve-first.json")
    second=$(json_field source <"$data/resolve-second.json")
    [ "$second" = cache ] || { echo "the second identical resolve came from '$second' (first: '$first'), not the cache" >&2; return 1; }
    RESOLVE_PATH=$path
}
