//! Rows of `scope_providers`, `scope_grants` and `scope_grant_states`.

use pinfold_core::ids::Timestamp;
use pinfold_scope::{GrantRow, GrantStatus, ProviderRow, ScopeStoreError, StateRow};
use pinfold_tenancy::StoreError;

use crate::error::store_error;

/// `name, profile (JSON text), client_secret_sealed, revision, created_at,
/// updated_at, updated_by` of `scope_providers`.
#[derive(Debug, sqlx::FromRow)]
pub struct ProviderDbRow {
    /// Provider name.
    pub name: String,
    /// The profile as JSON text.
    pub profile: String,
    /// Sealed client secret.
    pub client_secret_sealed: Option<String>,
    /// Revision.
    pub revision: i64,
    /// Milliseconds since the epoch.
    pub created_at: i64,
    /// Milliseconds since the epoch.
    pub updated_at: i64,
    /// Who.
    pub updated_by: String,
}

impl TryFrom<ProviderDbRow> for ProviderRow {
    type Error = ScopeStoreError;
    fn try_from(r: ProviderDbRow) -> Result<Self, ScopeStoreError> {
        Ok(ProviderRow {
            profile: serde_json::from_str(&r.profile)
                .map_err(|e| ScopeStoreError::Other(format!("stored profile {}: {e}", r.name)))?,
            name: r.name,
            client_secret_sealed: r.client_secret_sealed,
            revision: r.revision,
            created_at: Timestamp::from_millis(r.created_at),
            updated_at: Timestamp::from_millis(r.updated_at),
            updated_by: r.updated_by,
        })
    }
}

/// The columns of `scope_grants` after `tenant_id` (JSON as text).
#[derive(Debug, sqlx::FromRow)]
pub struct GrantDbRow {
    /// Grant id.
    pub id: String,
    /// Provider.
    pub provider: String,
    /// Token `sub`.
    pub principal: String,
    /// Token `iss`.
    pub issuer: String,
    /// Redirect URI.
    pub redirect_uri: String,
    /// RFC 8707 resource.
    pub resource: Option<String>,
    /// JSON array.
    pub requested: String,
    /// JSON array.
    pub needed: String,
    /// JSON array.
    pub granted: Option<String>,
    /// Status.
    pub status: String,
    /// Provider error.
    pub error: Option<String>,
    /// Milliseconds.
    pub created_at: i64,
    /// Milliseconds.
    pub exchanged_at: Option<i64>,
}

fn scopes(what: &str, s: &str) -> Result<Vec<String>, ScopeStoreError> {
    serde_json::from_str(s).map_err(|e| ScopeStoreError::Other(format!("stored {what}: {e}")))
}

impl TryFrom<GrantDbRow> for GrantRow {
    type Error = ScopeStoreError;
    fn try_from(r: GrantDbRow) -> Result<Self, ScopeStoreError> {
        Ok(GrantRow {
            status: GrantStatus::parse(&r.status)
                .ok_or_else(|| ScopeStoreError::Other(format!("stored status {}", r.status)))?,
            requested: scopes("requested", &r.requested)?,
            needed: scopes("needed", &r.needed)?,
            granted: r
                .granted
                .as_deref()
                .map(|g| scopes("granted", g))
                .transpose()?,
            id: r.id,
            provider: r.provider,
            principal: r.principal,
            issuer: r.issuer,
            redirect_uri: r.redirect_uri,
            resource: r.resource,
            error: r.error,
            created_at: Timestamp::from_millis(r.created_at),
            exchanged_at: r.exchanged_at.map(Timestamp::from_millis),
        })
    }
}

/// `grant_id, state_hash, verifier_sealed, expires_at` of `scope_grant_states`.
#[derive(Debug, sqlx::FromRow)]
pub struct StateDbRow {
    /// Grant id.
    pub grant_id: String,
    /// SHA-256 hex.
    pub state_hash: String,
    /// Sealed verifier.
    pub verifier_sealed: String,
    /// Milliseconds.
    pub expires_at: i64,
}

impl From<StateDbRow> for StateRow {
    fn from(r: StateDbRow) -> Self {
        StateRow {
            grant_id: r.grant_id,
            state_hash: r.state_hash,
            verifier_sealed: r.verifier_sealed,
            expires_at: Timestamp::from_millis(r.expires_at),
        }
    }
}

/// A tenancy store error in scope terms (an audit append).
pub fn scope_error_from(e: StoreError) -> ScopeStoreError {
    match e {
        StoreError::Unavailable(m) => ScopeStoreError::Unavailable(m),
        StoreError::Conflict(_) => ScopeStoreError::Conflict,
        other => ScopeStoreError::Other(other.to_string()),
    }
}

/// A driver error in scope terms.
pub fn scope_error(e: sqlx::Error) -> ScopeStoreError {
    scope_error_from(store_error(e))
}

/// A list of scopes as JSON text.
pub fn scopes_json(s: &[String]) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "[]".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_rows_convert_and_corrupt_ones_are_errors() {
        let row = |status: &str, granted: Option<&str>| GrantDbRow {
            id: "0".repeat(32),
            provider: "gh".into(),
            principal: "p".into(),
            issuer: "i".into(),
            redirect_uri: "https://a/cb".into(),
            resource: None,
            requested: r#"["repo"]"#.into(),
            needed: r#"["public_repo"]"#.into(),
            granted: granted.map(str::to_owned),
            status: status.into(),
            error: None,
            created_at: 1,
            exchanged_at: None,
        };
        let g = GrantRow::try_from(row("exchanged", Some(r#"["repo"]"#))).unwrap();
        assert_eq!(g.granted.unwrap(), ["repo"]);
        assert_eq!(g.status, GrantStatus::Exchanged);
        assert!(GrantRow::try_from(row("lost", None)).is_err());
        assert!(GrantRow::try_from(row("pending", Some("nope"))).is_err());
    }
}
