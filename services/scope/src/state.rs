//! What the scope service's handlers share, and the traits through which it
//! reaches what the server owns.

use std::sync::Arc;
use std::time::Duration;

use signet_core::ids::{TenantId, Timestamp};

use crate::store::ScopeStore;

/// Seals secrets at rest with the server's key (AES-256-GCM), bound to the
/// tenant and a context within it, so a sealed value copied to another row
/// does not open.
pub trait Sealer: Send + Sync + 'static {
    /// Seals `plain` for `tenant` and `context`.
    fn seal(&self, tenant: &TenantId, context: &str, plain: &[u8]) -> Result<String, String>;
    /// Opens what [`Sealer::seal`] produced for the same tenant and context.
    fn open(&self, tenant: &TenantId, context: &str, sealed: &str) -> Result<Vec<u8>, String>;
}

/// Which URLs Signet agrees to contact for a provider (discovery, the token
/// endpoint): the server's SSRF policy (`https://`, plain `http://` only to
/// loopback, never credentials in the URL).
pub type UrlPolicy = Arc<dyn Fn(&str) -> Result<url::Url, String> + Send + Sync>;

/// Limits of the scope service.
#[derive(Debug, Clone)]
pub struct ScopeConfig {
    /// How long a grant's `state` is accepted.
    pub state_ttl: Duration,
    /// Timeout of one request to an authorization server.
    pub http_timeout: Duration,
    /// Largest metadata or token response read.
    pub max_response_bytes: usize,
}

impl Default for ScopeConfig {
    fn default() -> Self {
        ScopeConfig {
            state_ttl: Duration::from_secs(600),
            http_timeout: Duration::from_secs(10),
            max_response_bytes: 256 * 1024,
        }
    }
}

/// What the scope routes need.
#[derive(Clone)]
pub struct ScopeState {
    /// Providers, grants, states.
    pub store: Arc<dyn ScopeStore>,
    /// Seals client secrets and PKCE verifiers.
    pub sealer: Arc<dyn Sealer>,
    /// The SSRF policy for provider URLs.
    pub url_policy: UrlPolicy,
    /// The HTTP client towards authorization servers (it follows no
    /// redirect).
    pub http: reqwest::Client,
    /// Limits.
    pub config: Arc<ScopeConfig>,
}

impl ScopeState {
    /// A state over `store` and `sealer`, with the HTTP client built here.
    pub fn new(
        store: Arc<dyn ScopeStore>,
        sealer: Arc<dyn Sealer>,
        url_policy: UrlPolicy,
        config: ScopeConfig,
    ) -> Result<Self, String> {
        let http = crate::oauth::http_client(&config)?;
        Ok(ScopeState {
            store,
            sealer,
            url_policy,
            http,
            config: Arc::new(config),
        })
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
