//! The resolve service's storage contract: session rows and the audit
//! events the service records.

use async_trait::async_trait;
use pinfold_core::ids::{TenantId, Timestamp};

use crate::session::{AuditNote, SessionRow};

/// Store failures.
#[derive(Debug, thiserror::Error)]
pub enum SessionStoreError {
    /// The tenant does not exist.
    #[error("tenant not found")]
    TenantNotFound,
    /// The pinned version does not exist (the foreign key refused it).
    #[error("version not found")]
    VersionNotFound,
    /// A session with this id exists already.
    #[error("session id taken")]
    Conflict,
    /// The database could not be reached or timed out.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// Anything else.
    #[error("database error: {0}")]
    Other(String),
}

/// Session rows. Every method takes the tenant first.
#[async_trait]
pub trait SessionStore: Send + Sync + 'static {
    /// Stores a new session and appends `audit` in the same transaction.
    async fn insert_session(
        &self,
        tenant: &TenantId,
        session: &SessionRow,
        audit: &AuditNote,
    ) -> Result<(), SessionStoreError>;

    /// One session, expired or not.
    async fn session(
        &self,
        tenant: &TenantId,
        id: &str,
    ) -> Result<Option<SessionRow>, SessionStoreError>;

    /// Deletes a session and appends `audit` in the same transaction;
    /// `false` when there was none. On PostgreSQL every replica hears of it
    /// (after the commit) so it drops what it cached for the session.
    async fn delete_session(
        &self,
        tenant: &TenantId,
        id: &str,
        audit: &AuditNote,
    ) -> Result<bool, SessionStoreError>;

    /// A page of sessions ordered by id, starting after `after`.
    async fn sessions(
        &self,
        tenant: &TenantId,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<SessionRow>, SessionStoreError>;

    /// Appends an audit event on its own.
    async fn record(&self, tenant: &TenantId, audit: &AuditNote) -> Result<(), SessionStoreError>;

    /// Deletes sessions (of every tenant) that ended before `before`, at
    /// most `limit` of them; returns how many.
    async fn purge_expired(&self, before: Timestamp, limit: u32) -> Result<u64, SessionStoreError>;
}
