-- Foundation: tenants, their policies, and the append-only audit log.
-- Every key starts with the tenant. Timestamps are milliseconds since the
-- Unix epoch (INTEGER) on both backends.

CREATE TABLE tenants (
    id          TEXT PRIMARY KEY NOT NULL,
    name        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    created_by  TEXT NOT NULL
) STRICT;

CREATE TABLE tenant_policies (
    tenant_id          TEXT PRIMARY KEY NOT NULL REFERENCES tenants (id),
    enforcement_mode   TEXT NOT NULL CHECK (enforcement_mode IN ('strict', 'permissive', 'advisory')),
    approval_required  INTEGER NOT NULL CHECK (approval_required IN (0, 1)),
    overrides          TEXT NOT NULL CHECK (json_valid(overrides)),
    revision           INTEGER NOT NULL CHECK (revision >= 1),
    updated_at         INTEGER NOT NULL,
    updated_by         TEXT NOT NULL
) STRICT;

-- SQLite's AUTOINCREMENT needs the rowid alone as primary key; the tenant
-- leads the unique index every query uses.
CREATE TABLE audit_events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id  TEXT NOT NULL REFERENCES tenants (id),
    at         INTEGER NOT NULL,
    actor      TEXT NOT NULL,
    kind       TEXT NOT NULL,
    server     TEXT,
    version    TEXT,
    data       TEXT NOT NULL CHECK (json_valid(data))
) STRICT;

CREATE UNIQUE INDEX audit_events_by_tenant ON audit_events (tenant_id, id);
CREATE INDEX audit_events_by_server ON audit_events (tenant_id, server, id);

-- The audit log is append-only: the database itself refuses changes.
CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
BEGIN
    SELECT RAISE(ABORT, 'table audit_events is append-only (UPDATE refused)');
END;

CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
BEGIN
    SELECT RAISE(ABORT, 'table audit_events is append-only (DELETE refused)');
END;
