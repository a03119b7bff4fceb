//! What the resolve service's handlers share, and the traits through which
//! it reaches what other services own (the server implements them: service
//! crates never depend on each other).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pinfold_core::Mode;
use pinfold_core::ids::{TenantId, Timestamp};
use pinfold_http::problem::ApiError;
use serde_json::Value;

use crate::engine::{Engine, SessionCtx};
use crate::session::{CachePolicy, SessionRow};
use crate::store::SessionStore;
use pinfold_resolve_check::prepared::PreparedSignature;

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

/// The context a session's upstream headers are sealed for: the session id.
pub fn headers_context(session_id: &str) -> &str {
    session_id
}

/// Seals upstream headers at rest with the server's encryption key.
pub trait Sealer: Send + Sync + 'static {
    /// Seals `plain`, bound to `tenant` and `context` ([`headers_context`]),
    /// so a sealed value copied to another row does not open.
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
    /// Limits under which stored signatures are read.
    pub limits: pinfold_core::card::Limits,
}

impl Default for ResolveConfig {
    fn default() -> Self {
        ResolveConfig {
            default_ttl: Duration::from_secs(3600),
            max_ttl: Duration::from_secs(24 * 3600),
            limits: pinfold_core::card::Limits::default(),
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
    /// The resolve engine: cache, upstream connections, checks.
    pub engine: Arc<Engine>,
    /// The egress path and each tenant's rules: session upstreams are
    /// checked against them when a session opens, and every connection is
    /// made under them.
    pub egress: pinfold_http::egress::TenantEgress,
    /// Prepared signatures by digest (a digest names immutable content).
    /// Behind an `Arc` like every other member: axum clones the state for
    /// every request, and cloning a moka cache itself costs several atomic
    /// counters and channel handles.
    pub prepared: Arc<moka::future::Cache<String, Arc<PreparedSignature>>>,
}

/// A loaded session: the row, its opened upstream headers, and (once a
/// resolve needed it) the engine's context.
pub struct LiveSession {
    /// The tenant.
    pub tenant: TenantId,
    /// The stored row.
    pub row: SessionRow,
    /// Upstream headers, opened (never logged: `Debug` prints names only).
    pub headers: Vec<(String, String)>,
    /// The engine's view of the session, built on first use.
    pub ctx: tokio::sync::OnceCell<Arc<SessionCtx>>,
}

impl LiveSession {
    /// A loaded session without its engine context yet.
    pub fn new(tenant: TenantId, row: SessionRow, headers: Vec<(String, String)>) -> Self {
        LiveSession {
            tenant,
            row,
            headers,
            ctx: tokio::sync::OnceCell::new(),
        }
    }
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
///
/// Copies are keyed by a keyed hash of (tenant, id), so a lookup copies
/// neither; a hit is checked against the copy's own tenant and id (a hash
/// collision is a miss).
pub struct LiveSessions {
    cache: pinfold_http::hot::HotCache<Arc<LiveSession>>,
    hasher: pinfold_http::hot::KeyHasher,
}

impl Default for LiveSessions {
    fn default() -> Self {
        LiveSessions {
            cache: pinfold_http::hot::HotCache::new(100_000, Duration::from_secs(30)),
            hasher: pinfold_http::hot::KeyHasher::default(),
        }
    }
}

impl LiveSessions {
    fn key(&self, tenant: &TenantId, id: &str) -> u64 {
        use std::hash::BuildHasher as _;
        self.hasher.hash_one((tenant.as_str(), id))
    }

    /// A loaded session.
    pub fn get(&self, tenant: &TenantId, id: &str) -> Option<Arc<LiveSession>> {
        self.cache
            .get(self.key(tenant, id))
            .filter(|l| l.tenant == *tenant && l.row.id == id)
    }

    /// Remembers a loaded session.
    pub fn put(&self, tenant: &TenantId, live: Arc<LiveSession>) {
        self.cache.insert(self.key(tenant, &live.row.id), live, 1);
    }

    /// Forgets a session.
    pub fn evict(&self, tenant: &TenantId, id: &str) {
        self.cache.invalidate(self.key(tenant, id));
    }

    /// Forgets everything (notifications may have been missed).
    pub fn clear(&self) {
        self.cache.clear();
    }
}

/// A cache of prepared signatures holding at most `capacity_bytes` of them
/// (each weighs [`PreparedSignature::heap_bytes`]: its worst cases, the
/// declared tools its checks run against, its compiled validators), each
/// dropped after an hour unused. A version too large for the cache is
/// prepared for the sessions that need it and not kept.
pub fn prepared_cache(
    capacity_bytes: u64,
) -> Arc<moka::future::Cache<String, Arc<PreparedSignature>>> {
    Arc::new(
        moka::future::Cache::builder()
            .max_capacity(capacity_bytes)
            .weigher(|digest: &String, p: &Arc<PreparedSignature>| {
                u32::try_from(digest.len() + p.heap_bytes()).unwrap_or(u32::MAX)
            })
            .time_to_idle(Duration::from_secs(3600))
            .build(),
    )
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
    /// Drops everything this replica holds for a session: the loaded row,
    /// cached answers, the upstream connection.
    pub fn end_session(&self, tenant: &TenantId, id: &str) {
        self.live.evict(tenant, id);
        self.engine.end_session(tenant, id);
    }

    /// Drops every loaded session (notifications may have been missed).
    /// Cached answers stay: they belong to sessions, and a session that
    /// ended is refused when it is loaded again, before any answer is read.
    pub fn forget_sessions(&self) {
        self.live.clear();
    }

    /// The pinned version's signature, prepared once per digest on the CPU
    /// pool (`pinfold_http::cpu::offload`): reading the card and compiling
    /// every tool's input schema is not for an async worker. The engine
    /// validates a call's large arguments on the same pool, small ones on
    /// the caller's task.
    pub async fn prepared(
        &self,
        tenant: &TenantId,
        server: &str,
        version: &str,
        digest: &str,
    ) -> Result<Arc<PreparedSignature>, ApiError> {
        if let Some(p) = self.prepared.get(digest).await {
            return Ok(p);
        }
        let doc = self.signatures.document(tenant, server, version).await?;
        let limits = self.config.limits.clone();
        let prepared = pinfold_http::cpu::offload(move || PreparedSignature::new(&doc, &limits))
            .await?
            .map_err(|e| {
                tracing::error!(?e, "a stored signature does not prepare");
                ApiError::internal()
            })?;
        let prepared = Arc::new(prepared);
        if prepared.digest() != digest {
            tracing::error!(
                expected = digest,
                found = prepared.digest(),
                "stored document digest differs from the session's"
            );
            return Err(ApiError::internal());
        }
        self.prepared
            .insert(digest.to_owned(), prepared.clone())
            .await;
        Ok(prepared)
    }
}
