//! The resolve engine: validate, look up, fetch once, check, serve.
//!
//! For one call `(session, tool, arguments)`:
//!
//! 1. The tool must be declared by the session's signature version
//!    ([`ResolveError::ToolNotDeclared`]) and the arguments must satisfy its
//!    `inputSchema` ([`ResolveError::InvalidArguments`], with pointers),
//!    checked here, on the caller's task, by the validator compiled when
//!    the version was prepared.
//! 2. A tool that is neither resolvable nor `dynamicAnnotations` is
//!    answered with its worst case (`source: static`); no upstream call.
//! 3. Under [`CachePolicy::Session`] a cached answer is served
//!    (`source: cache`), unless this hit is drawn for a re-check
//!    ([`EngineConfig::recheck_rate`]).
//! 4. Otherwise one upstream call is made however many identical calls
//!    are waiting (an in-flight map; waiters count as coalesced). The
//!    answer is checked by core containment against the declared tool,
//!    remembered in the session's fingerprints, and cached (session
//!    policy only). Errors are never cached.
//! 5. The answer is served under the session's mode: `permissive` and
//!    `advisory` serve it flagged (`conformant: false`, violations);
//!    `strict` refuses a non-conforming answer, serves the worst case with
//!    `source: fallback`, reason `refused_strict`, and the caller records a
//!    [`ResolveEvent::StrictRefusal`]. Upstream errors, JSON-RPC errors,
//!    timeouts and malformed answers serve the worst case with
//!    `source: fallback` and a reason (SEP-1862 §Client Requirements: fall
//!    back to the `tools/list` definition).
//!
//! **Determinism.** SEP-1862 §Behavior Requirements and the
//! dynamic-annotations seed require the same answer for the same (name,
//! arguments) within a session. Each session keeps a small map of key
//! fingerprint → answer fingerprint that outlives the cached answer; an
//! upstream answer that differs from the remembered one (after an
//! eviction, under `resolve_cache: "none"`, or on a sampled re-check) is a
//! [`ResolveEvent::DeterminismViolation`] and a metric. A
//! `notifications/tools/list_changed` from the upstream clears the map (the
//! tools may legitimately change) along with the session's entries.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use futures::FutureExt as _;
use futures::future::{BoxFuture, Shared, WeakShared};
use pinfold_core::Mode;
use pinfold_core::card::Limits;
use pinfold_core::digest::canonical_bytes;
use pinfold_core::error::ValidationErrors;
use pinfold_core::ids::TenantId;
use serde_json::Value;
use tokio::sync::watch;

use crate::answer::{Fetched, HitBody};
use crate::cache::{Generation, ResolveCache, weigh};
pub use crate::resolution::{Resolution, ResolveEvent, Source};
pub use crate::session::CachePolicy;
use crate::stats::{FallbackReason, Stats, StatsSnapshot};
use crate::upstream::{Connection, FetchError, ListChangedHook, Pool, UpstreamTarget};
use pinfold_resolve_check::key::{CacheKey, fingerprint, session_prefix};
use pinfold_resolve_check::prepared::{PreparedSignature, PreparedTool};

/// Everything the engine needs to know about a session, per call.
#[derive(Debug, Clone)]
pub struct SessionCtx {
    /// The tenant.
    pub tenant: TenantId,
    /// The Pinfold session id.
    pub session: String,
    /// When the session expires (cache entries expire with it).
    pub expires_at: SystemTime,
    /// The pinned signature version, prepared.
    pub signature: Arc<PreparedSignature>,
    /// The tenant's enforcement mode.
    pub mode: Mode,
    /// The server's cache policy.
    pub cache: CachePolicy,
    /// The upstream to ask.
    pub upstream: UpstreamTarget,
}

/// A call that cannot be resolved at all.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResolveError {
    /// The signature does not declare this tool (HTTP 404).
    #[error("tool {0:?} is not declared by the session's signature")]
    ToolNotDeclared(String),
    /// The arguments do not satisfy the declared `inputSchema` (HTTP 422).
    #[error("arguments do not match the tool's inputSchema: {0}")]
    InvalidArguments(ValidationErrors),
}

/// How a session's cached answers learn that they are out of date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalidation {
    /// The upstream announces tool list changes: answers live as long as
    /// the session, or until a change.
    ListChanged,
    /// The upstream cannot announce a change: answers live at most this
    /// long.
    EntryTtl(Duration),
}

