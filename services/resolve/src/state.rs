//! What the resolve service's handlers share, and the traits through which
//! it reaches what other services own (the server implements them: service
//! crates never depend on each other).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use signet_core::Mode;
use signet_core::ids::{TenantId, Timestamp};
use signet_http::problem::ApiError;

use crate::session::{CachePolicy, SessionKey, SessionRow};
use crate::store::SessionStore;

/// Whether a pinned version may still be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Approved or deprecated: its signature is trusted.
    Trusted,
    /// Pending review or rejected: never trusted (the status is given).
    NotTrusted(&'static str),
    /// Revoked: every session pinned to it has ended.
    Revoked,
}

/// A version chosen for a new session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pinned {
    /// Canonical server name.
    pub server: String,
    /// Exact version (`latest` already resolved to the highest approved).
    pub version: String,
    /// Digest of its document.
    pub digest: String,
    /// Whether it may be used.
    pub standing: Standing,
}

/// The tenant policy that applies to one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerPolicy {
    /// Enforcement mode (tenant default or the server's override).
    pub mode: Mode,
    /// Cache policy (the server's `resolve_cache`, default `session`).
    pub cache: CachePolicy,
}

/// Signatures and policies, as the resolve service sees the registry and
/// tenancy. Errors are already problem+json (`server_not_found`,
/// `version_not_found`, `no_trusted_version`, 503 ...).
#[async_trait]
pub trait Signatures: Send + Sync + 'static {
    /// Resolves `server` (any spelling) and `version` (exact or `latest`).
    async fn pin(&self, tenant: &TenantId, server: &str, version: &str)
    -> Result<Pinned, ApiError>;

    /// The current standing of a pinned version. Cheap on a warm cache: it
    /// is asked on every resolve, so that a revocation ends sessions at once.
    async fn standing(
        &self,
        tenant: &TenantId,
        server: &str,
        version: &str,
    ) -> Result<Standing, ApiError>;

    /// The pinned version's server card (immutable).
    async fn document(
        &self,
        tenant: &TenantId,
        server: &str,
        version: &str,
    ) -> Result<Value, ApiError>;

    /// The policy that applies to `server` now.
    async fn policy(&self, tenant: &TenantId, server: &str) -> Result<ServerPolicy, ApiError>;
}

/// Seals upstream headers at rest with the server's encryption key.
pub trait Sealer: Send + Sync + 'static {
    /// Seals `plain`, bound to `tenant` and `context` (the session id), so a
    /// sealed value copied to another row does not open.
    fn seal(&self, tenant: &TenantId, context: &str, plain: &[u8]) -> Result<String, String>;
    /// Opens what [`Sealer::seal`] produced for the same tenant and context.
    fn open(&self, tenant: &TenantId, context: &str, sealed: &str) -> Result<Vec<u8>, String>;
}

/// Limits and defaults of the resolve service.
#[derive(Debug, Clone)]
pub struct ResolveConfig {
    /// Session lifetime when the request names none.
    pub default_ttl: Duration,
    /// Longest session lifetime a request may ask for.
    pub max_ttl: Duration,
}

impl Default for ResolveConfig {
    fn default() -> Self {
        ResolveConfig {
            default_ttl: Duration::from_secs(3600),
            max_ttl: Duration::from_secs(24 * 3600),
        }
    }
}

/// What the resolve routes need.
#[derive(Clone)]
pub struct ResolveState {
    /// Session rows.
    pub store: Arc<dyn SessionStore>,
    /// Signatures and policies.
    pub signatures: Arc<dyn Signatures>,
    /// Seals upstream headers.
    pub sealer: Arc<dyn Sealer>,
    /// Sessions this replica has loaded.
    pub live: Arc<LiveSessions>,
    /// Limits and defaults.
    pub config: Arc<ResolveConfig>,
}

/// A loaded session: the row and its opened upstream headers.
pub struct LiveSession {
    /// The stored row.
    pub row: SessionRow,
    /// Upstream headers, opened (never logged: `Debug` prints names only).
    pub headers: Vec<(String, String)>,
}

impl std::fmt::Debug for LiveSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSession")
            .field("id", &self.row.id)
            .field("server", &self.row.server)
            .field("version", &self.row.version)
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// The sessions this replica has loaded, by (tenant, id). Rows never
/// change once written, so a copy stays right until the session is deleted
/// (evicted here at once, and on PostgreSQL on every replica through
/// `NOTIFY`), expires (checked on every use) or its version is revoked
/// (checked on every use through [`Signatures::standing`]). A copy lives
/// at most 30 s, so a lost notification cannot keep a closed session alive
/// on another replica for longer.
pub struct LiveSessions {
    cache: moka::sync::Cache<SessionKey, Arc<LiveSession>>,
}

impl Default for LiveSessions {
    fn default() -> Self {
        LiveSessions {
            cache: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(Duration::from_secs(30))
                .build(),
        }
    }
}

impl LiveSessions {
    /// A loaded session.
    pub fn get(&self, tenant: &TenantId, id: &str) -> Option<Arc<LiveSession>> {
        self.cache.get(&(tenant.clone(), id.to_owned()))
    }

    /// Remembers a loaded session.
    pub fn put(&self, tenant: &TenantId, live: Arc<LiveSession>) {
        self.cache
            .insert((tenant.clone(), live.row.id.clone()), live);
    }

    /// Forgets a session.
    pub fn evict(&self, tenant: &TenantId, id: &str) {
        self.cache.invalidate(&(tenant.clone(), id.to_owned()));
    }

    /// Forgets everything (notifications may have been missed).
    pub fn clear(&self) {
        self.cache.invalidate_all();
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

impl ResolveState {
    /// Drops everything this replica holds for a session.
    pub fn end_session(&self, tenant: &TenantId, id: &str) {
        self.live.evict(tenant, id);
    }
}
