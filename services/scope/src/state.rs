//! What the scope service's handlers share, and the traits through which
//! it reaches what other services own (the server implements them).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use signet_core::ids::TenantId;
use signet_http::problem::ApiError;

use crate::providers::Providers;

/// The tools of one published version.
#[derive(Debug, Clone)]
pub struct VersionTools {
    /// Canonical server name.
    pub server: String,
    /// Exact version (`latest` resolved).
    pub version: String,
    /// The signature's tool objects as published (with `securitySchemes`
    /// and `_meta`).
    pub tools: Arc<Vec<Value>>,
}

/// Published signatures, as the scope service reads them from the
/// registry. Errors are already problem+json (`server_not_found`,
/// `version_not_found`, `no_trusted_version`).
#[async_trait]
pub trait Signatures: Send + Sync + 'static {
    /// The tools of `server` (any spelling) at `version` (exact or
    /// `latest`).
    async fn tools(
        &self,
        tenant: &TenantId,
        server: &str,
        version: &str,
    ) -> Result<VersionTools, ApiError>;
}

/// The scope service's state.
#[derive(Clone)]
pub struct ScopeState {
    /// Published signatures.
    pub signatures: Arc<dyn Signatures>,
    /// Provider profiles.
    pub providers: Arc<dyn Providers>,
}
