//! The resolve cache: checked upstream answers by [`CacheKey`].
//!
//! # Policy
//!
//! - **Bytes-weighted.** One moka cache bounded by `capacity_bytes`
//!   (default 256 MiB); each entry weighs what it keeps alive, measured
//!   from what it holds ([`weigh`]): its key, the served tool's own
//!   members (the declared tool is shared with the prepared signature, not
//!   copied per entry), its findings, the response body its hits send
//!   (rendered before it is cached), and a fixed per-entry overhead. moka's TinyLFU admission and LRU eviction
//!   decide what stays when the cache is full: a burst of one-off keys does
//!   not displace entries that are used.
//! - **Expiry = the session's.** An entry never outlives the session that
//!   produced it.
//! - **Per-tenant share.** No tenant may hold more than `tenant_share_bytes`
//!   (default a quarter of the capacity). A result that would take its
//!   tenant past the share is served (and still checked and fingerprinted)
//!   but not cached; once the tenant's own entries expire or are evicted it
//!   is cached again. One tenant therefore never fills more than its share,
//!   and cannot flush the others out of the rest.
//! - **Errors are never cached**: only answers the upstream gave are.
//! - **Invalidation by generation.** Every session has a [`Generation`]
//!   cell, and every entry carries the cell and the generation it was
//!   fetched under. An upstream `notifications/tools/list_changed` bumps
//!   the cell; ending the session (or dropping its state) retires it. Both
//!   cost one atomic operation, whatever the number of entries or of
//!   invalidations: there is no registry of predicates for every lookup to
//!   evaluate. An entry whose generation is no longer current is a miss,
//!   and is dropped when met; one never met again goes with its session's
//!   expiry or with the eviction of the least used.
//! - **No insert after invalidation.** An answer is stamped with the
//!   generation current when its call started, so an answer whose session
//!   was invalidated while it was in flight is served to its waiters but
//!   never read from the cache.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use moka::notification::RemovalCause;

use crate::answer::Fetched;
use crate::stats::Stats;
use pinfold_resolve_check::key::CacheKey;

/// Fixed per-entry bytes added to every entry's weight: moka's own
/// bookkeeping and our entry header (measured by the `cache_overhead`
/// bench to be below this).
pub const ENTRY_OVERHEAD: u32 = 400;

/// A session's cache generation: entries stamped with another value are
/// stale. `RETIRED` once the session has ended (or its state is gone).
#[derive(Debug, Default)]
pub(crate) struct Generation(AtomicU64);

impl Generation {
    pub(crate) const RETIRED: u64 = u64::MAX;

    /// The generation now.
    pub(crate) fn current(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// Makes every entry stamped so far stale (an upstream list change).
    pub(crate) fn bump(&self) {
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |g| {
                (g != Self::RETIRED).then_some(g + 1)
            });
    }

    /// Makes every entry stale for good (the session ended).
    pub(crate) fn retire(&self) {
        self.0.store(Self::RETIRED, Ordering::Release);
    }
}

/// One cached answer (held inline by moka; cloning it is two reference
/// counts; its tenant is the key's).
#[derive(Clone)]
pub(crate) struct Entry {
    /// Whole seconds after the cache's epoch (16 bytes per entry fewer
    /// than an `Instant`).
    expires: u32,
    weight: u32,
    /// The session generation it was fetched under, and the session's cell.
    generation: u64,
    cell: Arc<Generation>,
    pub(crate) value: Arc<Fetched>,
}

impl Entry {
    fn is_current(&self) -> bool {
        self.generation != Generation::RETIRED && self.cell.current() == self.generation
    }
}

struct SessionExpiry {
    epoch: Instant,
}

impl SessionExpiry {
    fn left(&self, value: &Entry, now: Instant) -> Duration {
        (self.epoch + Duration::from_secs(u64::from(value.expires))).saturating_duration_since(now)
    }
}

impl moka::Expiry<CacheKey, Entry> for SessionExpiry {
    fn expire_after_create(
        &self,
        _key: &CacheKey,
        value: &Entry,
        created_at: Instant,
    ) -> Option<Duration> {
        Some(self.left(value, created_at))
    }

    fn expire_after_update(
        &self,
        _key: &CacheKey,
        value: &Entry,
        updated_at: Instant,
        _duration_until_expiry: Option<Duration>,
    ) -> Option<Duration> {
        Some(self.left(value, updated_at))
    }
}