impl Invalidation {
    fn code(self) -> u8 {
        match self {
            Invalidation::ListChanged => 1,
            Invalidation::EntryTtl(_) => 2,
        }
    }
}

/// Engine settings.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Cache capacity in bytes (default 256 MiB).
    pub capacity_bytes: u64,
    /// Bytes one tenant may hold (default a quarter of the capacity).
    pub tenant_share_bytes: u64,
    /// Total time for one upstream exchange, connecting and initializing
    /// included (default 5 s).
    pub upstream_timeout: Duration,
    /// The server's egress path (its connect timeout applies; default: an
    /// egress path of its own with the default settings).
    pub egress: Arc<pinfold_egress::Egress>,
    /// Largest upstream JSON answer, and largest server-sent event of a
    /// streamed one, in bytes (default 1 MiB).
    pub max_response_bytes: usize,
    /// Fraction of cache hits re-fetched to check determinism (default 0).
    pub recheck_rate: f64,
    /// Key fingerprints remembered per session (default 256); beyond it
    /// new keys are not remembered.
    pub fingerprints_per_session: usize,
    /// Sessions with state (upstream connection, fingerprints) per
    /// replica (default 16,384). When full, the least recently used state
    /// is dropped (its session goes on with a new state on its next call;
    /// a call running on the dropped state finishes on its connection).
    pub max_sessions: u64,
    /// Limits under which upstream answers are parsed.
    pub limits: Limits,
    /// Longest life of a cached answer whose upstream offers no way to
    /// announce a tool list change (no `tools.listChanged` on 2025-11-25, a
    /// refused or ended `subscriptions/listen` on 2026-07-28); default 5
    /// minutes. Answers of upstreams that can announce one live as long as
    /// their session.
    pub unwatched_entry_ttl: Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        let capacity = 256 * 1024 * 1024;
        Self {
            capacity_bytes: capacity,
            tenant_share_bytes: capacity / 4,
            upstream_timeout: Duration::from_secs(5),
            egress: pinfold_egress::Egress::new(pinfold_egress::EgressConfig::default()),
            max_response_bytes: 1024 * 1024,
            recheck_rate: 0.0,
            fingerprints_per_session: 256,
            max_sessions: 16_384,
            limits: Limits::default(),
            unwatched_entry_ttl: Duration::from_secs(300),
        }
    }
}

/// What the one upstream call of a key produced, shared with its waiters.
#[derive(Debug)]
struct Done {
    fetched: Arc<Fetched>,
    /// (previous, current) answer fingerprints when they differ.
    determinism: Option<(u128, u128)>,
    /// Whether a caller has taken the events to report.
    reported: AtomicBool,
}

type Outcome = Arc<Result<Done, FetchError>>;

/// The one upstream call of a key, shared by every caller waiting on it.
/// Whichever waiter polls drives it, in its own task, so the leader's
/// request needs no hop to another task. A caller that leaves before the
/// answer (its client hung up) hands the call to a task of its own
/// ([`Finish`]): the call still ends in the cache (or in a fallback) and
/// a retry finds it there. The in-flight map holds it weakly.
type Flight = Shared<BoxFuture<'static, Outcome>>;

/// Held by a caller while it waits on a [`Flight`]: if the caller is
/// dropped first, the flight goes on in a task of its own.
struct Finish(Option<Flight>);

impl Drop for Finish {
    fn drop(&mut self) {
        if let Some(f) = self.0.take()
            && f.peek().is_none()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(async move {
                let _ = f.await;
            });
        }
    }
}

/// Per-session state on this replica.
struct SessionState {
    expires_at: Instant,
    /// The cache generation of the session's entries.
    generation: Arc<Generation>,
    /// The keys of the entries cached for the session (at most
    /// `KEYS_PER_SESSION`; beyond, entries only go stale), removed when the
    /// session's state ends.
    keys: Mutex<Vec<CacheKey>>,
    conn: tokio::sync::Mutex<Option<Arc<Connection>>>,
    fingerprints: Mutex<HashMap<u128, u128>>,
    backoff_until: Mutex<Option<Instant>>,
    ended: AtomicBool,
    /// What the last upstream answer said about list changes
    /// ([`Invalidation`] as a number: 0 not yet known).
    invalidation: AtomicU8,
}

/// Keys a session state remembers for removal when it ends.
const KEYS_PER_SESSION: usize = 1024;

