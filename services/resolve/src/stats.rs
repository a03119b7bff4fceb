//! Counters for `/metrics`: plain atomics, read into a [`StatsSnapshot`].
//!
//! Nothing here is per tenant (an unbounded label set); the cache's
//! per-tenant byte accounting lives in the cache itself.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use pinfold_core::contain::ViolationKind;
use serde::Serialize;

/// Why a resolution fell back to the worst-case tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FallbackReason {
    /// The upstream could not be reached, or answered with an HTTP error.
    UpstreamError,
    /// The upstream answered with a JSON-RPC error.
    RpcError,
    /// The upstream does not implement the method (`tools/resolve` or
    /// `tools/annotations` answered with -32601, method not found).
    NotImplemented,
    /// No answer within the configured total timeout.
    Timeout,
    /// The answer was not a resolution result for the requested tool.
    Malformed,
    /// Strict mode refused a non-conforming answer.
    RefusedStrict,
    /// The upstream asked to be left alone (`Retry-After`) and that time
    /// has not passed.
    RetryAfter,
}

impl FallbackReason {
    /// Every reason, in a fixed order.
    pub const ALL: [FallbackReason; 7] = [
        FallbackReason::UpstreamError,
        FallbackReason::RpcError,
        FallbackReason::NotImplemented,
        FallbackReason::Timeout,
        FallbackReason::Malformed,
        FallbackReason::RefusedStrict,
        FallbackReason::RetryAfter,
    ];

