//! The server's keyring as the sealer the resolve and scope services take:
//! secrets at rest (upstream headers, client secrets, PKCE verifiers) are
//! sealed with the encryption key (AES-256-GCM), bound to the tenant and a
//! context within it.

use std::sync::Arc;

use pinfold_core::ids::TenantId;
use pinfold_registry::keys::Keyring;

/// Seals with the server's encryption key, for either service.
pub struct KeyringSealer(pub Arc<Keyring>);

impl pinfold_resolve::Sealer for KeyringSealer {
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

impl pinfold_scope::Sealer for KeyringSealer {
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
