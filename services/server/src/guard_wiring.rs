//! Wiring of the guard's routes: the tenant's servers and their approved
//! cards over the registry (the card's streamable-http remotes read as the
//! scope service reads them for a grant's resource), upstream headers
//! sealed with the server's keyring, and the egress path under each
//! tenant's rules ([`crate::egress_wiring`]).

use std::sync::Arc;

use async_trait::async_trait;
use pinfold_core::Mode;
use pinfold_core::annotations::Annotations;
use pinfold_core::ids::TenantId;
use pinfold_guard::endpoint::source::{Approved, ApprovedVersion, CallToResolve, Resolver};
use pinfold_guard::endpoint::{EndpointState, GuardConfig};
use pinfold_guard::model::VersionPin;
use pinfold_guard::{GuardState, PinnedServer, Servers};
use pinfold_http::problem::ApiError;
use pinfold_registry::RegistryState;
use pinfold_registry::keys::Keyring;
use pinfold_registry::model::Status;
use pinfold_scope::Signatures;
use pinfold_tenancy::StoreError;

use crate::policy_cache::PolicyCache;
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

/// The guard's state over `store`, the registry and `keyring`; a route
/// written through it is dropped at once from `endpoint`, this replica's.
pub fn guard_state(
    store: &Store,
    registry: &RegistryState,
    keyring: Arc<Keyring>,
    egress: &Arc<pinfold_egress::Egress>,
    endpoint: &EndpointState,
) -> GuardState {
    GuardState {
        store: store.guard(),
        servers: Arc::new(RegistryServers(registry.clone())),
        sealer: Arc::new(KeyringSealer(keyring)),
        egress: crate::egress_wiring::tenant_egress(egress, store.tenants()),
        on_write: Some(Arc::new(endpoint.clone())),
    }
}

/// The registry and tenant policies as the guard endpoint reads them.
pub struct RegistryApproved {
    /// The registry (its ETag index answers which version is approved
    /// from memory).
    pub registry: RegistryState,
    /// Tenant policies (at most a second old).
    pub policies: Arc<PolicyCache>,
}

#[async_trait]
impl Approved for RegistryApproved {
    async fn approved(
        &self,
        tenant: &TenantId,
        server: &str,
        pin: &VersionPin,
    ) -> Result<Option<ApprovedVersion>, ApiError> {
        let key = pinfold_registry::error::server_key(server)?;
        let key = key.canonical().to_owned();
        let idx = pinfold_registry::service::server_index(&self.registry, tenant, &key).await?;
        let version = match pin {
            VersionPin::Latest => match &idx.latest {
                Some(v) => v.clone(),
                None => return Ok(None),
            },
            VersionPin::Exact(v) => v.clone(),
        };
        let Some(entry) = idx.entries.get(&version) else {
            return Ok(None);
        };
        if !matches!(entry.status, Status::Approved | Status::Deprecated) {
            return Ok(None);
        }
        let digest = entry.digest.clone();
        let stored =
            pinfold_registry::service::load(&self.registry, tenant, &key, &version).await?;
        let card = serde_json::from_str(&stored.document).map_err(|e| {
            tracing::error!(error = %e, "stored document is not JSON");
            ApiError::internal()
        })?;
        Ok(Some(ApprovedVersion {
            server: key,
            version,
            digest,
            card: Arc::new(card),
        }))
    }

    async fn mode(&self, tenant: &TenantId, server: &str) -> Result<Mode, ApiError> {
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
        Ok(rec.record.policy.mode_for(server))
    }
}

/// How long the engine keeps a guard scope's cached answers and upstream
/// connection after the scope's first call (a later call opens it anew).
const GUARD_SCOPE_LIFETIME: std::time::Duration = std::time::Duration::from_secs(3600);

/// The resolve engine as the guard's per-call resolver: the same cache,
/// upstream connections, checks and audit events as a resolve session,
/// under the tenant's policy for the server as it is now (the stricter of
/// the route's mode and the tenant's; `resolve_cache: none` bypasses the
/// cache). A guard scope (the route's upstream identity) plays the part of
/// the session.
pub struct EngineResolver(pub pinfold_resolve::ResolveState);

