-- The review console's server-side sessions: the SHA-256 of the session
-- secret a browser's cookie holds (never the secret), the principal of the
-- verified token the session was opened with, and its expiry (never later
-- than the token's). Signing out deletes the row; expired rows of a tenant
-- are deleted when someone of that tenant signs in.
CREATE TABLE console_sessions (
    tenant_id   TEXT NOT NULL REFERENCES tenants (id),
    id_hash     TEXT NOT NULL CHECK (length(id_hash) = 64),
    subject     TEXT NOT NULL,
    issuer      TEXT NOT NULL,
    roles       TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, id_hash)
);
CREATE INDEX console_sessions_by_expiry ON console_sessions (tenant_id, expires_at);
