#!/usr/bin/env bash
# The OpenAPI document is a contract: schemathesis (pinned, in a venv under
# target/) runs every check it has against a fresh `pinfold serve` with real
# fixture data, and any failure of any kind fails this script.
#
#   scripts/contract-check.sh            # PINFOLD_BIN defaults to target/debug/pinfold
#   MAX_EXAMPLES=50 scripts/contract-check.sh
#
# Fixtures: tenant `dev` with an approved version of io.github.acme/files
# (published and approved here) and a pending one for status changes, a provider profile `notes` whose issuer is a
# real OpenID provider (examples/oidc-provider), a grant started against it,
# and a resolve session on the reference upstream (examples/upstream). Their
# ids reach schemathesis as parameters (scripts/contract/schemathesis.toml),
# so the operations are exercised past the 404 of an unknown id.
set -euo pipefail
cd "$(dirname "$0")/.."
PINFOLD_BIN=${PINFOLD_BIN:-target/debug/pinfold}
# One token sends every case: the rate limits (per caller) are not what is
# checked here, and would turn the run's tail into 429s.
export PINFOLD_RATE_LIMITS__ENABLED=false
UPSTREAM_BIN=${UPSTREAM_BIN:-target/debug/pinfold-example-upstream}
VENV=target/contract-venv
MAX_EXAMPLES=${MAX_EXAMPLES:-25}
fail() { echo "contract check FAILED: $*" >&2; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_http() { for _ in $(seq 1 150); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }

[ -x "$PINFOLD_BIN" ] || cargo build --quiet --locked --bin pinfold
[ -x "$UPSTREAM_BIN" ] || cargo build --quiet --locked -p pinfold-example-upstream
if [ ! -x "$VENV/bin/schemathesis" ] || ! "$VENV/bin/schemathesis" --version | grep -q '4.32.5' \
    || [ ! -x "$VENV/bin/openapi-python-client" ] || ! "$VENV/bin/openapi-python-client" --version | grep -q '0.29.1'; then
    python3 -m venv "$VENV" || fail "cannot create a venv in $VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check schemathesis==4.32.5 openapi-python-client==0.29.1 \
        || fail "pip install schemathesis==4.32.5 openapi-python-client==0.29.1 failed"
fi
[ -d examples/oidc-provider/node_modules ] \
    || npm ci --prefix examples/oidc-provider --no-audit --no-fund --loglevel=error >&2

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

PORT=$(free_port)
"$PINFOLD_BIN" serve --data-dir "$work/data" --listen "127.0.0.1:$PORT" >"$work/out.txt" 2>"$work/err.txt" &
pids+=($!)
wait_http "http://127.0.0.1:$PORT/healthz" || { cat "$work/err.txt" >&2; fail "pinfold did not start"; }
PINFOLD_TOKEN=$(sed -n 's/.*export PINFOLD_TOKEN=\([^ ]*\).*/\1/p' "$work/out.txt")
PINFOLD_PLATFORM_TOKEN=$(sed -n 's/.*export PINFOLD_PLATFORM_TOKEN=\([^ ]*\).*/\1/p' "$work/out.txt")
[ -n "$PINFOLD_TOKEN" ] || fail "serve printed no token"
REVIEWER=$("$PINFOLD_BIN" token --data-dir "$work/data" --sub rita --tenant dev --roles reviewer --ttl 2h)
T="http://127.0.0.1:$PORT/v1/tenants/dev"
auth=(-H "Authorization: Bearer $PINFOLD_TOKEN")
json=(-H 'Content-Type: application/json')
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d[sys.argv[1]])" "$1"; }

# An approved version.
S="$T/servers/io.github.acme%2Ffiles/versions/1.0.0"
code=$(curl -sS -o /dev/null -w '%{http_code}' -X PUT "$S" "${auth[@]}" "${json[@]}" --data-binary @examples/files-1.0.0.json)
[ "$code" = 201 ] || fail "publish: $code"
code=$(curl -sS -o /dev/null -w '%{http_code}' -X POST "$S/review" -H "Authorization: Bearer $REVIEWER" "${json[@]}" -d '{"decision":"approve"}')
[ "$code" = 200 ] || fail "approve: $code"
# A second version, for status changes (scripts/contract/schemathesis.toml).
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["version"]="0.9.0"; json.dump(d, sys.stdout)' \
    examples/files-1.0.0.json >"$work/files-0.9.0.json"
code=$(curl -sS -o /dev/null -w '%{http_code}' -X PUT "$T/servers/io.github.acme%2Ffiles/versions/0.9.0" "${auth[@]}" "${json[@]}" --data-binary @"$work/files-0.9.0.json")
[ "$code" = 201 ] || fail "publish 0.9.0: $code"

