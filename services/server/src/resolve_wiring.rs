//! Wiring of the resolve service: signatures and policies over the registry
//! and tenancy, header sealing over the server's keyring, and the change
//! listener that reaches every replica's caches.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pinfold_core::ids::TenantId;
use pinfold_http::problem::ApiError;
use pinfold_registry::RegistryState;
use pinfold_registry::model::Status;
use pinfold_resolve::{
    CachePolicy, Engine, EngineConfig, LiveSessions, Pinned, ResolveConfig, ResolveState,
    ServerPolicy, Signatures, Standing,
};
use pinfold_tenancy::StoreError;
use pinfold_tenancy::model::ResolveCache;
use serde_json::Value;

use crate::config::ResolveSettings;
use crate::policy_cache::PolicyCache;
use crate::sealer::KeyringSealer;
use crate::store::Store;

/// The resolve service's view of the registry and of tenant policies.
pub struct RegistrySignatures {
    /// The registry (its ETag index answers `standing` from memory).
    pub registry: RegistryState,
    /// Tenant policies, read on every resolve (at most a second old; a
    /// change made through this process is seen at once).
    pub policies: Arc<PolicyCache>,
}

fn standing(status: Status) -> Standing {
    match status {
        Status::Approved | Status::Deprecated => Standing::Trusted,
        Status::Pending => Standing::NotTrusted("pending review"),
        Status::Rejected => Standing::NotTrusted("rejected"),
        Status::Revoked => Standing::Revoked,
    }
}

#[async_trait]
impl Signatures for RegistrySignatures {
    async fn pin(
        &self,
        tenant: &TenantId,
        server: &str,
        version: &str,
    ) -> Result<Pinned, ApiError> {
        let key = pinfold_registry::error::server_key(server)?;
        let key = key.canonical().to_owned();
        let exact =
            pinfold_registry::service::resolve_version(&self.registry, tenant, &key, version)
                .await?;
        let idx = pinfold_registry::service::server_index(&self.registry, tenant, &key).await?;
        let entry = idx
            .entries
            .get(&exact)
            .ok_or_else(pinfold_registry::error::version_not_found)?;
        Ok(Pinned {
            server: key,
            version: exact,
            digest: entry.digest.clone(),
            standing: standing(entry.status),
        })
    }

    async fn standing(
        &self,
        tenant: &TenantId,
        server: &str,
        version: &str,
    ) -> Result<Standing, ApiError> {
        let idx = pinfold_registry::service::server_index(&self.registry, tenant, server).await?;
        // Versions are never deleted: a pinned version missing from the
        // index means the tenant's data is gone; treat it as revoked.
        Ok(idx
            .entries
            .get(version)
            .map_or(Standing::Revoked, |e| standing(e.status)))
    }

    async fn document(
        &self,
        tenant: &TenantId,
        server: &str,
        version: &str,
    ) -> Result<Value, ApiError> {
        let v = pinfold_registry::service::load(&self.registry, tenant, server, version).await?;
        serde_json::from_str(&v.document).map_err(|e| {
            tracing::error!(error = %e, "stored document is not JSON");
            ApiError::internal()
        })
    }

    async fn policy(&self, tenant: &TenantId, server: &str) -> Result<ServerPolicy, ApiError> {
        let rec = self.policies.policy(tenant).await.map_err(|e| match e {
            StoreError::Unavailable(m) => {
                tracing::error!(error = %m, "database unavailable");
                ApiError::database_unavailable()
            }
            other => {
                tracing::error!(error = %other, "database error");
                ApiError::internal()
            }
        })?;
        let Some(rec) = rec else {
            return Err(pinfold_http::tenant::tenant_not_found());
        };
        let policy = &rec.record.policy;
        Ok(ServerPolicy {
            mode: policy.mode_for(server),
            cache: match policy.resolve_cache_for(server) {
                ResolveCache::None => CachePolicy::None,
                ResolveCache::Session => CachePolicy::Session,
            },
        })
    }
}

/// The resolve service's state over `store` and the registry.
/// `policies` is the cache the tenancy routes' store announces policy
/// writes to ([`crate::policy_cache::Announcing`]).
pub fn resolve_state(
    store: &Store,
    registry: &RegistryState,
    settings: &ResolveSettings,
    egress: &Arc<pinfold_egress::Egress>,
    policies: &Arc<PolicyCache>,
) -> ResolveState {
    let limits = &registry.limits;
    ResolveState {
        store: store.sessions(),
        signatures: Arc::new(RegistrySignatures {
            registry: registry.clone(),
            policies: policies.clone(),
        }),
        sealer: Arc::new(KeyringSealer(registry.keyring.clone())),
        live: Arc::new(LiveSessions::default()),
        config: Arc::new(ResolveConfig {
            default_ttl: Duration::from_secs(settings.default_session_ttl_secs),
            max_ttl: Duration::from_secs(settings.max_session_ttl_secs),
            limits: limits.clone(),
        }),
        engine: Arc::new(Engine::new(EngineConfig {
            capacity_bytes: settings.cache_capacity_bytes,
            tenant_share_bytes: settings.cache_tenant_share_bytes(),
            upstream_timeout: Duration::from_millis(settings.upstream_timeout_ms),
            egress: egress.clone(),
            max_response_bytes: usize::try_from(settings.upstream_max_response_bytes)
                .unwrap_or(usize::MAX),
            recheck_rate: settings.recheck_rate,
            limits: limits.clone(),
            unwatched_entry_ttl: Duration::from_secs(settings.unwatched_entry_ttl_secs),
            ..EngineConfig::default()
        })),
        prepared: pinfold_resolve::state::prepared_cache(settings.prepared_capacity_bytes),
        egress: crate::egress_wiring::tenant_egress(egress, store.tenants()),
    }
}

/// On PostgreSQL, listens for changes committed by any replica and evicts
/// what this replica cached: registry writes evict the ETag index (a
/// revocation then reaches every resolve through `standing`); closed
/// sessions are dropped. On a gap, everything is dropped. SQLite runs as
/// one process and needs no listener.
pub fn spawn_change_listener(store: &Store, registry: &RegistryState, resolve: &ResolveState) {
    let Store::Postgres(pg) = store else {
        return;
    };
    let (index, gap_index) = (registry.index.clone(), registry.index.clone());
    let (res, gap_res) = (resolve.clone(), resolve.clone());
    pg.spawn_change_listener(
        move |channel, tenant, key| {
            let Ok(t) = TenantId::parse(tenant) else {
                return;
            };
            match channel {
                pinfold_store_postgres::REGISTRY_CHANNEL => index.evict(&t, key),
                pinfold_store_postgres::RESOLVE_CHANNEL => res.end_session(&t, key),
                _ => {}
            }
        },
        move || {
            gap_index.clear();
            gap_res.forget_sessions();
        },
    );
}

/// Deletes ended sessions in the background, a batch at a time, every
/// `every`. Ended sessions answer 410 until then; afterwards 404.
pub fn spawn_session_purge(store: &Store, every: Duration) -> tokio::task::JoinHandle<()> {
    let sessions = store.sessions();
    crate::purge::spawn("ended resolve sessions", every, move |limit| {
        let sessions = sessions.clone();
        async move {
            sessions
                .purge_expired(pinfold_resolve::state::now(), limit)
                .await
        }
    })
}
