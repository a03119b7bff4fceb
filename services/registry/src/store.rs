//! The registry's storage contract.

use async_trait::async_trait;
use pinfold_core::ids::{TenantId, Timestamp};

use crate::model::{
    ListedVersion, NewVersion, PublishOutcome, Review, ServerRow, Status, StatusChange, StoredKey,
    StoredVersion, VersionMeta,
};

/// Store failures.
#[derive(Debug, thiserror::Error)]
pub enum RegistryStoreError {
    /// The tenant does not exist.
    #[error("tenant not found")]
    TenantNotFound,
    /// The addressed version does not exist.
    #[error("not found")]
    NotFound,
    /// The status changed since it was read (compare-and-set failed).
    #[error("status changed concurrently")]
    Stale,
    /// The database could not be reached or timed out.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// Anything else.
    #[error("database error: {0}")]
    Other(String),
}

/// Filters for listing servers.
#[derive(Debug, Clone, Default)]
pub struct ServerQuery {
    /// Case-insensitive substring of name, title or description.
    pub q: Option<String>,
    /// Only servers with at least one version in this status.
    pub status: Option<Status>,
    /// Server key to start after (exclusive).
    pub after: Option<String>,
    /// Page size.
    pub limit: u32,
}

/// Filters of the subregistry listing (the official-registry-compatible
/// `/v0.1` view): versions that were ever approved (`approved_at` is set),
/// ordered by server key, then version (byte order of both), one row per
/// version.
#[derive(Debug, Clone, Default)]
pub struct SubregistryQuery {
    /// Only this server (its key).
    pub server: Option<String>,
    /// Case-insensitive literal substring of the server key (turned into a
    /// pattern with [`like_pattern`] by the store).
    pub search: Option<String>,
    /// Only versions whose status changed strictly after this instant.
    pub updated_since: Option<Timestamp>,
    /// Only this exact version.
    pub version: Option<String>,
    /// Also revoked versions (approved once, then withdrawn).
    pub include_revoked: bool,
    /// The `(server key, version)` to start after (exclusive).
    pub after: Option<(String, String)>,
    /// Page size.
    pub limit: u32,
}

/// The SQL `LIKE` pattern (with `ESCAPE '\'`) matching `q` as a
/// case-insensitive literal substring: `%`, `_` and `\` in `q` match only
/// themselves. Both store backends search with it.
pub fn like_pattern(q: &str) -> String {
    let mut p = String::from("%");
    for c in q.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

/// Servers, immutable versions, their status and reviews, attestation keys.
///
/// Every method takes the tenant first. Implementations keep the document
/// and digest immutable (database triggers) and append an audit event in the
/// same transaction as every change.
#[async_trait]
pub trait RegistryStore: Send + Sync + 'static {
    /// Stores a new version (and its server row), or reports the existing one.
    /// Concurrent publishes of one version: exactly one `Created`.
    async fn publish(
        &self,
        tenant: &TenantId,
        v: &NewVersion<'_>,
    ) -> Result<PublishOutcome, RegistryStoreError>;

    /// One version with its document.
    async fn version(
        &self,
        tenant: &TenantId,
        server_key: &str,
        version: &str,
    ) -> Result<Option<StoredVersion>, RegistryStoreError>;

    /// One version with its document and its review history (oldest first),
    /// read in one statement: what a version record shows.
    async fn version_record(
        &self,
        tenant: &TenantId,
        server_key: &str,
        version: &str,
    ) -> Result<Option<(StoredVersion, Vec<Review>)>, RegistryStoreError>;

    /// All versions of a server (no documents), in no particular order.
    async fn versions(
        &self,
        tenant: &TenantId,
        server_key: &str,
    ) -> Result<Vec<VersionMeta>, RegistryStoreError>;

    /// One server row.
    async fn server(
        &self,
        tenant: &TenantId,
        server_key: &str,
    ) -> Result<Option<ServerRow>, RegistryStoreError>;

    /// A page of servers ordered by key.
    async fn servers(
        &self,
        tenant: &TenantId,
        query: &ServerQuery,
    ) -> Result<Vec<(String, ServerRow)>, RegistryStoreError>;

    /// Applies a status change if the revision still matches (else `Stale`),
    /// records the review (for approve/reject) and the audit event.
    async fn change_status(
        &self,
        tenant: &TenantId,
        change: &StatusChange<'_>,
    ) -> Result<(), RegistryStoreError>;

    /// Review history of a version, oldest first.
    async fn reviews(
        &self,
        tenant: &TenantId,
        server_key: &str,
        version: &str,
    ) -> Result<Vec<Review>, RegistryStoreError>;

    /// The tenant's attestation key, if created.
    async fn tenant_key(&self, tenant: &TenantId) -> Result<Option<StoredKey>, RegistryStoreError>;

    /// A page of versions that were ever approved, without their documents
    /// (see [`SubregistryQuery`]).
    async fn subregistry_versions(
        &self,
        tenant: &TenantId,
        query: &SubregistryQuery,
    ) -> Result<Vec<ListedVersion>, RegistryStoreError>;

    /// The keys of up to `limit` servers after `after` (exclusive, byte
    /// order) that have an approved version, whose key contains `search`
    /// (case-insensitive literal substring) if given, and, given
    /// `changed_after`, whose approved versions include one whose status
    /// changed after it (so `updated_since` never walks servers nothing
    /// happened to); ordered by key.
    async fn servers_with_approved(
        &self,
        tenant: &TenantId,
        after: &str,
        search: Option<&str>,
        changed_after: Option<Timestamp>,
        limit: u32,
    ) -> Result<Vec<String>, RegistryStoreError>;

    /// The approved versions (no documents) of these servers, in no
    /// particular order.
    async fn approved_versions(
        &self,
        tenant: &TenantId,
        servers: &[String],
    ) -> Result<Vec<ListedVersion>, RegistryStoreError>;

    /// These `(server key, version)` versions with their documents, each
    /// with its server key, in no particular order; absent ones are left
    /// out.
    async fn versions_by_keys(
        &self,
        tenant: &TenantId,
        keys: &[(String, String)],
    ) -> Result<Vec<(String, StoredVersion)>, RegistryStoreError>;

    /// Stores the tenant's key unless one exists; returns the one stored.
    async fn insert_tenant_key(
        &self,
        tenant: &TenantId,
        key: &StoredKey,
    ) -> Result<StoredKey, RegistryStoreError>;
}

#[cfg(test)]
mod tests {
    use super::like_pattern;

    #[test]
    fn like_patterns_escape_wildcards() {
        assert_eq!(like_pattern("ACME"), "%acme%");
        assert_eq!(like_pattern("100%"), "%100\\%%");
        assert_eq!(like_pattern("a_b\\c"), "%a\\_b\\\\c%");
    }
}