# A real OpenID provider, a provider profile on it, and a grant.
OP_PORT=$(free_port)
node examples/oidc-provider/server.mjs --port "$OP_PORT" --redirect http://127.0.0.1:9/callback >"$work/op.txt" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$OP_PORT/.well-known/openid-configuration" || { cat "$work/op.txt" >&2; fail "the OpenID provider did not start"; }
code=$(curl -sS -o "$work/provider.json" -w '%{http_code}' -X PUT "$T/providers/notes" "${auth[@]}" "${json[@]}" -d "{
    \"issuer\": \"http://127.0.0.1:$OP_PORT\", \"client_id\": \"pinfold\",
    \"client_secret\": \"pinfold-test-client-secret-0123456789\",
    \"redirect_uris\": [\"http://127.0.0.1:9/callback\"],
    \"hierarchy\": {\"files:write\": [\"files:read\"]},
    \"resources\": {\"io.github.acme/files\": \"https://files.example/mcp\"}}")
[ "$code" = 201 ] || fail "provider: $code $(cat "$work/provider.json")"
GRANT_ID=$(curl -sS -X POST "$T/grants" "${auth[@]}" "${json[@]}" -d '{"provider": "notes", "scopes": ["files:read"],
    "redirect_uri": "http://127.0.0.1:9/callback", "resource": "io.github.acme/files"}' | field id) || fail "grant"

# A resolve session on the reference upstream.
UP=$(free_port)
"$UPSTREAM_BIN" --listen "127.0.0.1:$UP" >"$work/up.txt" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$UP/calls" || fail "the reference upstream did not start"
open_session() {
    curl -sS -X POST "$T/sessions" "${auth[@]}" "${json[@]}" \
        -d "{\"server\": \"io.github.acme/files\", \"version\": \"1.0.0\", \"upstream\": {\"url\": \"http://127.0.0.1:$UP/mcp\"}, \"ttl_seconds\": 7200}" | field id
}
SESSION_ID=$(open_session) || fail "session"

PINFOLD_REVIEWER_TOKEN=$REVIEWER

# A client generated from the committed document (not the served one: that is
# what users generate from) drives publish -> review -> read -> verify. The
# generator's only accepted warning is that it cannot type the
# application/jwt attestation body; anything else it skips fails the check.
rm -rf target/generated-client
"$VENV/bin/openapi-python-client" generate --path openapi/openapi.json --meta none \
    --config scripts/contract/client-config.yaml \
    --output-path target/generated-client/pinfold_client >"$work/gen.txt" 2>&1 \
    || { cat "$work/gen.txt" >&2; fail "openapi-python-client could not generate a client"; }
unexpected=$(grep -E '^WARNING' "$work/gen.txt" | grep -v '^WARNING parsing GET /v1/tenants/{tenant}/servers/{server}/versions/{version}/attestation within registry' || true)
[ "$(grep -c 'Cannot parse response' "$work/gen.txt")" = "$(grep -c 'Unsupported content_type application/jwt' "$work/gen.txt")" ] \
    || unexpected="$unexpected (a response other than application/jwt was skipped)"
[ -z "$unexpected" ] || { cat "$work/gen.txt" >&2; fail "the generator skipped parts of the document: $unexpected"; }
PINFOLD_URL="http://127.0.0.1:$PORT" PINFOLD_TOKEN=$PINFOLD_TOKEN PINFOLD_REVIEWER_TOKEN=$REVIEWER \
    "$VENV/bin/python" scripts/contract/client_test.py target/generated-client examples/files-1.0.0.json \
    || fail "the generated client could not drive publish -> review -> read -> verify"

export PINFOLD_TOKEN PINFOLD_PLATFORM_TOKEN PINFOLD_REVIEWER_TOKEN GRANT_ID SESSION_ID
echo "fixtures: version io.github.acme/files 1.0.0 (approved), provider notes, grant $GRANT_ID, session $SESSION_ID" >&2

set +e
SCHEMATHESIS_HOOKS=hooks PYTHONPATH=scripts/contract "$VENV/bin/schemathesis" --config-file scripts/contract/schemathesis.toml run \
    "http://127.0.0.1:$PORT/openapi.json" \
    --checks all --workers 1 --max-examples "$MAX_EXAMPLES" \
    --seed "${SCHEMATHESIS_SEED:-20261123}" \
    --report junit --report-dir "target/contract-report" \
    >"$work/st.txt" 2>&1
rc=$?
set -e
# The summary, and every failure with its reproduction.
cp "$work/st.txt" target/contract-report/schemathesis.txt 2>/dev/null || true
sed -n '/FAILURES/,$p' "$work/st.txt" | head -400
grep -E "^  [0-9]+ generated|test cases|passed|failures" "$work/st.txt" | tail -5
[ "$rc" = 0 ] || fail "schemathesis found contract failures (exit $rc; full output in target/contract-report/schemathesis.txt)"
echo "contract check: 0 failures"
