//! Wiring of the scope service: its store, secret sealing over the server's
//! keyring (the same AES-256-GCM key, bound to tenant and provider or
//! grant), and the SSRF policy of `url_policy` for provider URLs.

use std::sync::Arc;

use signet_core::ids::TenantId;
use signet_registry::keys::Keyring;
use signet_scope::{ScopeConfig, ScopeState};

use crate::resolve_wiring::KeyringSealer;
use crate::store::Store;

impl signet_scope::Sealer for KeyringSealer {
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

/// The scope service's state over `store`, sealing with `keyring`.
pub fn scope_state(store: &Store, keyring: Arc<Keyring>) -> anyhow::Result<ScopeState> {
    ScopeState::new(
        store.scope(),
        Arc::new(KeyringSealer(keyring)),
        Arc::new(|raw: &str| crate::url_policy::trusted_fetch_url(raw)),
        ScopeConfig::default(),
    )
    .map_err(anyhow::Error::msg)
}
