-- Resolve cache: Signet's resolve sessions. A session pins one signature
-- version (and the enforcement mode and cache policy in force when it was
-- opened) for one principal; results are cached in memory only, and these
-- rows let any replica serve any session. Every key starts with the tenant.
CREATE TABLE resolve_sessions (
    tenant_id         TEXT NOT NULL REFERENCES tenants (id),
    id                TEXT NOT NULL,
    principal         TEXT NOT NULL,          -- token `sub`
    issuer            TEXT NOT NULL,          -- token `iss` (a `sub` is unique only per issuer)
    server            TEXT NOT NULL,          -- canonical server name
    version           TEXT NOT NULL,
    digest            TEXT NOT NULL CHECK (digest ~ '^sha256:[0-9a-f]{64}$'),
    mode              TEXT NOT NULL CHECK (mode IN ('strict', 'permissive', 'advisory')),
    cache_policy      TEXT NOT NULL CHECK (cache_policy IN ('session', 'none')),
    upstream_url      TEXT NOT NULL,
    upstream_sealed   TEXT,                   -- AES-256-GCM sealed headers, never plain
    created_at        BIGINT NOT NULL,
    expires_at        BIGINT NOT NULL CHECK (expires_at > created_at),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, server, version) REFERENCES versions (tenant_id, server, version)
);

CREATE INDEX resolve_sessions_by_version ON resolve_sessions (tenant_id, server, version);
CREATE INDEX resolve_sessions_by_expiry ON resolve_sessions (expires_at);
