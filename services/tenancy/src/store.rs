//! The storage contract for tenants, policies and audit events.

use async_trait::async_trait;
use pinfold_core::ids::{TenantId, Timestamp};

use crate::model::{AuditEvent, AuditFilter, NewAuditEvent, Policy, PolicyRecord, TenantRecord};

/// Store failures, in terms the HTTP edge can map.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A unique key is taken (for example the tenant id).
    #[error("conflict: {0}")]
    Conflict(String),
    /// An optimistic-concurrency check failed; carries the current revision.
    #[error("precondition failed: current revision is {current}")]
    PreconditionFailed {
        /// The revision now stored.
        current: i64,
    },
    /// The addressed row does not exist.
    #[error("not found")]
    NotFound,
    /// The database could not be reached or timed out.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// Anything else (logged, answered with a generic 500).
    #[error("database error: {0}")]
    Other(String),
}

/// Tenants, policies and the audit log.
///
/// **Every method takes the tenant first**, and every table's key starts with
/// the tenant: a query that forgets the tenant cannot be expressed through
/// this trait.
#[async_trait]
pub trait TenantStore: Send + Sync + 'static {
    /// Creates a tenant with its initial policy and appends `tenant.created`,
    /// in one transaction. `Conflict` when the id is taken.
    async fn create_tenant(
        &self,
        tenant: &TenantId,
        name: &str,
        policy: &Policy,
        actor: &str,
        at: Timestamp,
    ) -> Result<TenantRecord, StoreError>;

    /// Reads a tenant.
    async fn tenant(&self, tenant: &TenantId) -> Result<Option<TenantRecord>, StoreError>;

    /// Reads a tenant's policy.
    async fn policy(&self, tenant: &TenantId) -> Result<Option<PolicyRecord>, StoreError>;

    /// Replaces a tenant's policy and appends `policy.updated`, in one
    /// transaction. With `expected_revision`, fails with
    /// `PreconditionFailed` unless the stored revision equals it.
    async fn put_policy(
        &self,
        tenant: &TenantId,
        policy: &Policy,
        expected_revision: Option<i64>,
        actor: &str,
        at: Timestamp,
    ) -> Result<PolicyRecord, StoreError>;

    /// Appends one audit event.
    async fn append_audit(
        &self,
        tenant: &TenantId,
        event: &NewAuditEvent,
    ) -> Result<i64, StoreError>;

    /// Lists audit events in id order, after `after` (exclusive), at most `limit`.
    async fn audit(
        &self,
        tenant: &TenantId,
        filter: &AuditFilter,
        after: Option<i64>,
        limit: u32,
    ) -> Result<Vec<AuditEvent>, StoreError>;

    /// Checks the database answers (for `/readyz`).
    async fn ping(&self) -> Result<(), StoreError>;
}
