-- Scope service: OAuth provider profiles, grants (the ledger of what was
-- requested, granted and needed; never a token), and the single-use states
-- of pending grants. Every key starts with the tenant.
CREATE TABLE scope_providers (
    tenant_id             TEXT NOT NULL REFERENCES tenants (id),
    name                  TEXT NOT NULL,
    profile               JSONB NOT NULL,         -- never the secret
    client_secret_sealed  TEXT,                   -- AES-256-GCM, bound to tenant and provider
    revision              BIGINT NOT NULL CHECK (revision >= 1),
    created_at            BIGINT NOT NULL,
    updated_at            BIGINT NOT NULL,
    updated_by            TEXT NOT NULL,
    PRIMARY KEY (tenant_id, name)
);

CREATE TABLE scope_grants (
    tenant_id     TEXT NOT NULL REFERENCES tenants (id),
    id            TEXT NOT NULL,
    provider      TEXT NOT NULL,
    principal     TEXT NOT NULL,              -- token `sub`
    issuer        TEXT NOT NULL,              -- token `iss`
    redirect_uri  TEXT NOT NULL,
    resource      TEXT,                       -- RFC 8707
    requested     JSONB NOT NULL,
    needed        JSONB NOT NULL,
    granted       JSONB,
    status        TEXT NOT NULL CHECK (status IN ('pending', 'exchanged', 'failed')),
    error         TEXT,
    created_at    BIGINT NOT NULL,
    exchanged_at  BIGINT,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, provider) REFERENCES scope_providers (tenant_id, name)
);

-- One row per pending grant, deleted when used: a state is accepted once.
CREATE TABLE scope_grant_states (
    tenant_id        TEXT NOT NULL,
    grant_id         TEXT NOT NULL,
    state_hash       TEXT NOT NULL CHECK (length(state_hash) = 64),  -- SHA-256, never the state
    verifier_sealed  TEXT NOT NULL,          -- the PKCE verifier, sealed
    expires_at       BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, grant_id),
    FOREIGN KEY (tenant_id, grant_id) REFERENCES scope_grants (tenant_id, id) ON DELETE CASCADE
);

CREATE INDEX scope_grant_states_by_expiry ON scope_grant_states (expires_at);
