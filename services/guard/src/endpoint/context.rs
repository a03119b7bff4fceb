//! What the endpoint's modules share, at the bottom of them: its limits
//! and counters, its state (the store, the registry, the resolve engine,
//! the keyring, the egress path and the routes this replica serves), and a
//! request once admitted.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::HeaderMap;
use pinfold_core::card::Limits;
use pinfold_core::ids::TenantId;
use pinfold_http::egress::TenantEgress;

use super::live::LiveRoute;
use super::source::{Approved, Resolver};
use crate::state::{RouteWritten, Sealer};
use crate::store::GuardStore;

/// Limits and timings of the endpoint.
#[derive(Debug, Clone)]
pub struct GuardConfig {
    /// How long an upstream request may take (a stream: its head).
    pub upstream_timeout: Duration,
    /// The largest upstream body or event read.
    pub max_response_bytes: usize,
    /// How long a request waits for a pending review.
    pub review_wait: Duration,
    /// How often a route's row and pin are compared with the store.
    pub route_check: Duration,
    /// How long the `server/discover` probe waits.
    pub probe_budget: Duration,
    /// How often an upstream without a list change channel is reviewed.
    pub review_interval: Duration,
    /// Limits under which signatures and lists are read.
    pub limits: Limits,
    /// The URL clients reach Pinfold at, for the `resource_metadata` of a
    /// `401` (else the request's `Host`).
    pub public_url: Option<String>,
}

impl Default for GuardConfig {
    fn default() -> Self {
        GuardConfig {
            upstream_timeout: Duration::from_secs(30),
            max_response_bytes: 4 << 20,
            review_wait: Duration::from_secs(10),
            route_check: Duration::from_secs(2),
            probe_budget: Duration::from_secs(5),
            review_interval: Duration::from_secs(30),
            limits: Limits::default(),
            public_url: None,
        }
    }
}

/// Counters of the endpoint (rendered by the server's `/metrics`).
#[derive(Debug, Default)]
pub struct GuardStats {
    /// Calls refused before the upstream (not shown, or the calls policy).
    pub refused: AtomicU64,
    /// Distinct drifts recorded.
    pub drifts: AtomicU64,
    /// Requests forwarded to upstreams.
    pub forwarded: AtomicU64,
}

/// What the endpoint's handlers share.
#[derive(Clone)]
pub struct EndpointState(pub(super) Arc<Inner>);

pub(super) struct Inner {
    pub(super) store: Arc<dyn GuardStore>,
    pub(super) approved: Arc<dyn Approved>,
    pub(super) resolver: Arc<dyn Resolver>,
    pub(super) sealer: Arc<dyn Sealer>,
    pub(super) egress: TenantEgress,
    pub(super) config: GuardConfig,
    pub(super) stats: Arc<GuardStats>,
    /// Keyed by [`with_route_key`].
    pub(super) routes: moka::sync::Cache<Box<str>, Arc<LiveRoute>>,
}

impl EndpointState {
    /// The endpoint over its store, the registry, the resolve engine, the
    /// keyring and the egress path.
    pub fn new(
        store: Arc<dyn GuardStore>,
        approved: Arc<dyn Approved>,
        resolver: Arc<dyn Resolver>,
        sealer: Arc<dyn Sealer>,
        egress: TenantEgress,
        config: GuardConfig,
    ) -> Self {
        EndpointState(Arc::new(Inner {
            store,
            approved,
            resolver,
            sealer,
            egress,
            config,
            stats: Arc::new(GuardStats::default()),
            routes: moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_idle(Duration::from_secs(600))
                .build(),
        }))
    }

    /// The endpoint's counters.
    pub fn stats(&self) -> &GuardStats {
        &self.0.stats
    }

    /// Forgets what this replica holds of a tenant's route (after a write
    /// to it): the next request builds it anew.
    pub fn forget(&self, tenant: &TenantId, server: &str) {
        with_route_key(tenant, server, |key| self.0.routes.invalidate(key));
    }
}

impl RouteWritten for EndpointState {
    fn route_written(&self, tenant: &TenantId, server: &str) {
        self.forget(tenant, server);
    }
}

/// Calls `f` with the key of `server`'s route in `tenant` in the routes
/// this replica serves: the tenant, a line feed (which no tenant id
/// holds), the server's name in lowercase. Written on the stack when it is
/// short, so a lookup allocates nothing.
pub(super) fn with_route_key<R>(tenant: &TenantId, server: &str, f: impl FnOnce(&str) -> R) -> R {
    let mut buf = [0u8; 256];
    let t = tenant.as_str().as_bytes();
    let n = t.len() + 1 + server.len();
    if let Some(out) = buf.get_mut(..n) {
        out[..t.len()].copy_from_slice(t);
        out[t.len()] = b'\n';
        for (d, c) in out[t.len() + 1..].iter_mut().zip(server.bytes()) {
            *d = c.to_ascii_lowercase();
        }
        // Lowercasing ASCII keeps UTF-8 valid: this always reads.
        if let Ok(key) = std::str::from_utf8(out) {
            return f(key);
        }
    }
    f(&format!(
        "{}\n{}",
        tenant.as_str(),
        server.to_ascii_lowercase()
    ))
}

pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// What a request from a client is, once admitted.
pub(super) struct Call {
    pub(super) tenant: TenantId,
    /// The client's message as it was sent (forwarded unchanged).
    pub(super) body: Option<Bytes>,
    pub(super) live: Arc<LiveRoute>,
    /// The upstream's session (2025-11-25), from the client's sealed id.
    pub(super) upstream_session: Option<String>,
    pub(super) pass: HeaderMap,
}