type Tenants = Arc<Mutex<HashMap<Box<str>, u64>>>;

/// The cache with its per-tenant accounting (cloning it shares it).
#[derive(Clone)]
pub(crate) struct ResolveCache {
    epoch: Instant,
    cache: moka::sync::Cache<CacheKey, Entry>,
    tenants: Tenants,
    share: u64,
    capacity: u64,
    stats: Arc<Stats>,
}

fn release(tenants: &Tenants, tenant: &str, weight: u64) {
    let mut t = tenants.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(used) = t.get_mut(tenant) {
        *used = used.saturating_sub(weight);
        if *used == 0 {
            t.remove(tenant);
        }
    }
}

impl ResolveCache {
    pub(crate) fn new(capacity_bytes: u64, tenant_share_bytes: u64, stats: Arc<Stats>) -> Self {
        let tenants: Tenants = Arc::default();
        let listener_tenants = tenants.clone();
        let listener_stats = stats.clone();
        let epoch = Instant::now();
        let cache = moka::sync::Cache::builder()
            .max_capacity(capacity_bytes)
            .weigher(|_k: &CacheKey, v: &Entry| v.weight)
            .expire_after(SessionExpiry { epoch })
            .eviction_listener(move |k: Arc<CacheKey>, v: Entry, _cause: RemovalCause| {
                release(&listener_tenants, k.tenant(), u64::from(v.weight));
                listener_stats.cache_removed(u64::from(v.weight));
            })
            .build();
        Self {
            epoch,
            cache,
            tenants,
            share: tenant_share_bytes,
            capacity: capacity_bytes,
            stats,
        }
    }

    /// An entry expiring at `expires_at`, rounded down to the second so
    /// that it never outlives its session, fetched under `generation` of
    /// the session's `cell`.
    pub(crate) fn entry(
        &self,
        expires_at: Instant,
        weight: u32,
        value: Arc<Fetched>,
        cell: Arc<Generation>,
        generation: u64,
    ) -> Entry {
        let secs = expires_at.saturating_duration_since(self.epoch).as_secs();
        Entry {
            expires: u32::try_from(secs).unwrap_or(u32::MAX),
            weight,
            generation,
            cell,
            value,
        }
    }

    /// The entry of `key`, if it is there and of its session's current
    /// generation; a stale one is dropped now.
    pub(crate) fn get(&self, key: &CacheKey) -> Option<Entry> {
        let e = self.cache.get(key)?;
        if e.is_current() {
            return Some(e);
        }
        self.cache.invalidate(key);
        self.stats.stale_dropped();
        None
    }

    /// Caches `entry` unless its session moved on since it was fetched
    /// (an invalidation while it was in flight) or its tenant is at its
    /// share; returns whether it was cached.
    pub(crate) fn insert(&self, key: CacheKey, entry: Entry) -> bool {
        if !entry.is_current() {
            self.stats.stale_refusal();
            return false;
        }
        let w = u64::from(entry.weight);
        {
            let mut t = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
            let tenant = key.tenant();
            let used = t.get(tenant).copied().unwrap_or(0);
            if used + w > self.share {
                drop(t);
                self.stats.share_refusal();
                return false;
            }
            match t.get_mut(tenant) {
                Some(u) => *u += w,
                None => {
                    t.insert(tenant.into(), w);
                }
            }
        }
        self.stats.cache_added(w);
        self.cache.insert(key, entry);
        // moka evicts in its maintenance, which runs every so many writes
        // or reads: until then the cache may hold more than its bound, by
        // as many entries as are pending, and with large entries that is
        // memory the process keeps. Past the bound, the inserting call
        // (a miss, which went upstream anyway) runs the maintenance now.
        if self.stats.cache_bytes_now() > self.capacity {
            self.cache.run_pending_tasks();
        }
        true
    }

    /// Whether `tenant` has no room left for any entry (checked before an
    /// answer's hit body is rendered, so a tenant at its share does not
    /// have large bodies rendered only to be refused).
    pub(crate) fn tenant_full(&self, tenant: &str) -> bool {
        let full = self.tenant_bytes(tenant) + u64::from(ENTRY_OVERHEAD) > self.share;
        if full {
            self.stats.share_refusal();
        }
        full
    }

