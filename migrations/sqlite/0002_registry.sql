-- Registry: servers, immutable versions, their mutable status, reviews and
-- the per-tenant attestation keys. Every key starts with the tenant.

CREATE TABLE servers (
    tenant_id     TEXT NOT NULL REFERENCES tenants (id),
    name          TEXT NOT NULL,          -- canonical (ASCII-lowercase) server name
    display_name  TEXT NOT NULL,          -- as first published
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, name)
) STRICT;

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
    digest        TEXT NOT NULL CHECK (digest GLOB 'sha256:*' AND length(digest) = 71),
    document      TEXT NOT NULL CHECK (json_valid(document)),
    title         TEXT,
    description   TEXT,
    published_by  TEXT NOT NULL,
    published_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, server, version),
    FOREIGN KEY (tenant_id, server) REFERENCES servers (tenant_id, name)
) STRICT;

-- Mutable metadata, kept apart from the content.
CREATE TABLE version_status (
    tenant_id          TEXT NOT NULL,
    server             TEXT NOT NULL,
    version            TEXT NOT NULL,
    status             TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'deprecated', 'revoked')),
    revision           INTEGER NOT NULL CHECK (revision >= 1),
    status_changed_at  INTEGER NOT NULL,
    status_reason      TEXT,
    approved_by        TEXT,
    approved_at        INTEGER,
    PRIMARY KEY (tenant_id, server, version),
    FOREIGN KEY (tenant_id, server, version) REFERENCES versions (tenant_id, server, version)
) STRICT;

CREATE INDEX versions_by_published ON versions (tenant_id, server, published_at);

CREATE INDEX version_status_by_status ON version_status (tenant_id, status, server);

CREATE TABLE version_reviews (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id  TEXT NOT NULL,
    server     TEXT NOT NULL,
    version    TEXT NOT NULL,
    decision   TEXT NOT NULL CHECK (decision IN ('approve', 'reject')),
    note       TEXT,
    reviewer   TEXT NOT NULL,
    at         INTEGER NOT NULL,
    FOREIGN KEY (tenant_id, server, version) REFERENCES versions (tenant_id, server, version)
) STRICT;

CREATE INDEX version_reviews_by_version ON version_reviews (tenant_id, server, version, id);

-- Per-tenant Ed25519 attestation key; the private half is sealed with the
-- server's encryption key (AES-256-GCM, tenant id as associated data).
CREATE TABLE tenant_keys (
    tenant_id       TEXT PRIMARY KEY NOT NULL REFERENCES tenants (id),
    kid             TEXT NOT NULL,
    public_key      TEXT NOT NULL,
    private_sealed  TEXT NOT NULL,
    created_at      INTEGER NOT NULL
) STRICT;

CREATE TRIGGER versions_no_update BEFORE UPDATE ON versions
BEGIN
    SELECT RAISE(ABORT, 'table versions is append-only (UPDATE refused)');
END;

CREATE TRIGGER versions_no_delete BEFORE DELETE ON versions
BEGIN
    SELECT RAISE(ABORT, 'table versions is append-only (DELETE refused)');
END;

CREATE TRIGGER version_reviews_no_update BEFORE UPDATE ON version_reviews
BEGIN
    SELECT RAISE(ABORT, 'table version_reviews is append-only (UPDATE refused)');
END;

CREATE TRIGGER version_reviews_no_delete BEFORE DELETE ON version_reviews
BEGIN
    SELECT RAISE(ABORT, 'table version_reviews is append-only (DELETE refused)');
END;
