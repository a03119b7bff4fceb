//! Wiring of the guard's routes: the tenant's servers and their approved
//! cards over the registry (the card's streamable-http remotes read as the
//! scope service reads them for a grant's resource), upstream headers
//! sealed with the server's keyring, and the egress path under each
//! tenant's rules ([`crate::egress_wiring`]).

use std::sync::Arc;

use async_trait::async_trait;
use pinfold_core::ids::TenantId;
use pinfold_guard::model::VersionPin;
use pinfold_guard::{GuardState, PinnedServer, Servers};
use pinfold_http::problem::ApiError;
use pinfold_registry::RegistryState;
use pinfold_registry::keys::Keyring;
use pinfold_scope::Signatures;

use crate::scope_wiring::RegistryTools;
use crate::sealer::KeyringSealer;
use crate::store::Store;

/// The guard's view of the registry.
pub struct RegistryServers(pub RegistryState);

#[async_trait]
impl Servers for RegistryServers {
    async fn canonical(&self, tenant: &TenantId, server: &str) -> Result<String, ApiError> {
        let key = pinfold_registry::error::server_key(server)?;
        let key = key.canonical().to_owned();
        let idx = pinfold_registry::service::server_index(&self.0, tenant, &key).await?;
        if idx.entries.is_empty() {
            return Err(pinfold_registry::error::server_not_found());
        }
        Ok(key)
    }

    async fn pinned(
        &self,
        tenant: &TenantId,
        server: &str,
        version: &VersionPin,
    ) -> Result<PinnedServer, ApiError> {
        let key = self.canonical(tenant, server).await?;
        let idx = pinfold_registry::service::server_index(&self.0, tenant, &key).await?;
        let approved = match version {
            VersionPin::Latest => idx.latest.clone(),
            VersionPin::Exact(v) => {
                let entry = idx
                    .entries
                    .get(v)
                    .ok_or_else(pinfold_registry::error::version_not_found)?;
                matches!(
                    entry.status,
                    pinfold_registry::model::Status::Approved
                        | pinfold_registry::model::Status::Deprecated
                )
                .then(|| v.clone())
            }
        };
        let approved_remotes = match approved {
            Some(v) => {
                let remotes = RegistryTools(self.0.clone())
                    .remotes(tenant, &key, &v)
                    .await?;
                remotes.trusted.then_some(remotes.streamable_http)
            }
            None => None,
        };
        Ok(PinnedServer {
            server: key,
            approved_remotes,
        })
    }
}

impl pinfold_guard::Sealer for KeyringSealer {
    fn seal(&self, tenant: &TenantId, context: &str, plain: &[u8]) -> Result<String, String> {
        self.0
            .seal_bound(tenant, context, plain)
            .map_err(|e| e.to_string())
    }

    fn open(&self, tenant: &TenantId, context: &str, sealed: &str) -> Result<Vec<u8>, String> {
        self.0
            .open_bound(tenant, context, sealed)
            .map_err(|e| e.to_string())
    }
}

/// The guard's state over `store`, the registry and `keyring`.
pub fn guard_state(
    store: &Store,
    registry: &RegistryState,
    keyring: Arc<Keyring>,
    egress: &Arc<pinfold_egress::Egress>,
) -> GuardState {
    GuardState {
        store: store.guard(),
        servers: Arc::new(RegistryServers(registry.clone())),
        sealer: Arc::new(KeyringSealer(keyring)),
        egress: crate::egress_wiring::tenant_egress(egress, store.tenants()),
    }
}
