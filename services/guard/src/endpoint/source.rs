//! What the guard endpoint needs from the rest of the server, as a trait
//! the server implements: the approved signature a route pins and the
//! tenant's enforcement mode (the keyring is the routes' [`crate::Sealer`]).

use std::sync::Arc;

use async_trait::async_trait;
use pinfold_core::Mode;
use pinfold_core::ids::TenantId;
use pinfold_http::problem::ApiError;
use serde_json::Value;

use crate::model::VersionPin;

/// An approved version as the guard enforces it.
#[derive(Debug, Clone)]
pub struct ApprovedVersion {
    /// The server's canonical name.
    pub server: String,
    /// The exact version.
    pub version: String,
    /// The digest of its card.
    pub digest: String,
    /// The card document (immutable for a digest).
    pub card: Arc<Value>,
}

/// The registry and tenancy as the guard sees them. Errors are already
/// problem+json.
#[async_trait]
pub trait Approved: Send + Sync + 'static {
    /// The version `pin` selects among the approved ones (`latest`: the
    /// highest approved; deprecated versions still bind), or `None` when
    /// there is none (nothing approved yet, the pinned one pending,
    /// rejected or revoked).
    async fn approved(
        &self,
        tenant: &TenantId,
        server: &str,
        pin: &VersionPin,
    ) -> Result<Option<ApprovedVersion>, ApiError>;

    /// The tenant's enforcement mode for `server` (its override, else the
    /// tenant default).
    async fn mode(&self, tenant: &TenantId, server: &str) -> Result<Mode, ApiError>;
}