    /// Removes the entries of `keys` now (a session that ended: its
    /// entries are already stale by generation; this gives their bytes
    /// back to the tenant's share at once).
    pub(crate) fn remove_all(&self, keys: Vec<CacheKey>) {
        for k in keys {
            self.cache.invalidate(&k);
        }
    }

    /// Bytes a tenant holds now.
    pub(crate) fn tenant_bytes(&self, tenant: &str) -> u64 {
        self.tenants
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(tenant)
            .copied()
            .unwrap_or(0)
    }

    /// Runs moka's pending maintenance (evictions, invalidations, listener
    /// calls) now.
    pub(crate) fn run_pending_tasks(&self) {
        self.cache.run_pending_tasks();
    }
}

/// The weight of an entry: what it keeps alive, measured from what it
/// holds. The key's bytes twice (the cache's copy, and the one its session
/// keeps to remove it when the session ends), the answer's own bytes
/// ([`Fetched::heap_bytes`]: its served members, findings and the hit body
/// rendered before it is cached), and the fixed per-entry overhead.
pub(crate) fn weigh(key: &CacheKey, fetched: &Fetched) -> u32 {
    let w = 2 * key.heap_size() + fetched.heap_bytes() + ENTRY_OVERHEAD as usize;
    u32::try_from(w).unwrap_or(u32::MAX)
}

/// Builds what one cache entry of `answer` (an upstream answer for `tool`
/// with `arguments`) keeps alive, as the engine does before caching it:
/// the key twice, the checked answer with its hit body rendered. Returns
/// its weight without the fixed [`ENTRY_OVERHEAD`] (moka's part, measured
/// by the `cache_overhead` bench), and the parts, held until dropped, so a
/// test can measure what they hold. `None` when the answer does not check.
#[doc(hidden)]
pub fn sample_entry(
    signature: &pinfold_resolve_check::prepared::PreparedSignature,
    tool: &str,
    answer: serde_json::Value,
    arguments: &serde_json::Value,
) -> Option<(usize, Box<dyn std::any::Any + Send>)> {
    let t = signature.tool(tool)?;
    let report = t
        .check(&answer, &pinfold_core::card::Limits::default())
        .ok()?;
    let key = CacheKey::new("acme", "session-0001", tool, arguments);
    let fetched = Arc::new(Fetched::new(
        t.served_tool(answer),
        report.conformant,
        report.violations,
        report.notices,
    ));
    let _ = fetched.hit_body.set(fetched.render_hit_body());
    let weight = weigh(&key, &fetched) as usize - ENTRY_OVERHEAD as usize;
    Some((weight, Box::new((key.clone(), key, fetched))))
}

/// Measures the cache's overhead per entry beyond its key and value:
/// inserts `n` prepared entries into a fresh cache and divides the growth
/// of the resident set by `n`. Linux only (`/proc/self/statm`); `None`
/// elsewhere. Used by the `cache_overhead` bench.
#[doc(hidden)]
pub fn measure_cache_overhead(n: usize) -> Option<f64> {
    fn rss() -> Option<u64> {
        let s = std::fs::read_to_string("/proc/self/statm").ok()?;
        let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
        Some(pages * 4096)
    }
    let stats = Arc::new(Stats::default());
    let cache = ResolveCache::new(u64::MAX / 2, u64::MAX / 2, stats);
    let expires_at = Instant::now() + Duration::from_secs(3600);
    let cell = Arc::new(Generation::default());
    let items: Vec<(CacheKey, Entry)> = (0..n)
        .map(|i| {
            let args = serde_json::json!({"path": format!("/f/{i}"), "action": "read"});
            let key = CacheKey::new("acme", "session-0001", "manage_files", &args);
            let value = Arc::new(Fetched::new(
                pinfold_resolve_check::prepared::ServedTool::declared(Arc::new(
                    serde_json::json!({"name": "manage_files"}),
                )),
                true,
                Vec::new(),
                Vec::new(),
            ));
            let entry = cache.entry(expires_at, 1, value, cell.clone(), 0);
            (key, entry)
        })
        .collect();
    cache.run_pending_tasks();
    let before = rss()?;
    for (k, e) in items {
        cache.insert(k, e);
    }
    cache.run_pending_tasks();
    let after = rss()?;
    Some(after.saturating_sub(before) as f64 / n as f64)
}
