//! What the registry's handlers and use cases share: the state, and the
//! tenant policy as the registry sees it.

use std::sync::Arc;

use async_trait::async_trait;
use signet_core::Mode;
use signet_core::card::Limits;
use signet_core::ids::{TenantId, Timestamp};

use crate::index::EtagIndex;
use crate::keys::Keyring;
use crate::store::{RegistryStore, RegistryStoreError};

/// What the registry needs to know about a tenant's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistryPolicy {
    /// Whether new versions wait for review.
    pub approval_required: bool,
    /// The enforcement mode for this server (tenant mode or server override).
    pub mode: Mode,
}

/// Tenant policies, as the registry sees them. The server implements this on
/// top of the tenancy store (service crates never depend on each other).
#[async_trait]
pub trait PolicySource: Send + Sync + 'static {
    /// The policy for `server_key` in `tenant`, or `None` when the tenant
    /// does not exist.
    async fn registry_policy(
        &self,
        tenant: &TenantId,
        server_key: &str,
    ) -> Result<Option<RegistryPolicy>, RegistryStoreError>;
}

/// What the registry routes need.
#[derive(Clone)]
pub struct RegistryState {
    /// The store.
    pub store: Arc<dyn RegistryStore>,
    /// Tenant policies.
    pub policies: Arc<dyn PolicySource>,
    /// Seals tenant attestation keys.
    pub keyring: Arc<Keyring>,
    /// Conditional-GET index.
    pub index: Arc<EtagIndex>,
    /// Document limits.
    pub limits: Limits,
}

pub(crate) fn now() -> Timestamp {
    Timestamp::from_millis(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0),
    )
}
