-- Key rotation: `pinfold keys reseal` re-seals every stored secret under
-- the current encryption key, as the runtime role and under row-level
-- security like the server itself.
--
-- It needs to know which tenants there are: the binding
-- 'maintenance:tenants' (which no tenant id can equal) may read the
-- `tenants` table, and nothing else. Each tenant's secrets are then read and
-- written in a transaction bound to that tenant, under `tenant_isolation`.
CREATE POLICY maintenance_tenants_select ON tenants FOR SELECT
    USING (current_setting('app.tenant_id', true) = 'maintenance:tenants');

-- And to write the sealed columns. Only those columns: the other columns of
-- these rows stay as immutable as before (a tenant key's kid and public
-- key, a session's pins, a grant state's hash and expiry).
-- `scope_providers` is mutable already.
GRANT UPDATE (private_sealed) ON tenant_keys TO pinfold_runtime;
GRANT UPDATE (upstream_sealed) ON resolve_sessions TO pinfold_runtime;
GRANT UPDATE (verifier_sealed) ON scope_grant_states TO pinfold_runtime;
