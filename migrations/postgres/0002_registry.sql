-- Registry: servers, immutable versions, their mutable status, reviews and
-- the per-tenant attestation keys. Every key starts with the tenant.

CREATE TABLE servers (
    tenant_id     TEXT NOT NULL REFERENCES tenants (id),
    name          TEXT NOT NULL,          -- canonical (ASCII-lowercase) server name
    display_name  TEXT NOT NULL,          -- as first published
    created_at    BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, name)
);

-- A server row is written once and never updated, so concurrent publishes
-- of one server never queue on a hot row; listings read title and
-- description from the newest version.

-- Immutable content: the canonical document and its digest (plus the card's
-- title and description, copied out for search). Never updated, never
-- deleted (triggers below).
CREATE TABLE versions (
    tenant_id     TEXT NOT NULL,
    server        TEXT NOT NULL,
    version       TEXT NOT NULL,
    digest        TEXT NOT NULL CHECK (digest ~ '^sha256:[0-9a-f]{64}$'),
    document      TEXT NOT NULL,          -- RFC 8785 canonical JSON
    title         TEXT,
    description   TEXT,
    published_by  TEXT NOT NULL,
    published_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, server, version),
    FOREIGN KEY (tenant_id, server) REFERENCES servers (tenant_id, name)
);

-- Mutable metadata, kept apart from the content.
CREATE TABLE version_status (
    tenant_id          TEXT NOT NULL,
    server             TEXT NOT NULL,
    version            TEXT NOT NULL,
    status             TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'deprecated', 'revoked')),
    revision           BIGINT NOT NULL CHECK (revision >= 1),
    status_changed_at  BIGINT NOT NULL,
    status_reason      TEXT,
    approved_by        TEXT,
    approved_at        BIGINT,
    PRIMARY KEY (tenant_id, server, version),
    FOREIGN KEY (tenant_id, server, version) REFERENCES versions (tenant_id, server, version)
);

CREATE INDEX versions_by_published ON versions (tenant_id, server, published_at);

CREATE INDEX version_status_by_status ON version_status (tenant_id, status, server);

CREATE TABLE version_reviews (
    tenant_id  TEXT NOT NULL,
    server     TEXT NOT NULL,
    version    TEXT NOT NULL,
    id         BIGINT GENERATED ALWAYS AS IDENTITY,
    decision   TEXT NOT NULL CHECK (decision IN ('approve', 'reject')),
    note       TEXT,
    reviewer   TEXT NOT NULL,
    at         BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, server, version, id),
    FOREIGN KEY (tenant_id, server, version) REFERENCES versions (tenant_id, server, version)
);

-- Per-tenant Ed25519 attestation key; the private half is sealed with the
-- server's encryption key (AES-256-GCM, tenant id as associated data).
CREATE TABLE tenant_keys (
    tenant_id       TEXT PRIMARY KEY REFERENCES tenants (id),
    kid             TEXT NOT NULL,
    public_key      TEXT NOT NULL,
    private_sealed  TEXT NOT NULL,
    created_at      BIGINT NOT NULL
);

CREATE TRIGGER versions_immutable
    BEFORE UPDATE OR DELETE ON versions
    FOR EACH ROW EXECUTE FUNCTION signet_append_only();

CREATE TRIGGER version_reviews_append_only
    BEFORE UPDATE OR DELETE ON version_reviews
    FOR EACH ROW EXECUTE FUNCTION signet_append_only();
