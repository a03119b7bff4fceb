//! What the guard's routes need from the rest of the server, as traits the
//! server implements (the guard depends on no other service): the servers
//! of a tenant's registry and their approved cards, and the sealing of
//! upstream headers with the server's keyring.

use std::sync::Arc;

use async_trait::async_trait;
use pinfold_core::ids::TenantId;
use pinfold_http::problem::ApiError;

use crate::model::VersionPin;
use crate::store::GuardStore;

/// A server of the tenant's registry as a route sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedServer {
    /// The server's canonical name (ASCII lowercase), the route's key.
    pub server: String,
    /// The `url`s of the `streamable-http` remotes (distinct, in the card's
    /// order) of the approved card the pin selects (`latest`: the highest
    /// approved version); `None` when the pin selects no approved version.
    pub approved_remotes: Option<Vec<String>>,
}

/// The tenant's registry, as the guard's routes read it. Errors are
/// already problem+json (`server_not_found`, `version_not_found`).
#[async_trait]
pub trait Servers: Send + Sync + 'static {
    /// The canonical name of the server `server` (any spelling) of
    /// `tenant`: `404 server_not_found` when the tenant has no such server.
    async fn canonical(&self, tenant: &TenantId, server: &str) -> Result<String, ApiError>;

    /// The server `server` (any spelling) of `tenant` under `version`:
    /// `404 server_not_found` when the tenant has no such server, `404
    /// version_not_found` when an exact pin names a version it does not
    /// have.
    async fn pinned(
        &self,
        tenant: &TenantId,
        server: &str,
        version: &VersionPin,
    ) -> Result<PinnedServer, ApiError>;
}

/// Seals upstream headers at rest with the server's keyring.
pub trait Sealer: Send + Sync + 'static {
    /// Seals `plain`, bound to `tenant` and `context`
    /// ([`crate::model::headers_context`]), so a sealed value copied to
    /// another row does not open.
    fn seal(&self, tenant: &TenantId, context: &str, plain: &[u8]) -> Result<String, String>;
    /// Opens what [`Sealer::seal`] produced for the same tenant and context.
    fn open(&self, tenant: &TenantId, context: &str, sealed: &str) -> Result<Vec<u8>, String>;
}

/// What the guard's routes need.
#[derive(Clone)]
pub struct GuardState {
    /// Routes and drifts.
    pub store: Arc<dyn GuardStore>,
    /// The tenant's registry.
    pub servers: Arc<dyn Servers>,
    /// The keyring upstream headers are sealed with.
    pub sealer: Arc<dyn Sealer>,
    /// The egress path and each tenant's rules: a route's upstream is
    /// judged by them when it is written.
    pub egress: pinfold_http::egress::TenantEgress,
    /// This replica's MCP endpoint, when it serves one: told of a route
    /// written here at once, so its next request is served under the route
    /// as written (other replicas compare within their route check).
    pub on_write: Option<Arc<dyn RouteWritten>>,
}

/// What is told of a route written (put or deleted) through this replica.
pub trait RouteWritten: Send + Sync + 'static {
    /// `tenant`'s route for `server` (canonical name) was written.
    fn route_written(&self, tenant: &TenantId, server: &str);
}
