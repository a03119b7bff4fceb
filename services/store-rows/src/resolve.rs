//! Rows of `resolve_sessions`.

use pinfold_core::ids::Timestamp;
use pinfold_resolve::{CachePolicy, SessionRow, SessionStoreError};
use pinfold_tenancy::StoreError;

use crate::error::store_error;

/// The columns of `resolve_sessions` after `tenant_id`, in table order.
#[derive(Debug, sqlx::FromRow)]
pub struct SessionDbRow {
    /// Session id.
    pub id: String,
    /// Token `sub`.
    pub principal: String,
    /// Token `iss`.
    pub issuer: String,
    /// Canonical server name.
    pub server: String,
    /// Pinned version.
    pub version: String,
    /// Its digest.
    pub digest: String,
    /// Wire spelling of the mode.
    pub mode: String,
    /// `session` or `none`.
    pub cache_policy: String,
    /// Upstream endpoint.
    pub upstream_url: String,
    /// Sealed upstream headers.
    pub upstream_sealed: Option<String>,
    /// Milliseconds since the epoch.
    pub created_at: i64,
    /// Milliseconds since the epoch.
    pub expires_at: i64,
}

impl TryFrom<SessionDbRow> for SessionRow {
    type Error = SessionStoreError;
    fn try_from(r: SessionDbRow) -> Result<Self, SessionStoreError> {
        Ok(SessionRow {
            mode: r
                .mode
                .parse()
                .map_err(|_| SessionStoreError::Other(format!("stored mode {}", r.mode)))?,
            cache_policy: CachePolicy::parse(&r.cache_policy).ok_or_else(|| {
                SessionStoreError::Other(format!("stored cache policy {}", r.cache_policy))
            })?,
            id: r.id,
            principal: r.principal,
            issuer: r.issuer,
            server: r.server,
            version: r.version,
            digest: r.digest,
            upstream_url: r.upstream_url,
            upstream_sealed: r.upstream_sealed,
            created_at: Timestamp::from_millis(r.created_at),
            expires_at: Timestamp::from_millis(r.expires_at),
        })
    }
}

/// A tenancy store error in resolve terms (an audit append inside a
/// session write).
pub fn session_error_from(e: StoreError) -> SessionStoreError {
    match e {
        StoreError::Unavailable(m) => SessionStoreError::Unavailable(m),
        StoreError::Conflict(_) => SessionStoreError::Conflict,
        other => SessionStoreError::Other(other.to_string()),
    }
}

/// A driver error in resolve terms: a foreign-key violation means the
/// pinned version does not exist.
pub fn session_error(e: sqlx::Error) -> SessionStoreError {
    if let sqlx::Error::Database(db) = &e
        && db.is_foreign_key_violation()
    {
        return SessionStoreError::VersionNotFound;
    }
    session_error_from(store_error(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(mode: &str, cache: &str) -> SessionDbRow {
        SessionDbRow {
            id: "0123456789abcdef0123456789abcdef".into(),
            principal: "carl".into(),
            issuer: "https://issuer".into(),
            server: "a.b/c".into(),
            version: "1.0.0".into(),
            digest: format!("sha256:{}", "0".repeat(64)),
            mode: mode.into(),
            cache_policy: cache.into(),
            upstream_url: "http://127.0.0.1:9/mcp".into(),
            upstream_sealed: None,
            created_at: 1,
            expires_at: 2,
        }
    }

    #[test]
    fn session_rows_convert_and_corrupt_ones_are_errors() {
        let s = SessionRow::try_from(row("strict", "none")).unwrap();
        assert_eq!(s.mode, pinfold_core::Mode::Strict);
        assert_eq!(s.cache_policy, CachePolicy::None);
        assert_eq!(s.expires_at, Timestamp::from_millis(2));
        assert!(SessionRow::try_from(row("lenient", "none")).is_err());
        assert!(SessionRow::try_from(row("strict", "forever")).is_err());
    }
}
