//! The columns holding sealed values (secrets the server's keyring sealed),
//! which `pinfold keys reseal` walks tenant by tenant, and the shapes it
//! reads and writes them in.

/// A column holding sealed values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SealedColumn {
    /// A tenant's attestation private key (one row per tenant, keyed by its
    /// `kid`).
    AttestationKey,
    /// A resolve session's upstream headers (keyed by session id).
    UpstreamHeaders,
    /// A scope provider's client secret (keyed by provider name).
    ClientSecret,
    /// A pending grant's PKCE verifier (keyed by grant id).
    PkceVerifier,
    /// A guard route's upstream headers (keyed by canonical server name).
    GuardHeaders,
}

impl SealedColumn {
    /// Every sealed column.
    pub const ALL: [SealedColumn; 5] = [
        SealedColumn::AttestationKey,
        SealedColumn::UpstreamHeaders,
        SealedColumn::ClientSecret,
        SealedColumn::PkceVerifier,
        SealedColumn::GuardHeaders,
    ];

    /// What the column holds, for people.
    pub fn label(self) -> &'static str {
        match self {
            SealedColumn::AttestationKey => "attestation keys",
            SealedColumn::UpstreamHeaders => "upstream headers",
            SealedColumn::ClientSecret => "client secrets",
            SealedColumn::PkceVerifier => "PKCE verifiers",
            SealedColumn::GuardHeaders => "guard upstream headers",
        }
    }
}

/// One stored sealed value: the key of its row within the tenant, and the
/// value.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SealedDbRow {
    /// The row's key within the tenant (kid, session id, provider name,
    /// grant id or server name).
    pub key: String,
    /// The sealed value.
    pub sealed: String,
}

/// A sealed value to replace: written only while the row still holds
/// `old`, so a value changed meanwhile is left as it is.
#[derive(Debug, Clone)]
pub struct Replacement {
    /// The row's key within the tenant.
    pub key: String,
    /// The sealed value that was read.
    pub old: String,
    /// The same secret sealed afresh.
    pub new: String,
}
