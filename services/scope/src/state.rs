//! What the scope service's handlers share, and the traits through which it
//! reaches what the server owns.

use std::sync::Arc;

use async_trait::async_trait;
use pinfold_core::ids::{TenantId, Timestamp};
use pinfold_http::TenantScope;
use pinfold_http::problem::{ApiError, FieldError};
use serde_json::Value;

use crate::config::ScopeConfig;
use crate::oauth::Outbound;
use crate::providers::Providers;
use crate::store::ScopeStore;

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

/// What a published version's card says about where the server runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRemotes {
    /// Canonical server name.
    pub server: String,
    /// Exact version (`latest` resolved).
    pub version: String,
    /// Whether the version is approved (or deprecated, which keeps it
    /// trusted): only such a card names a grant's resource.
    pub trusted: bool,
    /// The distinct `url`s of the card's `streamable-http` remotes, in the
    /// card's order.
    pub streamable_http: Vec<String>,
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

    /// The remotes the card of `server` (any spelling) at `version` (exact
    /// or `latest`) lists, and whether that version is trusted.
    async fn remotes(
        &self,
        tenant: &TenantId,
        server: &str,
        version: &str,
    ) -> Result<VersionRemotes, ApiError>;
}

/// What a resolve session answered for the calls of a plan.
#[derive(Debug, Clone)]
pub struct SessionResolved {
    /// The session's pinned server (canonical name).
    pub server: String,
    /// The session's pinned exact version.
    pub version: String,
    /// Per call, in order: the tool as the resolve cache served it (the
    /// upstream's resolution, or the declared worst case on `static` and
    /// `fallback`), or what is wrong with the call (pointers relative to
    /// the call: `/name`, `/arguments/...`).
    pub tools: Vec<Result<Arc<Value>, Vec<FieldError>>>,
}

/// Resolve sessions, as the scope service plans through them. Implemented
/// by the server over the resolve service when both run in one process.
///
/// SEP-1862 ("Dynamic Security Schemes"): a resolved tool may narrow its
/// `securitySchemes` to what these arguments need, so a plan through a
/// session uses the resolved tools rather than the declared worst case.
#[async_trait]
pub trait SessionTools: Send + Sync + 'static {
    /// Resolves `calls` (name, arguments) within `session` for the caller
    /// of `scope` (its tenant and its token's `iss` + `sub`). Another
    /// caller's or an unknown session is 404 `session_not_found`; an
    /// expired one 410.
    async fn resolve(
        &self,
        scope: &TenantScope,
        session: &str,
        calls: &[(String, Value)],
    ) -> Result<SessionResolved, ApiError>;
}

/// Seals secrets at rest with the server's key (AES-256-GCM), bound to the
/// tenant and a context within it, so a sealed value copied to another row
/// does not open.
pub trait Sealer: Send + Sync + 'static {
    /// Seals `plain` for `tenant` and `context`.
    fn seal(&self, tenant: &TenantId, context: &str, plain: &[u8]) -> Result<String, String>;
    /// Opens what [`Sealer::seal`] produced for the same tenant and context.
    fn open(&self, tenant: &TenantId, context: &str, sealed: &str) -> Result<Vec<u8>, String>;
}

/// The context a provider's client secret is sealed for.
pub fn secret_context(provider: &str) -> String {
    format!("provider:{provider}")
}

/// The context a pending grant's PKCE verifier is sealed for.
pub fn verifier_context(grant_id: &str) -> String {
    format!("grant:{grant_id}")
}

/// What the scope routes need.
#[derive(Clone)]
pub struct ScopeState {
    /// Published signatures.
    pub signatures: Arc<dyn Signatures>,
    /// Provider profiles as the planner reads them (over `store`).
    pub providers: Arc<dyn Providers>,
    /// Providers, grants, states.
    pub store: Arc<dyn ScopeStore>,
    /// Seals client secrets and PKCE verifiers.
    pub sealer: Arc<dyn Sealer>,
    /// The egress path and each tenant's rules: every request to an
    /// authorization server goes out through it.
    pub egress: pinfold_http::egress::TenantEgress,
    /// Limits.
    pub config: Arc<ScopeConfig>,
    /// Resolve sessions, when the resolve service runs in this process
    /// (`None`: plans through a session answer 422).
    pub sessions: Option<Arc<dyn SessionTools>>,
}

impl ScopeState {
    /// A state over `store` and `sealer`, reaching authorization servers
    /// through `egress`.
    pub fn new(
        signatures: Arc<dyn Signatures>,
        providers: Arc<dyn Providers>,
        store: Arc<dyn ScopeStore>,
        sealer: Arc<dyn Sealer>,
        egress: pinfold_http::egress::TenantEgress,
        config: ScopeConfig,
    ) -> Self {
        ScopeState {
            signatures,
            providers,
            store,
            sealer,
            egress,
            config: Arc::new(config),
            sessions: None,
        }
    }

    /// The way out for `tenant`'s requests to authorization servers.
    pub async fn outbound(&self, tenant: &TenantId) -> Result<Outbound, ApiError> {
        Ok(Outbound {
            egress: self.egress.egress.clone(),
            rules: self.egress.rules(tenant).await?,
            timeout: self.config.http_timeout,
            max: self.config.max_response_bytes,
        })
    }

    /// The same state, planning through `sessions`.
    pub fn with_sessions(mut self, sessions: Arc<dyn SessionTools>) -> Self {
        self.sessions = Some(sessions);
        self
    }
}

/// Now, in milliseconds since the epoch.
pub fn now() -> Timestamp {
    Timestamp::from_millis(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0),
    )
}
