-- The guard: a route per server of a tenant (where its upstream is, which
-- approved version binds it, under which mode and `calls` policy), and the
-- drifts the guard saw between an upstream's list and the pinned signature.
--
-- A route is mutable (replaced under its revision, deleted); its upstream
-- headers are only ever stored sealed (`headers_sealed`, AES-256-GCM under
-- the tenant's key for the route's server), their names beside them. A
-- drift row is written once, by whichever replica sees the drift first
-- (the primary key makes the insert idempotent across replicas), and never
-- changed.
CREATE TABLE guard_routes (
    tenant_id       TEXT NOT NULL REFERENCES tenants (id),
    server          TEXT NOT NULL CHECK (server = lower(server)),  -- canonical server name
    revision        BIGINT NOT NULL CHECK (revision > 0),
    upstream_url    TEXT,                   -- NULL: the approved card's one streamable-http remote
    header_names    JSONB NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(header_names) = 'array'),
    headers_sealed  TEXT,                   -- AES-256-GCM sealed headers, never plain
    version_pin     TEXT NOT NULL,          -- 'latest' or an exact version
    mode            TEXT CHECK (mode IN ('strict', 'permissive', 'advisory')),  -- NULL: the tenant policy's
    calls           TEXT NOT NULL CHECK (calls IN ('all', 'non_destructive', 'read_only')),
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL CHECK (updated_at >= created_at),
    updated_by      TEXT NOT NULL,
    PRIMARY KEY (tenant_id, server),
    FOREIGN KEY (tenant_id, server) REFERENCES servers (tenant_id, name)
);

CREATE TABLE guard_drifts (
    tenant_id        TEXT NOT NULL REFERENCES tenants (id),
    server           TEXT NOT NULL CHECK (server = lower(server)),
    pinned_digest    TEXT NOT NULL,
    upstream_digest  TEXT NOT NULL,
    first_seen       BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, server, pinned_digest, upstream_digest),
    FOREIGN KEY (tenant_id, server) REFERENCES servers (tenant_id, name)
);

-- The runtime role, as 0005/0006 grant it on the other tenant tables: a
-- route is mutable (UPDATE, DELETE: which also covers the sealed column
-- that `pinfold keys reseal` rewrites, as for `scope_providers` in 0007);
-- a drift is written once and never changed or removed.
GRANT SELECT, INSERT, UPDATE, DELETE ON guard_routes TO pinfold_runtime;
GRANT SELECT, INSERT ON guard_drifts TO pinfold_runtime;

ALTER TABLE guard_routes ENABLE ROW LEVEL SECURITY;
ALTER TABLE guard_routes FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON guard_routes
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE guard_drifts ENABLE ROW LEVEL SECURITY;
ALTER TABLE guard_drifts FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON guard_drifts
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
