#!/usr/bin/env bash
# Runs the steps of docs/REGISTRY.md against a fresh Pinfold, as a new user
# would, and checks each answer. Also verifies the attestation with a stock
# JWT library (PyJWT), installed into a throwaway virtualenv.
#
#   scripts/registry-walkthrough.sh      # PINFOLD_BIN defaults to target/debug/pinfold
set -euo pipefail
cd "$(dirname "$0")/.."
PINFOLD_BIN=${PINFOLD_BIN:-target/debug/pinfold}
# A free port unless one is given.
PORT=${PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
[ -x "$PINFOLD_BIN" ] || cargo build --locked --bin pinfold >&2
pinfold() { "$PINFOLD_BIN" "$@"; }
fail() { echo "walkthrough FAILED: $*" >&2; exit 1; }

work=$(mktemp -d)
cleanup() { [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
# Start the binary itself (not through the shell function) so $! is its pid.
"$PINFOLD_BIN" serve --data-dir "$work/data" --listen "127.0.0.1:$PORT" >"$work/out.txt" 2>"$work/err.txt" &
pid=$!
for _ in $(seq 1 150); do curl -fs "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break; sleep 0.1; done

PINFOLD_TOKEN=$(sed -n 's/.*export PINFOLD_TOKEN=\([^ ]*\).*/\1/p' "$work/out.txt")
[ -n "$PINFOLD_TOKEN" ] || { cat "$work/err.txt" >&2; fail "serve printed no token"; }
REVIEWER=$(pinfold token --data-dir "$work/data" --sub rita --tenant dev --roles reviewer)
S="http://127.0.0.1:$PORT/v1/tenants/dev/servers/io.github.acme%2Ffiles"
auth=(-H "Authorization: Bearer $PINFOLD_TOKEN")
json=(-H 'Content-Type: application/json')

# 1. offline
digest=$(pinfold signature digest examples/files-1.0.0.json | python3 -c 'import json,sys; print(json.load(sys.stdin)["digest"])')
pinfold signature reduce examples/files-1.0.0.json >/dev/null
if pinfold signature verify examples/files-1.0.0.json examples/files-observed-drifted.json --mode strict >/dev/null; then
    fail "verify of a drifted observation must exit 1"
fi

# 2. publish, twice (idempotent), then a conflicting document
code=$(curl -sS -o /dev/null -w '%{http_code}' -X PUT "$S/versions/1.0.0" "${auth[@]}" "${json[@]}" --data-binary @examples/files-1.0.0.json)
[ "$code" = 201 ] || fail "publish: $code"
code=$(curl -sS -o /dev/null -w '%{http_code}' -X PUT "$S/versions/1.0.0" "${auth[@]}" "${json[@]}" --data-binary @examples/files-1.0.0.json)
[ "$code" = 200 ] || fail "republish: $code"
code=$(curl -sS -o /dev/null -w '%{http_code}' -X PUT "$S/versions/1.1.0" "${auth[@]}" "${json[@]}" --data-binary @examples/files-1.1.0.json)
[ "$code" = 201 ] || fail "publish 1.1.0: $code"

# 3. review: the publisher cannot approve; the reviewer can
code=$(curl -sS -o /dev/null -w '%{http_code}' -X POST "$S/versions/1.0.0/review" "${auth[@]}" "${json[@]}" -d '{"decision":"approve"}')
[ "$code" = 403 ] || fail "self-approval: $code"
class=$(curl -sS "$S/diff?from=1.0.0&to=1.1.0" -H "Authorization: Bearer $REVIEWER" | python3 -c 'import json,sys; print(json.load(sys.stdin)["classification"])')
[ "$class" = escalation ] || fail "diff: $class"
status=$(curl -sS -X POST "$S/versions/1.0.0/review" -H "Authorization: Bearer $REVIEWER" "${json[@]}" \
    -d '{"decision": "approve", "note": "read-only plus a scoped writer"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])')
[ "$status" = approved ] || fail "review: $status"

# 4. fetch and trust
latest=$(curl -sS "$S/versions/latest" "${auth[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
[ "$latest" = 1.0.0 ] || fail "latest: $latest"
body_digest="sha256:$(curl -sS "$S/versions/1.0.0/signature" "${auth[@]}" | sha256sum | cut -d' ' -f1)"
[ "$body_digest" = "$digest" ] || fail "the document's bytes hash to $body_digest, not $digest"
etag=$(curl -sS -D - -o /dev/null "$S/versions/1.0.0" "${auth[@]}" | awk -F': ' 'tolower($1)=="etag" {print $2}' | tr -d '\r')
code=$(curl -sS -o /dev/null -w '%{http_code}' "$S/versions/1.0.0" "${auth[@]}" -H "If-None-Match: $etag")
[ "$code" = 304 ] || fail "If-None-Match: $code"

# 5. verify
conformant=$(curl -sS -X POST "$S/versions/1.0.0/verify?mode=strict" "${auth[@]}" "${json[@]}" \
    --data-binary @examples/files-observed-drifted.json | python3 -c 'import json,sys; print(json.load(sys.stdin)["conformant"])')
[ "$conformant" = False ] || fail "verify: $conformant"

# 6. attestation, verified with PyJWT
curl -sS "$S/versions/1.0.0/attestation" "${auth[@]}" >"$work/attestation.jwt"
curl -sS "http://127.0.0.1:$PORT/v1/tenants/dev/jwks.json" "${auth[@]}" >"$work/jwks.json"
python3 -m venv "$work/venv" >/dev/null
"$work/venv/bin/pip" install --quiet --disable-pip-version-check "pyjwt==2.15.1" "cryptography==50.0.2" >/dev/null || fail "cannot install PyJWT"
"$work/venv/bin/python" examples/verify_attestation.py "$work/attestation.jwt" "$work/jwks.json" "$digest" >/dev/null \
    || fail "PyJWT did not verify the attestation"

# 8. the subregistry (the official /v0.1 read API), as a reader
READER=$(pinfold token --data-dir "$work/data" --sub rob --tenant dev --roles reader)
R="http://127.0.0.1:$PORT/t/dev/v0.1"
curl -sS "$R/servers?limit=30" -H "Authorization: Bearer $READER" >"$work/list.json"
python3 - "$work/list.json" "$digest" <<'PY' || fail "subregistry list"
import json, sys
body = json.load(open(sys.argv[1]))
entries = [(e["server"]["name"], e["server"]["version"]) for e in body["servers"]]
assert entries == [("io.github.acme/files", "1.0.0")], entries   # 1.1.0 is still pending
entry = body["servers"][0]
assert "signature" not in entry["server"]
assert entry["_meta"]["io.modelcontextprotocol.registry/official"]["status"] == "active"
assert entry["_meta"]["io.modelcontextprotocol.registry/official"]["isLatest"] is True
assert entry["_meta"]["io.github.pinfold/pinfold"]["digest"] == sys.argv[2]
assert body["metadata"] == {"count": 1}, body["metadata"]
PY
version=$(curl -sS "$R/servers/io.github.acme%2Ffiles/versions/latest" -H "Authorization: Bearer $READER" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["server"]["version"])')
[ "$version" = 1.0.0 ] || fail "subregistry latest: $version"
code=$(curl -sS -o "$work/nf.json" -w '%{http_code}' "$R/servers/io.github.acme%2Ffiles/versions/1.1.0" -H "Authorization: Bearer $READER")
[ "$code" = 404 ] && grep -q '"error"' "$work/nf.json" || fail "a pending version in the subregistry: $code $(cat "$work/nf.json")"

echo "registry walkthrough passed: publish, review, fetch, 304, verify, attestation verified with PyJWT, subregistry"