#[async_trait]
impl Resolver for EngineResolver {
    async fn annotations(&self, call: CallToResolve<'_>) -> Option<Annotations> {
        use pinfold_resolve::engine::{SessionCtx, Source};
        let st = &self.0;
        let policy = match st.signatures.policy(call.tenant, call.server).await {
            Ok(p) => p,
            Err(_) => {
                tracing::warn!(server = %call.server, "guard: no policy for a call's resolution; deciding on the worst case");
                return None;
            }
        };
        let headers = call
            .target
            .headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect();
        let ctx = SessionCtx {
            tenant: call.tenant.clone(),
            session: call.scope.to_owned(),
            expires_at: std::time::SystemTime::now() + GUARD_SCOPE_LIFETIME,
            signature: call.signature.clone(),
            mode: call.mode.stricter(policy.mode),
            cache: policy.cache,
            upstream: pinfold_resolve::upstream::UpstreamTarget {
                url: call.target.url.to_string(),
                headers,
                rules: call.target.rules.clone(),
            },
        };
        let resolution = st
            .engine
            .resolve(&ctx, call.name, call.arguments)
            .await
            .ok()?;
        for e in &resolution.events {
            let kind = match e {
                pinfold_resolve::engine::ResolveEvent::StrictRefusal { .. } => "resolve.refused",
                pinfold_resolve::engine::ResolveEvent::DeterminismViolation { .. } => {
                    "resolve.nondeterministic"
                }
            };
            let mut data = serde_json::to_value(e).unwrap_or(serde_json::Value::Null);
            if let Some(o) = data.as_object_mut() {
                o.insert("guard_route".into(), serde_json::json!(call.server));
            }
            let note = pinfold_core::audit::NewAuditEvent::new(
                kind,
                "pinfold-guard",
                pinfold_resolve::state::now(),
                data,
            )
            .about(call.server, call.version);
            if let Err(err) = st.store.record(call.tenant, &note).await {
                tracing::error!(error = %err, kind, "could not record a guard resolution event");
            }
        }
        if !matches!(resolution.source, Source::Cache | Source::Upstream) || !resolution.conformant
        {
            return None;
        }
        let mut errors = pinfold_core::error::ValidationErrors::new();
        let a = Annotations::parse(resolution.tool.get("annotations")?, "", &mut errors);
        errors.is_empty().then_some(a)
    }
}

/// The guard's MCP endpoint over `store`, the registry, `keyring` and the
/// egress path. Its upstream timeout, response limit and probe budget are
/// the resolve service's (`[resolve]`): both are Pinfold's MCP client.
pub fn endpoint_state(
    cfg: &crate::config::Config,
    store: &Store,
    registry: &RegistryState,
    keyring: Arc<Keyring>,
    egress: &Arc<pinfold_egress::Egress>,
    policies: &Arc<PolicyCache>,
    resolve: &pinfold_resolve::ResolveState,
) -> EndpointState {
    let timeout = std::time::Duration::from_millis(cfg.resolve.upstream_timeout_ms);
    EndpointState::new(
        store.guard(),
        Arc::new(RegistryApproved {
            registry: registry.clone(),
            policies: policies.clone(),
        }),
        Arc::new(EngineResolver(resolve.clone())),
        Arc::new(KeyringSealer(keyring)),
        crate::egress_wiring::tenant_egress(egress, store.tenants()),
        GuardConfig {
            upstream_timeout: timeout,
            max_response_bytes: usize::try_from(cfg.resolve.upstream_max_response_bytes)
                .unwrap_or(usize::MAX),
            review_wait: timeout,
            probe_budget: timeout / 2,
            limits: cfg.limits.clone(),
            public_url: (!cfg.public_url.is_empty()).then(|| cfg.public_url.clone()),
            ..GuardConfig::default()
        },
    )
}
