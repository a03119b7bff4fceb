-- The guard: a route per server of a tenant (where its upstream is, which
-- approved version binds it, under which mode and `calls` policy), and the
-- drifts the guard saw between an upstream's list and the pinned signature.
-- A route is mutable; its upstream headers are only ever stored sealed. A
-- drift row is written once (the primary key makes the insert idempotent)
-- and never changed. The PostgreSQL migration of the same number also
-- grants the runtime role and isolates both tables by row-level security.
CREATE TABLE guard_routes (
    tenant_id       TEXT NOT NULL REFERENCES tenants (id),
    server          TEXT NOT NULL CHECK (server = lower(server)),  -- canonical server name
    revision        INTEGER NOT NULL CHECK (revision > 0),
    upstream_url    TEXT,                   -- NULL: the approved card's one streamable-http remote
    header_names    TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(header_names) AND json_type(header_names) = 'array'),
    headers_sealed  TEXT,                   -- AES-256-GCM sealed headers, never plain
    version_pin     TEXT NOT NULL,          -- 'latest' or an exact version
    mode            TEXT CHECK (mode IN ('strict', 'permissive', 'advisory')),  -- NULL: the tenant policy's
    calls           TEXT NOT NULL CHECK (calls IN ('all', 'non_destructive', 'read_only')),
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL CHECK (updated_at >= created_at),
    updated_by      TEXT NOT NULL,
    PRIMARY KEY (tenant_id, server),
    FOREIGN KEY (tenant_id, server) REFERENCES servers (tenant_id, name)
) STRICT;

CREATE TABLE guard_drifts (
    tenant_id        TEXT NOT NULL REFERENCES tenants (id),
    server           TEXT NOT NULL CHECK (server = lower(server)),
    pinned_digest    TEXT NOT NULL,
    upstream_digest  TEXT NOT NULL,
    first_seen       INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, server, pinned_digest, upstream_digest),
    FOREIGN KEY (tenant_id, server) REFERENCES servers (tenant_id, name)
) STRICT;

