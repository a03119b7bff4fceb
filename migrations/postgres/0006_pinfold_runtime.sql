-- The product's new name reaches the database's own objects.
--
-- The runtime group role becomes `pinfold_runtime`: created when missing,
-- it receives exactly the privileges migration 0005 gave the old group role
-- in this schema, and the old role gives them up here. The old role itself
-- is left in the cluster: roles are cluster-wide, other databases of the
-- same cluster may still be on their way through 0005 (which grants to it),
-- and dropping it under them would fail their migration. It holds nothing in
-- a database that has passed this migration; an operator may drop it once
-- every database of the cluster has.
--
-- The append-only trigger function is renamed in place (triggers refer to
-- it by identity, not by name).

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pinfold_runtime') THEN
        BEGIN
            CREATE ROLE pinfold_runtime NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            -- Created concurrently by another migration run.
            NULL;
        END;
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO pinfold_runtime', current_schema());
    EXECUTE format('REVOKE USAGE ON SCHEMA %I FROM signet_runtime', current_schema());
END
$$;

GRANT SELECT ON _sqlx_migrations TO pinfold_runtime;

GRANT SELECT, INSERT ON
    tenants, tenant_policies, audit_events,
    servers, versions, version_status, version_reviews, tenant_keys,
    resolve_sessions,
    scope_providers, scope_grants, scope_grant_states
    TO pinfold_runtime;

GRANT UPDATE ON tenant_policies, version_status, scope_providers, scope_grants TO pinfold_runtime;

GRANT DELETE ON resolve_sessions, scope_grant_states TO pinfold_runtime;

REVOKE ALL ON
    _sqlx_migrations,
    tenants, tenant_policies, audit_events,
    servers, versions, version_status, version_reviews, tenant_keys,
    resolve_sessions,
    scope_providers, scope_grants, scope_grant_states
    FROM signet_runtime;

ALTER FUNCTION signet_append_only() RENAME TO pinfold_append_only;
