//! What the registry's handlers and use cases share: the state (store,
//! policy source, keyring, indexes and caches) and the clock.

use std::sync::Arc;

use pinfold_core::card::Limits;
use pinfold_core::ids::Timestamp;

use crate::index::EtagIndex;
use crate::keys::Keyring;
use crate::policy::PolicySource;
use crate::store::RegistryStore;
use crate::subregistry::cache::ViewCache;

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
    /// Rendered subregistry views of documents, by digest.
    pub views: Arc<ViewCache>,
}

pub(crate) fn now() -> Timestamp {
    Timestamp::from_millis(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0),
    )
}
