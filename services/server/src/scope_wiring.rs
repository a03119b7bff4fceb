//! Wiring of the scope service: published tools over the registry, and
//! provider profiles. Until the profile store lands, every tenant has one
//! provider per built-in preset, named after it (`github`, `sentry`, ...),
//! with the preset's hierarchy, no default scopes and no resources.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use axum::http::StatusCode;
use serde_json::Value;
use signet_core::ids::TenantId;
use signet_core::scope::Preset;
use signet_http::problem::ApiError;
use signet_registry::RegistryState;
use signet_scope::{ProviderView, Providers, ScopeState, Signatures, VersionTools};

use crate::app::AppContext;

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
        let key = signet_registry::error::server_key(server)?;
        let key = key.canonical().to_owned();
        let exact =
            signet_registry::service::resolve_version(&self.0, tenant, &key, version).await?;
        let stored = signet_registry::service::load(&self.0, tenant, &key, &exact).await?;
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
}

/// Provider profiles before their store exists: the built-in presets.
pub struct PresetProviders;

fn provider_not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "provider_not_found",
        "Provider not found",
    )
    .detail("no such provider profile in this tenant")
}

#[async_trait]
impl Providers for PresetProviders {
    async fn provider(&self, _tenant: &TenantId, name: &str) -> Result<ProviderView, ApiError> {
        let preset = Preset::from_name(name).ok_or_else(provider_not_found)?;
        Ok(ProviderView {
            name: name.to_owned(),
            hierarchy: Arc::new(preset.hierarchy()),
            default_scopes: Vec::new(),
            resources: BTreeMap::new(),
        })
    }

    async fn providers_for_server(
        &self,
        _tenant: &TenantId,
        _server: &str,
    ) -> Result<Vec<String>, ApiError> {
        Ok(Vec::new())
    }
}

/// The scope service's state over the application's parts.
pub fn scope_state(ctx: &AppContext) -> ScopeState {
    ScopeState {
        signatures: Arc::new(RegistryTools(ctx.registry.clone())),
        providers: Arc::new(PresetProviders),
    }
}
