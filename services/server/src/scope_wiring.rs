//! Wiring of the scope service: published tools over the registry,
//! provider profiles over the scope store (a preset's name with no stored
//! profile serves the bare preset), secret sealing over the server's
//! keyring (the same AES-256-GCM key, bound to tenant and provider or
//! grant), the egress path under each tenant's rules for every request to
//! an authorization server ([`crate::egress_wiring`]), and plans through
//! resolve sessions over the resolve service ([`ResolveSessions`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use axum::http::StatusCode;
use pinfold_core::ids::TenantId;
use pinfold_core::scope::Preset;
use pinfold_http::TenantScope;
use pinfold_http::problem::ApiError;
use pinfold_registry::RegistryState;
use pinfold_registry::keys::Keyring;
use pinfold_scope::{
    ProviderView, Providers, ScopeConfig, ScopeState, ScopeStore, SessionResolved, SessionTools,
    Signatures, VersionRemotes, VersionTools,
};
use serde_json::Value;

use crate::sealer::KeyringSealer;
use crate::store::Store;

/// The scope service's view of the registry.
pub struct RegistryTools(pub RegistryState);

#[async_trait]
impl Signatures for RegistryTools {
    async fn tools(
        &self,
        tenant: &TenantId,
        server: &str,
        version: &str,
    ) -> Result<VersionTools, ApiError> {
        let key = pinfold_registry::error::server_key(server)?;
        let key = key.canonical().to_owned();
        let exact =
            pinfold_registry::service::resolve_version(&self.0, tenant, &key, version).await?;
        let stored = pinfold_registry::service::load(&self.0, tenant, &key, &exact).await?;
        let mut doc: Value = serde_json::from_str(&stored.document).map_err(|e| {
            tracing::error!(error = %e, "stored document is not JSON");
            ApiError::internal()
        })?;
        let tools = match doc
            .get_mut("signature")
            .and_then(|s| s.get_mut("tools"))
            .map(Value::take)
        {
            Some(Value::Array(a)) => a,
            _ => Vec::new(),
        };
        Ok(VersionTools {
            server: key,
            version: exact,
            tools: Arc::new(tools),
        })
    }

    async fn remotes(
        &self,
        tenant: &TenantId,
        server: &str,
        version: &str,
    ) -> Result<VersionRemotes, ApiError> {
        let key = pinfold_registry::error::server_key(server)?;
        let key = key.canonical().to_owned();
        let exact =
            pinfold_registry::service::resolve_version(&self.0, tenant, &key, version).await?;
        let idx = pinfold_registry::service::server_index(&self.0, tenant, &key).await?;
        let trusted = idx.entries.get(&exact).is_some_and(|e| {
            matches!(
                e.status,
                pinfold_registry::model::Status::Approved
                    | pinfold_registry::model::Status::Deprecated
            )
        });
        let stored = pinfold_registry::service::load(&self.0, tenant, &key, &exact).await?;
        let doc: Value = serde_json::from_str(&stored.document).map_err(|e| {
            tracing::error!(error = %e, "stored document is not JSON");
            ApiError::internal()
        })?;
        let mut streamable_http: Vec<String> = Vec::new();
        for r in doc
            .get("remotes")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            if r.get("type").and_then(Value::as_str) == Some("streamable-http")
                && let Some(url) = r.get("url").and_then(Value::as_str)
                && !streamable_http.iter().any(|u| u == url)
            {
                streamable_http.push(url.to_owned());
            }
        }
        Ok(VersionRemotes {
            server: key,
            version: exact,
            trusted,
            streamable_http,
        })
    }
}

/// Resolve sessions for scope plans, over the resolve service of this
/// process (wired only when that service is mounted).
pub struct ResolveSessions(pub pinfold_resolve::ResolveState);

#[async_trait]
impl SessionTools for ResolveSessions {
    async fn resolve(
        &self,
        scope: &TenantScope,
        session: &str,
        calls: &[(String, Value)],
    ) -> Result<SessionResolved, ApiError> {
        let r = pinfold_resolve::routes::resolve_for_plan(&self.0, scope, session, calls).await?;
        Ok(SessionResolved {
            server: r.server,
            version: r.version,
            tools: r.tools,
        })
    }
}

/// Provider profiles as the planner reads them: the stored profile (its
/// preset extended by its own hierarchy), or, for a preset's name with no
/// stored profile, the bare preset.
pub struct StoreProviders(pub Arc<dyn ScopeStore>);

fn provider_not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "provider_not_found",
        "Provider not found",
    )
    .detail("no such provider profile in this tenant")
}

#[async_trait]
impl Providers for StoreProviders {
    async fn provider(&self, tenant: &TenantId, name: &str) -> Result<ProviderView, ApiError> {
        if !pinfold_scope::model::is_provider_name(name) {
            return Err(provider_not_found());
        }
        let row = self
            .0
            .provider(tenant, name)
            .await
            .map_err(pinfold_scope::error::store_error)?;
        match row {
            Some(row) => {
                let hierarchy = row.profile.hierarchy().map_err(|e| {
                    tracing::error!(error = %e, provider = name, "a stored hierarchy does not build");
                    ApiError::internal()
                })?;
                Ok(ProviderView {
                    name: row.name,
                    hierarchy: Arc::new(hierarchy),
                    default_scopes: row.profile.default_scopes,
                    resources: row.profile.resources,
                })
            }
            None => {
                let preset = Preset::from_name(name).ok_or_else(provider_not_found)?;
                Ok(ProviderView {
                    name: name.to_owned(),
                    hierarchy: Arc::new(preset.hierarchy()),
                    default_scopes: Vec::new(),
                    resources: BTreeMap::new(),
                })
            }
        }
    }

    async fn providers_for_server(
        &self,
        tenant: &TenantId,
        server: &str,
    ) -> Result<Vec<String>, ApiError> {
        let rows = self
            .0
            .providers(tenant, 1000)
            .await
            .map_err(pinfold_scope::error::store_error)?;
        Ok(rows
            .into_iter()
            .filter(|r| r.profile.resources.contains_key(server))
            .map(|r| r.name)
            .collect())
    }
}

/// The scope service's state over `store` and the registry, sealing with
/// `keyring`.
pub fn scope_state(
    store: &Store,
    registry: &RegistryState,
    keyring: Arc<Keyring>,
    egress: &Arc<pinfold_egress::Egress>,
) -> ScopeState {
    let scope = store.scope();
    ScopeState::new(
        Arc::new(RegistryTools(registry.clone())),
        Arc::new(StoreProviders(scope.clone())),
        scope,
        Arc::new(KeyringSealer(keyring)),
        crate::egress_wiring::tenant_egress(egress, store.tenants()),
        ScopeConfig::default(),
    )
}

/// Deletes expired single-use grant states in the background, a batch at a
/// time, every `every` (a state lives 10 minutes; an expired one is refused
/// at exchange whether or not it has been purged yet).
pub fn spawn_state_purge(store: &Store, every: std::time::Duration) -> tokio::task::JoinHandle<()> {
    let scope = store.scope();
    crate::purge::spawn("expired grant states", every, move |limit| {
        let scope = scope.clone();
        async move {
            scope
                .purge_expired_states(pinfold_scope::state::now(), limit)
                .await
        }
    })
}