    /// The wire spelling (also the metric label).
    pub fn as_str(self) -> &'static str {
        match self {
            FallbackReason::UpstreamError => "upstream_error",
            FallbackReason::RpcError => "rpc_error",
            FallbackReason::NotImplemented => "not_implemented",
            FallbackReason::Timeout => "timeout",
            FallbackReason::Malformed => "malformed",
            FallbackReason::RefusedStrict => "refused_strict",
            FallbackReason::RetryAfter => "retry_after",
        }
    }

    fn index(self) -> usize {
        Self::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

/// Violation kinds counted by the engine (label `kind`).
pub const VIOLATION_KINDS: [&str; 8] = [
    "undeclared_tool",
    "annotation_not_declared",
    "input_schema_changed",
    "output_schema_changed",
    "policy_hint_not_declared",
    "security_scheme_not_declared",
    "other",
    "determinism",
];

fn violation_index(kind: ViolationKind) -> usize {
    match kind {
        ViolationKind::UndeclaredTool => 0,
        ViolationKind::AnnotationNotDeclared => 1,
        ViolationKind::InputSchemaChanged => 2,
        ViolationKind::OutputSchemaChanged => 3,
        ViolationKind::PolicyHintNotDeclared => 4,
        ViolationKind::SecuritySchemeNotDeclared => 5,
        _ => 6,
    }
}

/// Upper bounds (seconds) of the upstream latency histogram buckets; a
/// last, implicit bucket is `+Inf`.
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// The live counters.
#[derive(Debug, Default)]
pub struct Stats {
    hits: AtomicU64,
    misses: AtomicU64,
    coalesced: AtomicU64,
    statics: AtomicU64,
    upstream_calls: AtomicU64,
    share_refusals: AtomicU64,
    list_changed: AtomicU64,
    invalidations: AtomicU64,
    stale_dropped: AtomicU64,
    stale_refusals: AtomicU64,
    states_evicted: AtomicU64,
    fallbacks: [AtomicU64; FallbackReason::ALL.len()],
    violations: [AtomicU64; 8],
    latency: [AtomicU64; 13],
    latency_sum_micros: AtomicU64,
    cache_bytes: AtomicI64,
    cache_entries: AtomicI64,
}

impl Stats {
    pub(crate) fn hit(&self) {
        self.hits.fetch_add(1, Relaxed);
    }
    pub(crate) fn miss(&self) {
        self.misses.fetch_add(1, Relaxed);
    }
    pub(crate) fn coalesced(&self) {
        self.coalesced.fetch_add(1, Relaxed);
    }
    pub(crate) fn static_answer(&self) {
        self.statics.fetch_add(1, Relaxed);
    }
    pub(crate) fn share_refusal(&self) {
        self.share_refusals.fetch_add(1, Relaxed);
    }
    pub(crate) fn list_changed(&self) -> u64 {
        self.list_changed.fetch_add(1, Relaxed) + 1
    }
    pub(crate) fn invalidation(&self) {
        self.invalidations.fetch_add(1, Relaxed);
    }
    pub(crate) fn stale_dropped(&self) {
        self.stale_dropped.fetch_add(1, Relaxed);
    }
    pub(crate) fn stale_refusal(&self) {
        self.stale_refusals.fetch_add(1, Relaxed);
    }
    pub(crate) fn state_evicted(&self) {
        self.states_evicted.fetch_add(1, Relaxed);
    }
    pub(crate) fn fallback(&self, r: FallbackReason) {
        self.fallbacks[r.index()].fetch_add(1, Relaxed);
    }
    pub(crate) fn violation(&self, kind: ViolationKind) {
        self.violations[violation_index(kind)].fetch_add(1, Relaxed);
    }
    pub(crate) fn determinism_violation(&self) {
        self.violations[7].fetch_add(1, Relaxed);
    }
    pub(crate) fn upstream_call(&self, took: Duration) {
        self.upstream_calls.fetch_add(1, Relaxed);
        let s = took.as_secs_f64();
        let i = LATENCY_BUCKETS
            .iter()
            .position(|b| s <= *b)
            .unwrap_or(LATENCY_BUCKETS.len());
        self.latency[i].fetch_add(1, Relaxed);
        self.latency_sum_micros
            .fetch_add(took.as_micros() as u64, Relaxed);
    }
    pub(crate) fn cache_added(&self, bytes: u64) {
        self.cache_bytes.fetch_add(bytes as i64, Relaxed);
        self.cache_entries.fetch_add(1, Relaxed);
    }
    /// Bytes the cache holds now, as its entries were weighed.
    pub(crate) fn cache_bytes_now(&self) -> u64 {
        self.cache_bytes.load(Relaxed).max(0) as u64
    }

    pub(crate) fn cache_removed(&self, bytes: u64) {
        self.cache_bytes.fetch_sub(bytes as i64, Relaxed);
        self.cache_entries.fetch_sub(1, Relaxed);
    }

    /// A consistent-enough copy of every counter.
    pub fn snapshot(&self) -> StatsSnapshot {
        let mut cumulative = 0;
        let latency_buckets = (0..13)
            .map(|i| {
                cumulative += self.latency[i].load(Relaxed);
                (
                    LATENCY_BUCKETS.get(i).copied().unwrap_or(f64::INFINITY),
                    cumulative,
                )
            })
            .collect();
        StatsSnapshot {
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            coalesced_waits: self.coalesced.load(Relaxed),
            static_answers: self.statics.load(Relaxed),
            upstream_calls: self.upstream_calls.load(Relaxed),
            share_refusals: self.share_refusals.load(Relaxed),
            list_changed: self.list_changed.load(Relaxed),
            invalidations: self.invalidations.load(Relaxed),
            stale_dropped: self.stale_dropped.load(Relaxed),
            stale_refusals: self.stale_refusals.load(Relaxed),
            states_evicted: self.states_evicted.load(Relaxed),
            fallbacks: FallbackReason::ALL
                .iter()
                .map(|r| (r.as_str(), self.fallbacks[r.index()].load(Relaxed)))
                .collect(),
            violations: VIOLATION_KINDS
                .iter()
                .enumerate()
                .map(|(i, k)| (*k, self.violations[i].load(Relaxed)))
                .collect(),
            upstream_latency_buckets: latency_buckets,
            upstream_latency_sum_seconds: self.latency_sum_micros.load(Relaxed) as f64 / 1e6,
            cache_bytes: self.cache_bytes.load(Relaxed).max(0) as u64,
            cache_entries: self.cache_entries.load(Relaxed).max(0) as u64,
            session_states: 0,
        }
    }
}

/// Every counter at one moment (for `/metrics`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatsSnapshot {
    /// Resolutions served from the cache.
    pub hits: u64,
    /// Resolutions that needed an upstream answer (including waiters).
    pub misses: u64,
    /// Misses that waited on another caller's upstream call for the same key.
    pub coalesced_waits: u64,
    /// Resolutions of static tools (no upstream call).
    pub static_answers: u64,
    /// Upstream requests made (`tools/resolve` + `tools/annotations`).
    pub upstream_calls: u64,
    /// Results not cached because their tenant was at its share.
    pub share_refusals: u64,
    /// `notifications/tools/list_changed` received from upstreams.
    pub list_changed: u64,
    /// Session invalidations (list changes and ended sessions): each one
    /// counter operation, whatever the session held.
    pub invalidations: u64,
    /// Entries of an older generation met by a lookup and dropped.
    pub stale_dropped: u64,
    /// Answers not cached because their session was invalidated while they
    /// were in flight.
    pub stale_refusals: u64,
    /// Session states dropped, least recently used first, to make room in
    /// the bounded state cache (their sessions go on with a new state).
    pub states_evicted: u64,
    /// Fallbacks by reason.
    pub fallbacks: Vec<(&'static str, u64)>,
    /// Violations by kind (containment kinds, and `determinism`).
    pub violations: Vec<(&'static str, u64)>,
    /// Upstream latency histogram: (upper bound in seconds, cumulative count).
    pub upstream_latency_buckets: Vec<(f64, u64)>,
    /// Sum of upstream latencies in seconds.
    pub upstream_latency_sum_seconds: f64,
    /// Bytes held by the cache (weigher estimate).
    pub cache_bytes: u64,
    /// Entries in the cache.
    pub cache_entries: u64,
    /// Session states held (filled in by the engine).
    pub session_states: u64,
}
