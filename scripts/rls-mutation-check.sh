#!/usr/bin/env bash
# Proves the row-level security tests can fail (about a minute): each mutation below weakens
# migration 0005 in every test schema (run as the owner right after the
# migrations, through PINFOLD_TEST_SCHEMA_MUTATION), and the RLS tests
# (tests/tests/integration/rls.rs) and the cross-tenant tests must then
# FAIL. Exits non-zero if the unmutated run fails or any mutation passes.
#
# Usage: scripts/rls-mutation-check.sh [postgres://owner@host:port/db]
set -euo pipefail
cd "$(dirname "$0")/.."

PG_URL=${1:-${PINFOLD_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}}
FILTER=(rls::)

run_tests() {
    PINFOLD_TEST_DATABASE_URL="$PG_URL" cargo test --quiet --locked -p pinfold-tests \
        --test integration -- "${FILTER[@]}" >/tmp/rls-mutation.$$.log 2>&1
}

cargo test --quiet --locked -p pinfold-tests --test integration --no-run

echo "baseline: the RLS and isolation tests pass on the schema as migrated"
if ! run_tests; then
    tail -n 40 /tmp/rls-mutation.$$.log
    echo "FAIL: the unmutated run fails" >&2
    exit 1
fi

mutations=(
    "DROP POLICY tenant_isolation ON version_status"
    "DROP POLICY tenant_isolation ON tenants"
    "ALTER TABLE scope_grants NO FORCE ROW LEVEL SECURITY"
    "ALTER TABLE audit_events DISABLE ROW LEVEL SECURITY"
    "GRANT UPDATE ON versions TO pinfold_runtime"
    "CREATE POLICY leak ON resolve_sessions USING (true)"
    "DROP POLICY maintenance_purge_select ON scope_grant_states; CREATE POLICY maintenance_purge_select ON scope_grant_states FOR SELECT USING (current_setting('app.tenant_id', true) = 'maintenance:purge' AND expires_at < 9223372036854775807)"
    "DROP POLICY maintenance_tenants_select ON tenants; CREATE POLICY maintenance_tenants_select ON tenants FOR SELECT USING (current_setting('app.tenant_id', true) LIKE 'maintenance:%')"
    "CREATE POLICY maintenance_tenants_select ON tenant_keys FOR SELECT USING (current_setting('app.tenant_id', true) = 'maintenance:tenants')"
    "GRANT UPDATE (kid) ON tenant_keys TO pinfold_runtime"
)
survived=0
for m in "${mutations[@]}"; do
    if PINFOLD_TEST_SCHEMA_MUTATION="$m" run_tests; then
        echo "SURVIVED: $m (the tests still pass)"
        survived=$((survived + 1))
    else
        echo "killed:   $m"
        grep -E '^    rls::' /tmp/rls-mutation.$$.log | sed 's/^ */            failed: /' || true
    fi
done
rm -f /tmp/rls-mutation.$$.log
if [ "$survived" -ne 0 ]; then
    echo "FAIL: $survived mutation(s) of the row-level security went unnoticed" >&2
    exit 1
fi
echo "ok: every mutation made the tests fail"
