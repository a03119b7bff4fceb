-- Foundation: tenants, their policies, and the append-only audit log.
-- Every key starts with the tenant. Timestamps are milliseconds since the
-- Unix epoch (BIGINT) on both backends.

CREATE TABLE tenants (
    id          TEXT PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9-]{1,62}$'),
    name        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    created_by  TEXT NOT NULL
);

CREATE TABLE tenant_policies (
    tenant_id          TEXT PRIMARY KEY REFERENCES tenants (id),
    enforcement_mode   TEXT NOT NULL CHECK (enforcement_mode IN ('strict', 'permissive', 'advisory')),
    approval_required  BOOLEAN NOT NULL,
    overrides          JSONB NOT NULL,
    revision           BIGINT NOT NULL CHECK (revision >= 1),
    updated_at         BIGINT NOT NULL,
    updated_by         TEXT NOT NULL
);

CREATE TABLE audit_events (
    tenant_id  TEXT NOT NULL REFERENCES tenants (id),
    id         BIGINT GENERATED ALWAYS AS IDENTITY,
    at         BIGINT NOT NULL,
    actor      TEXT NOT NULL,
    kind       TEXT NOT NULL,
    server     TEXT,
    version    TEXT,
    data       JSONB NOT NULL,
    PRIMARY KEY (tenant_id, id)
);

CREATE INDEX audit_events_by_server ON audit_events (tenant_id, server, id);

-- The audit log is append-only: the database itself refuses changes.
CREATE FUNCTION signet_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'table % is append-only (% refused)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END
$$;

CREATE TRIGGER audit_events_append_only
    BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION signet_append_only();
