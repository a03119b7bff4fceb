//! What the scope service needs to know about OAuth providers, as a trait
//! the server implements over the provider-profile store (the planner
//! needs a provider's hierarchy, defaults and resources; it never reads
//! profiles itself, and never sees a client secret).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use pinfold_core::ids::TenantId;
use pinfold_core::scope::Hierarchy;
use pinfold_http::problem::ApiError;

/// A provider profile as the planner sees it.
#[derive(Debug, Clone)]
pub struct ProviderView {
    /// The provider's name (path segment of its profile).
    pub name: String,
    /// Its hierarchy: the preset extended by the profile's own `hierarchy`,
    /// validated (built once per profile revision, shared).
    pub hierarchy: Arc<Hierarchy>,
    /// `default_scopes`: what a tool without `securitySchemes` needs.
    pub default_scopes: Vec<String>,
    /// `resources`: server name → canonical MCP server URI (RFC 8707).
    pub resources: BTreeMap<String, String>,
}

/// Provider profiles, as the scope service's planner reads them.
#[async_trait]
pub trait Providers: Send + Sync + 'static {
    /// The provider `name` of `tenant`; 404 `provider_not_found` when there
    /// is none.
    async fn provider(&self, tenant: &TenantId, name: &str) -> Result<ProviderView, ApiError>;

    /// The names of `tenant`'s providers whose `resources` list `server`
    /// (its canonical name), sorted. A plan without `provider` uses the one
    /// provider listed; none or several is a client error.
    async fn providers_for_server(
        &self,
        tenant: &TenantId,
        server: &str,
    ) -> Result<Vec<String>, ApiError>;
}
