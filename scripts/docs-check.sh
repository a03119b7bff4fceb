#!/usr/bin/env bash
# Renders the Swagger UI at /docs in headless Chromium and checks that
#  1. the API is listed (the rendered DOM names our operations), and
#  2. the page made no request to any host but the Pinfold server itself
#     (Chromium's network log is scanned for every URL it touched).
# Leaves a screenshot in target/docs-check/docs.png.
#
#   scripts/docs-check.sh            # builds/starts pinfold itself
#   PINFOLD_BIN=target/release/pinfold scripts/docs-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PINFOLD_BIN=${PINFOLD_BIN:-target/debug/pinfold}
PORT=${PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
BASE="http://127.0.0.1:$PORT"
out=target/docs-check
mkdir -p "$out"

CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ]; then
    echo "installing Debian chromium (headless browser for this check)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y chromium >/dev/null
    CHROMIUM=$(command -v chromium)
fi
[ -x "$PINFOLD_BIN" ] || cargo build --locked --bin pinfold >&2

data=$(mktemp -d)
cleanup() { [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$data"; }
trap cleanup EXIT
"$PINFOLD_BIN" serve --data-dir "$data" --listen "127.0.0.1:$PORT" >"$data/out.txt" 2>"$data/err.txt" &
pid=$!
for _ in $(seq 1 100); do curl -fs "$BASE/healthz" >/dev/null 2>&1 && break; sleep 0.1; done

flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
       --disable-background-networking --disable-component-update --disable-sync
       --disable-default-apps --disable-extensions --no-default-browser-check
       --user-data-dir="$data/profile" --virtual-time-budget=15000 --window-size=1280,2400)

"$CHROMIUM" "${flags[@]}" --log-net-log="$out/netlog.json" --dump-dom "$BASE/docs/" >"$out/dom.html" 2>"$data/chromium.err" || {
    cat "$data/chromium.err" >&2; exit 1; }
"$CHROMIUM" "${flags[@]}" --screenshot="$out/docs.png" "$BASE/docs/" 2>>"$data/chromium.err" >/dev/null || true

fail=0
for op in create_tenant get_tenant put_policy list_audit healthz; do
    if ! grep -q "$op" "$out/dom.html"; then
        echo "FAIL: operation $op is not listed in the rendered /docs page" >&2
        fail=1
    fi
done
grep -q '/v1/tenants/{tenant}/policy' "$out/dom.html" || { echo "FAIL: paths not rendered" >&2; fail=1; }

# Every request the *page* made (its initiator is our origin) must go to our
# server. Requests Chromium makes for itself (component updates, account
# checks: initiator "not an origin") are not the page's and are ignored.
read -r outside touched < <(python3 - "$out/netlog.json" "$BASE" <<'PY'
import json, sys
log = json.load(open(sys.argv[1]))
origin = sys.argv[2]
names = {v: k for k, v in log["constants"]["logEventTypes"].items()}
outside, local = set(), set()
for e in log["events"]:
    p = e.get("params") or {}
    if names.get(e["type"]) != "URL_REQUEST_START_JOB" or "url" not in p:
        continue
    if p.get("initiator") != origin:
        continue
    (local if p["url"].startswith(origin + "/") else outside).add(p["url"])
print(len(outside), len(local))
for u in sorted(outside):
    print("outside request:", u, file=sys.stderr)
PY
)
if [ "$outside" -ne 0 ]; then
    echo "FAIL: /docs made $outside request(s) outside the server (listed above)" >&2
    fail=1
fi
[ "$touched" -ge 4 ] || { echo "FAIL: the page made only $touched local requests; the check saw nothing" >&2; fail=1; }

if [ "$fail" -eq 0 ]; then
    echo "docs check passed: operations rendered, the page fetched $touched URLs, all from the server; screenshot in $out/docs.png"
fi
exit "$fail"