impl SessionState {
    /// The keys cached for the session so far, taken.
    fn take_keys(&self) -> Vec<CacheKey> {
        std::mem::take(&mut *self.keys.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Remembers `key` (up to the bound).
    fn remember_key(&self, key: &CacheKey) {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        if keys.len() < KEYS_PER_SESSION {
            keys.push(key.clone());
        }
    }

    /// Lets go of a state the bounded state cache had to drop to make room
    /// (the least recently used one). The session goes on: its next call
    /// builds a new state (and a new upstream connection). Its entries are
    /// stale from now on, since list changes will arrive on the new
    /// state's connection, not this one's. A call still running on this
    /// state keeps its connection until it ends (the connection closes when
    /// its last holder drops it) and its answer is served, not cached.
    fn detach(&self) {
        self.generation.retire();
    }

    /// Ends the session's state: the session expired or ended. Its entries
    /// are stale from now on and its upstream connection is closed.
    fn close(&self) {
        self.ended.store(true, Ordering::SeqCst);
        self.generation.retire();
        if let Ok(mut c) = self.conn.try_lock()
            && let Some(conn) = c.take()
        {
            conn.close();
        }
    }
}

struct SessionExpiry;

impl moka::Expiry<Vec<u8>, Arc<SessionState>> for SessionExpiry {
    fn expire_after_create(
        &self,
        _key: &Vec<u8>,
        value: &Arc<SessionState>,
        created_at: Instant,
    ) -> Option<Duration> {
        Some(value.expires_at.saturating_duration_since(created_at))
    }
}

struct Inner {
    cfg: EngineConfig,
    cache: ResolveCache,
    stats: Arc<Stats>,
    inflight: Mutex<HashMap<CacheKey, WeakShared<BoxFuture<'static, Outcome>>>>,
    sessions: moka::sync::Cache<Vec<u8>, Arc<SessionState>>,
    pool: Pool,
    draws: AtomicU64,
    list_changed: watch::Sender<u64>,
}

/// The resolve engine (one per process; cheap to share by reference).
pub struct Engine {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

/// The `Instant` of a wall-clock time (now when it has passed).
fn instant_of(t: SystemTime) -> Instant {
    let now = Instant::now();
    match t.duration_since(SystemTime::now()) {
        Ok(d) => now + d,
        Err(_) => now,
    }
}

fn hex128(x: u128) -> String {
    format!("{x:032x}")
}

/// splitmix64: a well-mixed 64-bit value from a counter.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Engine {
    /// Builds an engine.
    pub fn new(cfg: EngineConfig) -> Engine {
        let stats = Arc::new(Stats::default());
        let cache = ResolveCache::new(cfg.capacity_bytes, cfg.tenant_share_bytes, stats.clone());
        // Plain LRU, not moka's default TinyLFU: admission by frequency
        // would refuse a new session's state when the cache is full (every
        // new session is seen once), and drop it at once. With LRU a new
        // state is always admitted and the least recently used one goes;
        // a state dropped for room is detached, never closed under a call
        // that is using it.
        let sessions = moka::sync::Cache::builder()
            .max_capacity(cfg.max_sessions)
            .eviction_policy(moka::policy::EvictionPolicy::lru())
            .expire_after(SessionExpiry)
            .eviction_listener({
                let cache = cache.clone();
                let stats = stats.clone();
                move |_k, v: Arc<SessionState>, cause| {
                    if cause == moka::notification::RemovalCause::Size {
                        v.detach();
                        stats.state_evicted();
                    } else {
                        v.close();
                    }
                    cache.remove_all(v.take_keys());
                }
            })
            .build();
        Engine {
            inner: Arc::new(Inner {
                // Half the exchange's time for the `server/discover` probe:
                // a silent probe still leaves room for `initialize` and
                // the call.
                pool: Pool::new(
                    cfg.egress.clone(),
                    cfg.max_response_bytes,
                    cfg.upstream_timeout / 2,
                ),
                cfg,
                cache,
                stats,
                inflight: Mutex::new(HashMap::new()),
                sessions,
                draws: AtomicU64::new(0),
                list_changed: watch::Sender::new(0),
            }),
        }
    }

    /// Resolves one call (see the module documentation).
    pub async fn resolve(
        &self,
        ctx: &SessionCtx,
        name: &str,
        arguments: &Value,
    ) -> Result<Resolution, ResolveError> {
        let inner = &self.inner;
        let tool = ctx
            .signature
            .tool(name)
            .ok_or_else(|| ResolveError::ToolNotDeclared(name.to_owned()))?;
        let Some(method) = tool.kind().method() else {
            validate(ctx, tool, arguments).await?;
            inner.stats.static_answer();
            return Ok(Resolution {
                tool: tool.served_declared(),
                source: Source::Static,
                conformant: true,
                violations: Vec::new(),
                notices: Vec::new(),
                reason: None,
                events: Vec::new(),
                body: None,
            });
        };
        let key = CacheKey::new(ctx.tenant.as_str(), &ctx.session, name, arguments);
        let mut recheck = false;
        // A hit needs no schema validation: only arguments that passed it
        // ever reach the upstream, hence the cache, and the key holds their
        // canonical bytes, so equal keys mean equal arguments.
        if ctx.cache == CachePolicy::Session
            && let Some(e) = inner.cache.get(&key)
        {
            if !self.draw_recheck() {
                inner.stats.hit();
                return Ok(serve(inner, ctx, tool, &e.value, Source::Cache, None));
            }
            recheck = true;
        }
        validate(ctx, tool, arguments).await?;
        inner.stats.miss();
        let state = self.session_state(ctx);
        let backing_off = state
            .backoff_until
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some_and(|until| Instant::now() < until);
        if backing_off {
            return Ok(fallback(inner, tool, FallbackReason::RetryAfter));
        }
        // One upstream call per key: join the call in flight or start one.
        let (flight, leader): (Flight, bool) = {
            let mut inflight = inner.inflight.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(f) = inflight.get(&key).and_then(WeakShared::upgrade) {
                (f, false)
            } else {
                // The call that just finished cached its answer before
                // leaving the in-flight map: look again under the lock.
                if ctx.cache == CachePolicy::Session
                    && !recheck
                    && let Some(e) = inner.cache.get(&key)
                {
                    drop(inflight);
                    inner.stats.hit();
                    return Ok(serve(inner, ctx, tool, &e.value, Source::Cache, None));
                }
                // A bug that panics inside the call answers every waiter
                // with a fallback instead of taking their connections down.
                let flight = AssertUnwindSafe(fetch(
                    inner.clone(),
                    state.clone(),
                    ctx.clone(),
                    method,
                    name.to_owned(),
                    arguments.clone(),
                    key.clone(),
                ))
                .catch_unwind()
                .map(|r| {
                    r.unwrap_or_else(|_| {
                        Arc::new(Err(FetchError::Transport {
                            detail: "the upstream call failed unexpectedly".into(),
                            retry_after: None,
                        }))
                    })
                })
                .boxed()
                .shared();
                // (Only a completed flight has no weak handle.)
                if let Some(weak) = flight.downgrade() {
                    inflight.insert(key.clone(), weak);
                }
                (flight, true)
            }
        };
        if !leader {
            inner.stats.coalesced();
        }
        let mut finish = Finish(Some(flight.clone()));
        let outcome = flight.await;
        finish.0 = None;
        match outcome.as_ref() {
            Ok(done) => {
                // The first caller to take the answer reports its events
                // (normally the one that started the call; another waiter
                // if that caller went away).
                let report = !done.reported.swap(true, Ordering::AcqRel);
                let mut r = serve(
                    inner,
                    ctx,
                    tool,
                    &done.fetched,
                    Source::Upstream,
                    report.then(|| key.fingerprint()),
                );
                if report && let Some((previous, current)) = done.determinism {
                    r.events.push(ResolveEvent::DeterminismViolation {
                        tool: name.to_owned(),
                        key: hex128(key.fingerprint()),
                        previous: hex128(previous),
                        current: hex128(current),
                    });
                }
                Ok(r)
            }
            Err(e) => Ok(fallback(
                inner,
                tool,
                match e {
                    FetchError::Transport { .. } => FallbackReason::UpstreamError,
                    // JSON-RPC "method not found" (-32601): the upstream
                    // does not implement the resolve method at all.
                    FetchError::Rpc { code: -32601, .. } => FallbackReason::NotImplemented,
                    FetchError::Rpc { .. } => FallbackReason::RpcError,
                    FetchError::Timeout => FallbackReason::Timeout,
                    FetchError::Malformed(_) => FallbackReason::Malformed,
                },
            )),
        }
    }

    /// Resolves several calls, in order; misses are fetched concurrently.
    pub async fn resolve_batch(
        &self,
        ctx: &SessionCtx,
        calls: &[(String, Value)],
    ) -> Vec<Result<Resolution, ResolveError>> {
        futures::future::join_all(calls.iter().map(|(n, a)| self.resolve(ctx, n, a))).await
    }

    /// Ends a session on this replica: its cache entries are invalidated
    /// at once, its fingerprints dropped and its upstream connection
    /// closed.
    pub fn end_session(&self, tenant: &TenantId, session: &str) {
        let prefix = session_prefix(tenant.as_str(), session);
        if let Some(state) = self.inner.sessions.get(&prefix) {
            state.close();
            self.inner.stats.invalidation();
            self.inner.sessions.invalidate(&prefix);
            self.inner.cache.remove_all(state.take_keys());
        }
    }

    /// How the session's cached answers are invalidated on this replica,
    /// once an upstream answer has told (`None` before the first one, or
    /// when this replica holds no state for the session).
    pub fn invalidation(&self, tenant: &TenantId, session: &str) -> Option<Invalidation> {
        let prefix = session_prefix(tenant.as_str(), session);
        let state = self.inner.sessions.get(&prefix)?;
        // The connection knows best (a subscription is acknowledged after
        // the first answer may have come); the last answer's record
        // otherwise.
        if let Ok(conn) = state.conn.try_lock()
            && let Some(c) = conn.as_ref()
        {
            return Some(if c.has_list_changed_channel() {
                Invalidation::ListChanged
            } else {
                Invalidation::EntryTtl(self.inner.cfg.unwatched_entry_ttl)
            });
        }
        match state.invalidation.load(Ordering::Relaxed) {
            1 => Some(Invalidation::ListChanged),
            2 => Some(Invalidation::EntryTtl(self.inner.cfg.unwatched_entry_ttl)),
            _ => None,
        }
    }

    /// Session states this replica holds now (upstream connections,
    /// fingerprints, generations).
    pub fn session_states(&self) -> u64 {
        self.inner.sessions.entry_count()
    }

    /// Every counter, for `/metrics`.
    pub fn stats(&self) -> StatsSnapshot {
        let mut s = self.inner.stats.snapshot();
        s.session_states = self.session_states();
        s
    }

    /// Counts the upstream `notifications/tools/list_changed` handled so
    /// far (each has invalidated its session by the time it is counted).
    pub fn list_changed_events(&self) -> watch::Receiver<u64> {
        self.inner.list_changed.subscribe()
    }

    /// Bytes a tenant's entries hold in the cache now.
    pub fn tenant_cache_bytes(&self, tenant: &TenantId) -> u64 {
        self.inner.cache.tenant_bytes(tenant.as_str())
    }

    /// Runs the cache's pending maintenance now (evictions, invalidations);
    /// it otherwise runs as the cache is used. `/metrics` runs it before
    /// reading the counts.
    pub fn run_pending_tasks(&self) {
        self.inner.cache.run_pending_tasks();
        self.inner.sessions.run_pending_tasks();
    }

    fn draw_recheck(&self) -> bool {
        let rate = self.inner.cfg.recheck_rate;
        if rate <= 0.0 {
            return false;
        }
        let n = mix(self.inner.draws.fetch_add(1, Ordering::Relaxed));
        (n as f64 / u64::MAX as f64) < rate
    }

    fn session_state(&self, ctx: &SessionCtx) -> Arc<SessionState> {
        let prefix = session_prefix(ctx.tenant.as_str(), &ctx.session);
        self.inner.sessions.get_with(prefix, || {
            Arc::new(SessionState {
                expires_at: instant_of(ctx.expires_at),
                generation: Arc::new(Generation::default()),
                keys: Mutex::new(Vec::new()),
                conn: tokio::sync::Mutex::new(None),
                fingerprints: Mutex::new(HashMap::new()),
                backoff_until: Mutex::new(None),
                ended: AtomicBool::new(false),
                invalidation: AtomicU8::new(0),
            })
        })
    }
}

/// Arguments whose JSON is larger than about this many bytes are validated
/// on the CPU pool; smaller ones on the caller's task, where validating
/// (a few microseconds, linear in the input: patterns match without
/// unbounded backtracking, see `prepared::BACKTRACK_LIMIT`) costs less than
/// the hop to another thread would.
const INLINE_VALIDATION_BYTES: usize = 16 * 1024;

/// Validates `arguments` against the tool's declared `inputSchema`: large
/// ones on the CPU pool under its one-job-per-core bound.
async fn validate(
    ctx: &SessionCtx,
    tool: &PreparedTool,
    arguments: &Value,
) -> Result<(), ResolveError> {
    if !larger_than(arguments, INLINE_VALIDATION_BYTES) {
        return tool
            .validate(arguments)
            .map_err(ResolveError::InvalidArguments);
    }
    let signature = ctx.signature.clone();
    let name = tool.name().to_owned();
    let arguments = arguments.clone();
    let checked =
        pinfold_http::cpu::offload(move || signature.tool(&name).map(|t| t.validate(&arguments)))
            .await;
    match checked {
        Ok(Some(r)) => r.map_err(ResolveError::InvalidArguments),
        Ok(None) => Err(ResolveError::ToolNotDeclared(tool.name().to_owned())),
        Err(_) => Err(ResolveError::InvalidArguments(ValidationErrors::single(
            "",
            "validation_failed",
            "the arguments could not be validated",
        ))),
    }
}

/// Whether `v`'s JSON is larger than about `limit` bytes (counted as far as
/// needed, not further).
fn larger_than(v: &Value, limit: usize) -> bool {
    fn walk(v: &Value, left: &mut isize) {
        if *left < 0 {
            return;
        }
        *left -= 8;
        match v {
            Value::String(s) => *left -= s.len() as isize,
            Value::Array(a) => a.iter().for_each(|x| walk(x, left)),
            Value::Object(m) => m.iter().for_each(|(k, x)| {
                *left -= k.len() as isize;
                walk(x, left);
            }),
            _ => {}
        }
    }
    let mut left = isize::try_from(limit).unwrap_or(isize::MAX);
    walk(v, &mut left);
    left < 0
}

/// Serves a checked answer under the session's mode. `fresh` is the key
/// fingerprint when this call reports the upstream answer's events (a
/// strict refusal is reported once per upstream answer, never again by
/// other waiters or cache hits).
fn serve(
    inner: &Inner,
    ctx: &SessionCtx,
    tool: &PreparedTool,
    f: &Fetched,
    source: Source,
    fresh: Option<u128>,
) -> Resolution {
    if !f.conformant && ctx.mode == Mode::Strict {
        inner.stats.fallback(FallbackReason::RefusedStrict);
        let events = fresh
            .map(|k| ResolveEvent::StrictRefusal {
                tool: tool.name().to_owned(),
                key: hex128(k),
                violations: f.violations().to_vec(),
            })
            .into_iter()
            .collect();
        return Resolution {
            tool: tool.served_declared(),
            source: Source::Fallback,
            conformant: false,
            violations: f.violations().to_vec(),
            notices: f.notices().to_vec(),
            reason: Some(FallbackReason::RefusedStrict.as_str().to_owned()),
            events,
            body: None,
        };
    }
    let mut r = f.served(source);
    match source {
        Source::Cache => {
            // Every hit of this answer sends the bytes rendered when it
            // was cached.
            let body = &f.hit_body.get_or_init(|| f.render_hit_body()).bytes;
            r.body = (!body.is_empty()).then(|| body.clone());
        }
        // The call that fetched a cached answer sends the same bytes with
        // its own source (the tool is not serialized twice).
        Source::Upstream => r.body = f.hit_body.get().and_then(HitBody::as_upstream),
        _ => {}
    }
    r
}

fn fallback(inner: &Inner, tool: &PreparedTool, reason: FallbackReason) -> Resolution {
    inner.stats.fallback(reason);
    Resolution {
        tool: tool.served_declared(),
        source: Source::Fallback,
        conformant: true,
        violations: Vec::new(),
        notices: Vec::new(),
        reason: Some(reason.as_str().to_owned()),
        events: Vec::new(),
        body: None,
    }
}

/// Makes (or reuses) the session's connection.
async fn connection(
    inner: &Arc<Inner>,
    state: &Arc<SessionState>,
    target: &UpstreamTarget,
) -> Result<Arc<Connection>, FetchError> {
    let mut guard = state.conn.lock().await;
    if let Some(c) = guard.as_ref() {
        if !c.is_closed() && c.opened_under(&target.rules) {
            return Ok(c.clone());
        }
        // The tenant's egress rules changed since it was opened: what the
        // new rules refuse must not stay reachable through it.
        c.close();
    }
    let weak_inner: Weak<Inner> = Arc::downgrade(inner);
    let weak_state: Weak<SessionState> = Arc::downgrade(state);
    let hook: ListChangedHook = Arc::new(move || {
        if let (Some(inner), Some(state)) = (weak_inner.upgrade(), weak_state.upgrade()) {
            state
                .fingerprints
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clear();
            state.generation.bump();
            inner.stats.invalidation();
            let n = inner.stats.list_changed();
            inner.list_changed.send_replace(n);
            tracing::debug!("upstream tool list changed: session cache invalidated");
        }
    });
    let c = Arc::new(Connection::open(&inner.pool, target, hook).await?);
    tracing::debug!(
        protocol.version = ?c.protocol_version(),
        capabilities = ?c.server_capabilities(),
        "upstream connection initialized"
    );
    *guard = Some(c.clone());
    Ok(c)
}

/// The one upstream call of a key; its outcome goes to every waiter.
#[allow(clippy::too_many_arguments)]
async fn fetch(
    inner: Arc<Inner>,
    state: Arc<SessionState>,
    ctx: SessionCtx,
    method: &'static str,
    name: String,
    arguments: Value,
    key: CacheKey,
) -> Outcome {
    /// Takes the key out of the in-flight map when the call ends, or is
    /// dropped because no caller waits for it any more.
    struct Leave<'a>(&'a Inner, &'a CacheKey);
    impl Drop for Leave<'_> {
        fn drop(&mut self) {
            self.0
                .inflight
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(self.1);
        }
    }
    let leave = Leave(&inner, &key);
    // The generation the answer belongs to: an invalidation while it is in
    // flight makes it stale before it is cached.
    let generation = state.generation.current();
    let started = Instant::now();
    let answer = tokio::time::timeout(inner.cfg.upstream_timeout, async {
        let conn = connection(&inner, &state, &ctx.upstream).await?;
        let raw = conn.call(method, &name, &arguments).await?;
        Ok((raw, conn.has_list_changed_channel()))
    })
    .await
    .unwrap_or(Err(FetchError::Timeout));
    inner.stats.upstream_call(started.elapsed());
    let outcome: Result<Done, FetchError> = match answer {
        Err(e) => {
            if matches!(e, FetchError::Transport { .. } | FetchError::Timeout) {
                // The connection may be broken, or still busy with an
                // answer that never ends: close it (the upstream sees its
                // TCP connection closed) and make a new one next time.
                if let Some(c) = state.conn.lock().await.take() {
                    c.close();
                }
            }
            if let FetchError::Transport {
                retry_after: Some(d),
                ..
            } = &e
            {
                let until = Instant::now() + (*d).min(Duration::from_secs(600));
                *state
                    .backoff_until
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = Some(until);
            }
            tracing::warn!(
                tenant.id = %ctx.tenant,
                session.id = %ctx.session,
                tool.name = %name,
                error = ?e,
                "upstream resolution failed"
            );
            Err(e)
        }
        Ok((raw, watched)) => match checked(&inner, &ctx, &name, raw) {
            Err(e) => Err(e),
            Ok((fetched, result_fp)) => {
                let determinism = remember(&inner, &state, key.fingerprint(), result_fp);
                let fetched = Arc::new(fetched);
                let invalidation = if watched {
                    Invalidation::ListChanged
                } else {
                    Invalidation::EntryTtl(inner.cfg.unwatched_entry_ttl)
                };
                state
                    .invalidation
                    .store(invalidation.code(), Ordering::Relaxed);
                if ctx.cache == CachePolicy::Session
                    && !state.ended.load(Ordering::SeqCst)
                    && !inner.cache.tenant_full(key.tenant())
                {
                    // Rendered now, so that the entry weighs what its hits
                    // will send.
                    let _ = fetched.hit_body.set(fetched.render_hit_body());
                    let weight = weigh(&key, &fetched);
                    let expires_at = match invalidation {
                        Invalidation::ListChanged => state.expires_at,
                        Invalidation::EntryTtl(ttl) => state.expires_at.min(Instant::now() + ttl),
                    };
                    let cached = inner.cache.insert(
                        key.clone(),
                        inner.cache.entry(
                            expires_at,
                            weight,
                            fetched.clone(),
                            state.generation.clone(),
                            generation,
                        ),
                    );
                    if cached {
                        state.remember_key(&key);
                    }
                }
                Ok(Done {
                    fetched,
                    determinism,
                    reported: AtomicBool::new(false),
                })
            }
        },
    };
    // Leave the in-flight map only once the answer is cached, so a later
    // caller finds one or the other.
    drop(leave);
    Arc::new(outcome)
}

/// Checks a raw upstream answer; returns it ready to serve with the
/// answer's fingerprint.
fn checked(
    inner: &Inner,
    ctx: &SessionCtx,
    name: &str,
    raw: Value,
) -> Result<(Fetched, u128), FetchError> {
    let tool = ctx
        .signature
        .tool(name)
        .ok_or_else(|| FetchError::Malformed("tool vanished".into()))?;
    let report = tool
        .check(&raw, &inner.cfg.limits)
        .map_err(|e| FetchError::Malformed(e.to_string()))?;
    for v in &report.violations {
        inner.stats.violation(v.kind);
    }
    let canonical = canonical_bytes(&raw);
    let fp = fingerprint(&canonical);
    Ok((
        Fetched::new(
            tool.served_tool(raw),
            report.conformant,
            report.violations,
            report.notices,
        ),
        fp,
    ))
}

/// Records the answer fingerprint of a key; returns (previous, current)
/// when the session had remembered a different answer.
fn remember(
    inner: &Inner,
    state: &SessionState,
    key_fp: u128,
    result_fp: u128,
) -> Option<(u128, u128)> {
    let mut fps = state.fingerprints.lock().unwrap_or_else(|e| e.into_inner());
    match fps.get_mut(&key_fp) {
        Some(prev) if *prev != result_fp => {
            let previous = *prev;
            *prev = result_fp;
            inner.stats.determinism_violation();
            Some((previous, result_fp))
        }
        Some(_) => None,
        None => {
            if fps.len() < inner.cfg.fingerprints_per_session {
                fps.insert(key_fp, result_fp);
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(signature: &Arc<PreparedSignature>, i: usize) -> SessionCtx {
        SessionCtx {
            tenant: TenantId::parse("acme").unwrap(),
            session: format!("session-{i:05}"),
            expires_at: SystemTime::now() + Duration::from_secs(3600),
            signature: signature.clone(),
            mode: Mode::Permissive,
            cache: CachePolicy::Session,
            upstream: UpstreamTarget {
                url: "http://127.0.0.1:9/mcp".into(),
                headers: Vec::new(),
                rules: pinfold_egress::Rules::new(pinfold_egress::AllowList::default(), true),
            },
        }
    }

    /// 20,000 live sessions on a replica that keeps 16,384 states: every
    /// new session's state is admitted (the newest are all there), the
    /// least recently used go, and no state is closed under its holder:
    /// a state dropped for room is only detached (its entries stale), its
    /// session and connection untouched. Under frequency-based admission a
    /// full cache would refuse new states and close them at once.
    #[test]
    fn twenty_thousand_sessions_never_get_a_state_closed_under_them() {
        let card: Value =
            serde_json::from_str(include_str!("../../../examples/manage-files-1.0.0.json"))
                .unwrap();
        let signature = Arc::new(PreparedSignature::new(&card, &Limits::default()).unwrap());
        let e = Engine::new(EngineConfig::default());
        let held: Vec<Arc<SessionState>> = (0..20_000)
            .map(|i| e.session_state(&ctx(&signature, i)))
            .collect();
        e.run_pending_tasks();
        let states = &e.inner.sessions;
        assert!(states.entry_count() <= 16_384, "{}", states.entry_count());
        for i in 20_000 - 1_000..20_000 {
            let prefix = session_prefix("acme", &format!("session-{i:05}"));
            assert!(states.contains_key(&prefix), "state {i} was refused");
        }
        assert!(
            held.iter().all(|s| !s.ended.load(Ordering::SeqCst)),
            "a state was closed under its holder"
        );
        let dropped = held
            .iter()
            .filter(|s| s.generation.current() == Generation::RETIRED)
            .count();
        assert_eq!(dropped as u64, 20_000 - states.entry_count());
        assert_eq!(e.stats().states_evicted, dropped as u64);
        // The oldest went first.
        assert_eq!(held[0].generation.current(), Generation::RETIRED);
        assert_ne!(held[19_999].generation.current(), Generation::RETIRED);
    }
}
