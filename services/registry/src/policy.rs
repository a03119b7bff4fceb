//! The tenant policy as the registry sees it: whether new versions wait for
//! review, the enforcement modes, and the trait the server implements over
//! the tenancy store to answer both.

use async_trait::async_trait;
use pinfold_core::Mode;
use pinfold_core::ids::TenantId;

use crate::store::RegistryStoreError;

/// What the registry needs to know about a tenant's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistryPolicy {
    /// Whether new versions wait for review.
    pub approval_required: bool,
    /// The enforcement mode for this server (tenant mode or server override).
    pub mode: Mode,
}

/// A tenant's enforcement modes: the tenant-wide mode and the per-server
/// overrides, for views that show many servers at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnforcementModes {
    /// The tenant-wide mode.
    pub default: Mode,
    /// `(server name, mode)` overrides; names compare
    /// ASCII-case-insensitively, as their canonical form does.
    pub overrides: Vec<(String, Mode)>,
}

impl EnforcementModes {
    /// The mode for `server` (any spelling): its override, else the
    /// tenant-wide mode.
    pub fn mode_for(&self, server: &str) -> Mode {
        self.overrides
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(server))
            .map_or(self.default, |(_, m)| *m)
    }
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

    /// The tenant's enforcement modes, or `None` when the tenant does not
    /// exist.
    async fn enforcement_modes(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<EnforcementModes>, RegistryStoreError>;
}
