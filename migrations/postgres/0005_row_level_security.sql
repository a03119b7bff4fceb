-- Row-level security: tenant isolation enforced by the database itself, as
-- defence in depth under the store's own `WHERE tenant_id = $1`.
--
-- Every table holding tenant rows gets ENABLE + FORCE ROW LEVEL SECURITY
-- and a policy `tenant_isolation` admitting only the rows of the tenant the
-- current transaction is bound to: `app.tenant_id`, which the store sets
-- transaction-locally (`set_config(..., true)`) in the same round trip as
-- BEGIN. With no tenant set, `current_setting('app.tenant_id', true)` is
-- NULL or '' and no row matches.
--
-- Signet serves as a login role that is a member of `signet_runtime`: no
-- superuser, no BYPASSRLS, owner of nothing, with SELECT/INSERT where it
-- needs them and UPDATE/DELETE only on mutable tables. Immutable tables
-- (tenants, servers, versions, version_reviews, audit_events, tenant_keys)
-- get neither UPDATE nor DELETE. Migrations run as the owner.

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'signet_runtime') THEN
        BEGIN
            CREATE ROLE signet_runtime NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            -- Created concurrently by another migration run.
            NULL;
        END;
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO signet_runtime', current_schema());
END
$$;

GRANT SELECT ON _sqlx_migrations TO signet_runtime;

GRANT SELECT, INSERT ON
    tenants, tenant_policies, audit_events,
    servers, versions, version_status, version_reviews, tenant_keys,
    resolve_sessions,
    scope_providers, scope_grants, scope_grant_states
    TO signet_runtime;

-- Mutable rows: a policy's revision, a version's status, a provider
-- profile, a grant's outcome.
GRANT UPDATE ON tenant_policies, version_status, scope_providers, scope_grants TO signet_runtime;

-- Rows whose time is over: a closed or ended session, a used or expired
-- grant state.
GRANT DELETE ON resolve_sessions, scope_grant_states TO signet_runtime;

ALTER TABLE tenants ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenants FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON tenants
    USING (id = current_setting('app.tenant_id', true))
    WITH CHECK (id = current_setting('app.tenant_id', true));

ALTER TABLE tenant_policies ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenant_policies FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON tenant_policies
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE audit_events ENABLE ROW LEVEL SECURITY;
ALTER TABLE audit_events FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON audit_events
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE servers ENABLE ROW LEVEL SECURITY;
ALTER TABLE servers FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON servers
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE versions ENABLE ROW LEVEL SECURITY;
ALTER TABLE versions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON versions
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE version_status ENABLE ROW LEVEL SECURITY;
ALTER TABLE version_status FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON version_status
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE version_reviews ENABLE ROW LEVEL SECURITY;
ALTER TABLE version_reviews FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON version_reviews
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE tenant_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenant_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON tenant_keys
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE resolve_sessions ENABLE ROW LEVEL SECURITY;
ALTER TABLE resolve_sessions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON resolve_sessions
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE scope_providers ENABLE ROW LEVEL SECURITY;
ALTER TABLE scope_providers FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON scope_providers
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE scope_grants ENABLE ROW LEVEL SECURITY;
ALTER TABLE scope_grants FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON scope_grants
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE scope_grant_states ENABLE ROW LEVEL SECURITY;
ALTER TABLE scope_grant_states FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON scope_grant_states
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));

-- The one exception: the background purge (every replica, every tenant)
-- binds its transaction to the marker 'maintenance:purge', which no tenant
-- id can equal (ids match ^[a-z0-9][a-z0-9-]{1,62}$). The marker may read
-- and delete, never insert or update, and only rows whose expiry is
-- already past by the database's own clock.
CREATE POLICY maintenance_purge_select ON resolve_sessions FOR SELECT
    USING (current_setting('app.tenant_id', true) = 'maintenance:purge'
           AND expires_at < (extract(epoch FROM now()) * 1000)::bigint);
CREATE POLICY maintenance_purge_delete ON resolve_sessions FOR DELETE
    USING (current_setting('app.tenant_id', true) = 'maintenance:purge'
           AND expires_at < (extract(epoch FROM now()) * 1000)::bigint);
CREATE POLICY maintenance_purge_select ON scope_grant_states FOR SELECT
    USING (current_setting('app.tenant_id', true) = 'maintenance:purge'
           AND expires_at < (extract(epoch FROM now()) * 1000)::bigint);
CREATE POLICY maintenance_purge_delete ON scope_grant_states FOR DELETE
    USING (current_setting('app.tenant_id', true) = 'maintenance:purge'
           AND expires_at < (extract(epoch FROM now()) * 1000)::bigint);
