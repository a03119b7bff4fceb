//! The storage contract of guard routes and the drift they record.

use async_trait::async_trait;
use pinfold_core::audit::NewAuditEvent;
use pinfold_core::ids::TenantId;

use crate::model::GuardRoute;

/// Store failures, in terms the HTTP edge can map.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An optimistic-concurrency check failed; carries the current revision
    /// (`None`: the route does not exist).
    #[error("precondition failed")]
    PreconditionFailed {
        /// The revision now stored.
        current: Option<i64>,
    },
    /// The database could not be reached or timed out.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// Anything else (logged, answered with a generic 500).
    #[error("database error: {0}")]
    Other(String),
}

/// Guard routes and their drift records.
///
/// **Every method takes the tenant first**; server names compare without
/// regard to ASCII case, as everywhere else.
#[async_trait]
pub trait GuardStore: Send + Sync + 'static {
    /// Creates or replaces the route of `route.server` and appends `event`
    /// in one transaction. With `expected_revision`, fails with
    /// `PreconditionFailed` unless the stored revision equals it. Returns
    /// the stored route (its revision bumped).
    async fn put_route(
        &self,
        tenant: &TenantId,
        route: &GuardRoute,
        expected_revision: Option<i64>,
        event: &NewAuditEvent,
    ) -> Result<GuardRoute, StoreError>;

    /// Reads the route of `server`.
    async fn route(
        &self,
        tenant: &TenantId,
        server: &str,
    ) -> Result<Option<GuardRoute>, StoreError>;

    /// Deletes the route of `server` and appends `event`, in one
    /// transaction; `false` when there was none.
    async fn delete_route(
        &self,
        tenant: &TenantId,
        server: &str,
        event: &NewAuditEvent,
    ) -> Result<bool, StoreError>;

    /// Records that the route of `server` saw the upstream list `upstream_digest`
    /// drift from the signature `pinned_digest`, and appends `event` — once:
    /// `false` (and nothing appended) when that drift was recorded before,
    /// by this replica or any other.
    async fn record_drift(
        &self,
        tenant: &TenantId,
        server: &str,
        pinned_digest: &str,
        upstream_digest: &str,
        event: &NewAuditEvent,
    ) -> Result<bool, StoreError>;
}
