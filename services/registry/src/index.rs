//! The in-process ETag index.
//!
//! A conditional `GET` of a version record (`If-None-Match`) is answered
//! from memory: per (tenant, server) the index holds each version's record
//! `ETag` and which version `latest` points at. Any write to a server evicts
//! its entry on this replica at once; other replicas evict on the database's
//! change notification (PostgreSQL `LISTEN/NOTIFY`), and every entry expires
//! after a short TTL as a safety net.

use std::collections::HashMap;
use std::hash::BuildHasher as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::HeaderValue;
use pinfold_core::ids::TenantId;

use crate::model::{Status, VersionMeta};

/// The record `ETag` for a version: digest and status revision. The record
/// shows mutable status, so its tag changes when the status does.
pub fn record_etag(meta: &VersionMeta) -> String {
    let hex = meta.digest.strip_prefix("sha256:").unwrap_or(&meta.digest);
    format!("\"{hex}.r{}\"", meta.status.revision)
}

/// The `ETag` of the immutable document itself.
pub fn document_etag(digest: &str) -> String {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    format!("\"{hex}\"")
}

/// Orders two version strings by semver precedence (ascending); strings
/// that are not semver sort below every semver, in byte order.
pub fn semver_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    match (semver::Version::parse(a), semver::Version::parse(b)) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        (Ok(_), Err(_)) => std::cmp::Ordering::Greater,
        (Err(_), Ok(_)) => std::cmp::Ordering::Less,
        (Err(_), Err(_)) => a.cmp(b),
    }
}

/// `latest`: the highest approved version by semver precedence; pre-releases
/// only when no approved release exists.
pub fn latest(versions: &[VersionMeta]) -> Option<&VersionMeta> {
    let approved: Vec<(&VersionMeta, semver::Version)> = versions
        .iter()
        .filter(|v| v.status.status == Status::Approved)
        .filter_map(|v| semver::Version::parse(&v.version).ok().map(|s| (v, s)))
        .collect();
    let releases = approved.iter().filter(|(_, s)| s.pre.is_empty());
    releases
        .max_by(|a, b| a.1.cmp(&b.1))
        .or_else(|| approved.iter().max_by(|a, b| a.1.cmp(&b.1)))
        .map(|(v, _)| *v)
}

/// One version in the index.
#[derive(Debug, Clone)]
pub struct IndexEntry {
    /// The record's ETag.
    pub record_etag: String,
    /// The same, as a header value (a `304` clones it: no copy).
    pub record_etag_header: HeaderValue,
    /// The document's digest.
    pub digest: String,
    /// The version's trust status (so a reader can tell, without a
    /// database round trip, that a version was revoked).
    pub status: Status,
}

/// What the index knows about one server.
#[derive(Debug, Default)]
pub struct ServerIndex {
    /// Whose server this is: `(tenant, server key)`, checked on every
    /// lookup (the index is keyed by a hash of them).
    pub owner: (String, String),
    /// version → entry.
    pub entries: HashMap<String, IndexEntry>,
    /// The version `latest` resolves to.
    pub latest: Option<String>,
}

impl ServerIndex {
    /// Builds the index from the server's versions.
    pub fn build(versions: &[VersionMeta]) -> ServerIndex {
        ServerIndex {
            owner: Default::default(),
            entries: versions
                .iter()
                .map(|v| {
                    let tag = record_etag(v);
                    (
                        v.version.clone(),
                        IndexEntry {
                            record_etag_header: HeaderValue::from_str(&tag)
                                .unwrap_or_else(|_| HeaderValue::from_static("\"invalid\"")),
                            record_etag: tag,
                            digest: v.digest.clone(),
                            status: v.status.status,
                        },
                    )
                })
                .collect(),
            latest: latest(versions).map(|v| v.version.clone()),
        }
    }

    /// The entry of `version` (`latest` allowed).
    pub fn entry(&self, version: &str) -> Option<&IndexEntry> {
        let v = if version == "latest" {
            self.latest.as_deref()?
        } else {
            version
        };
        self.entries.get(v)
    }

    /// The record ETag for `version` (`latest` allowed).
    pub fn etag(&self, version: &str) -> Option<&str> {
        self.entry(version).map(|e| e.record_etag.as_str())
    }

    fn owned_by(&self, tenant: &TenantId, server_key: &str) -> bool {
        self.owner.0 == tenant.as_str() && self.owner.1 == server_key
    }
}

/// Number of generation stripes; servers hash onto them.
const STRIPES: usize = 64;

/// The index itself.
///
/// A reader that misses loads the server's versions from the store and
/// stores what it read. A write may commit (and evict) while that load is in
/// flight, so the reader would store a copy older than the eviction — and a
/// revoked version would keep answering `304` until the TTL. To prevent it,
/// every server hashes onto a stripe with a generation: an eviction bumps the
/// stripe's generation under its lock, and a loaded copy is stored only if the
/// generation it saw before reading the store is still current (checked under
/// the same lock). A copy read before an eviction is therefore never stored
/// after it. Reads of the cache take only a shard's read lock.
///
/// Entries are keyed by a keyed hash of (tenant, server), so a lookup
/// copies neither; the entry names its owner and a lookup checks it (a hash
/// collision is a miss, and evicting by hash may over-evict, never keep a
/// stale copy).
pub struct EtagIndex {
    cache: pinfold_http::hot::HotCache<Arc<ServerIndex>>,
    stripes: Box<[Mutex<u64>]>,
    hasher: pinfold_http::hot::KeyHasher,
}

impl Default for EtagIndex {
    fn default() -> Self {
        Self::new(100_000, Duration::from_secs(30))
    }
}

/// The generation a reader saw before it read the store (see [`EtagIndex`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    stripe: usize,
    generation: u64,
}

impl EtagIndex {
    /// An index holding at most `capacity` servers for at most `ttl`.
    pub fn new(capacity: u64, ttl: Duration) -> Self {
        Self {
            cache: pinfold_http::hot::HotCache::new(capacity, ttl),
            stripes: (0..STRIPES).map(|_| Mutex::new(0)).collect(),
            hasher: pinfold_http::hot::KeyHasher::default(),
        }
    }

    fn key(&self, tenant: &TenantId, server_key: &str) -> u64 {
        self.hasher.hash_one((tenant.as_str(), server_key))
    }

    fn stripe(&self, tenant: &TenantId, server_key: &str) -> usize {
        (self.key(tenant, server_key) as usize) % STRIPES
    }

    fn lock(&self, stripe: usize) -> std::sync::MutexGuard<'_, u64> {
        // A poisoned stripe only means a panic elsewhere while holding a
        // counter; the counter itself is always valid.
        self.stripes[stripe]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The cached entry.
    pub fn get(&self, tenant: &TenantId, server_key: &str) -> Option<Arc<ServerIndex>> {
        self.cache
            .get(self.key(tenant, server_key))
            .filter(|idx| idx.owned_by(tenant, server_key))
    }

    /// Takes a ticket before reading the store for `server_key`.
    pub fn ticket(&self, tenant: &TenantId, server_key: &str) -> Ticket {
        let stripe = self.stripe(tenant, server_key);
        Ticket {
            stripe,
            generation: *self.lock(stripe),
        }
    }

    /// Stores an entry read under `ticket`, unless a write evicted the server
    /// (or anything on its stripe) since the ticket was taken. Returns
    /// whether it was stored.
    pub fn put(
        &self,
        ticket: Ticket,
        tenant: &TenantId,
        server_key: &str,
        idx: Arc<ServerIndex>,
    ) -> bool {
        let generation = self.lock(ticket.stripe);
        if *generation != ticket.generation {
            return false;
        }
        let idx = if idx.owned_by(tenant, server_key) {
            idx
        } else {
            Arc::new(ServerIndex {
                owner: (tenant.as_str().to_owned(), server_key.to_owned()),
                entries: idx.entries.clone(),
                latest: idx.latest.clone(),
            })
        };
        self.cache.insert(self.key(tenant, server_key), idx, 1);
        true
    }

    /// The entry for `server_key`, loading it with `load` on a miss. The
    /// loaded copy is stored only if no eviction happened while it loaded;
    /// either way the caller gets what was read (it is at least as fresh as
    /// the request).
    pub async fn get_or_load<E, F>(
        &self,
        tenant: &TenantId,
        server_key: &str,
        load: F,
    ) -> Result<Arc<ServerIndex>, E>
    where
        F: Future<Output = Result<Vec<VersionMeta>, E>>,
    {
        if let Some(idx) = self.get(tenant, server_key) {
            return Ok(idx);
        }
        let ticket = self.ticket(tenant, server_key);
        let versions = load.await?;
        let mut idx = ServerIndex::build(&versions);
        idx.owner = (tenant.as_str().to_owned(), server_key.to_owned());
        let idx = Arc::new(idx);
        self.put(ticket, tenant, server_key, idx.clone());
        Ok(idx)
    }

    /// Forgets one server (after any write to it).
    pub fn evict(&self, tenant: &TenantId, server_key: &str) {
        let stripe = self.stripe(tenant, server_key);
        let mut generation = self.lock(stripe);
        *generation += 1;
        self.cache.invalidate(self.key(tenant, server_key));
    }

    /// Forgets everything (after a lost change notification).
    pub fn clear(&self) {
        // Hold every stripe so that no reader stores a copy between the
        // generation bump and the wholesale invalidation.
        let mut guards: Vec<_> = (0..STRIPES).map(|i| self.lock(i)).collect();
        for g in &mut guards {
            **g += 1;
        }
        self.cache.clear();
    }
}

/// The route of a version record, as the router names it (metrics and rate
/// limits key on it).
pub const VERSION_ROUTE: &str = "/v1/tenants/{tenant}/servers/{server}/versions/{version}";

/// The `ETag` to answer `304` with when `if_none_match` names the current
/// record of `version` (`latest` allowed) in `idx`.
pub fn still_current(idx: &ServerIndex, version: &str, if_none_match: &str) -> Option<HeaderValue> {
    let entry = idx.entry(version)?;
    self::if_none_match(if_none_match, &entry.record_etag).then(|| entry.record_etag_header.clone())
}

/// A conditional read answered from memory alone: the `ETag` for a `304`
/// when the index already holds `server_key` of `tenant` and
/// `if_none_match` names the current record of `version`. `None` means
/// "not known here without a round trip", never "modified": the caller
/// then takes the full path (`get_version`), which loads the index and
/// answers `200`, `304` or an error. `server_key` must be a canonical key
/// (a hit proves it names a published server, since only published keys
/// are indexed).
pub fn not_modified(
    index: &EtagIndex,
    tenant: &TenantId,
    server_key: &str,
    version: &str,
    if_none_match: &str,
) -> Option<HeaderValue> {
    let idx = index.get(tenant, server_key)?;
    still_current(&idx, version, if_none_match)
}

/// Whether an `If-None-Match` header value matches `etag` (weak comparison,
/// RFC 9110 §13.1.2: `W/` prefixes are ignored; `*` matches anything).
pub fn if_none_match(header: &str, etag: &str) -> bool {
    header.split(',').map(str::trim).any(|candidate| {
        candidate == "*" || candidate.strip_prefix("W/").unwrap_or(candidate) == etag
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::StatusRow;
    use pinfold_core::ids::Timestamp;

    fn meta(v: &str, status: Status) -> VersionMeta {
        VersionMeta {
            version: v.into(),
            digest: format!("sha256:{}", "a".repeat(64)),
            published_by: "p".into(),
            published_at: Timestamp::from_millis(0),
            status: StatusRow {
                status,
                revision: 1,
                changed_at: Timestamp::from_millis(0),
                reason: None,
                approved_by: None,
                approved_at: None,
            },
        }
    }

    #[test]
    fn latest_is_the_highest_approved_release() {
        let vs = vec![
            meta("1.2.0", Status::Approved),
            meta("1.10.0", Status::Approved),
            meta("2.0.0", Status::Pending),
            meta("1.11.0-rc.1", Status::Approved),
            meta("1.12.0", Status::Revoked),
        ];
        assert_eq!(latest(&vs).unwrap().version, "1.10.0");
        let pre = vec![
            meta("0.1.0-alpha", Status::Approved),
            meta("0.1.0-beta", Status::Approved),
        ];
        assert_eq!(latest(&pre).unwrap().version, "0.1.0-beta");
        assert!(latest(&[meta("1.0.0", Status::Pending)]).is_none());
    }

    fn index_of(vs: &[VersionMeta]) -> Arc<ServerIndex> {
        Arc::new(ServerIndex::build(vs))
    }

    /// The race of a revoked version answering 304, forced deterministically:
    /// a reader misses and reads the store (seeing 1.0.0 approved); while its
    /// read is in flight a revocation commits and evicts; the reader must not
    /// then store its stale copy.
    #[tokio::test]
    async fn a_copy_read_before_an_eviction_is_never_stored_after_it() {
        let idx = EtagIndex::default();
        let t = TenantId::parse("acme").unwrap();
        let stale = vec![meta("1.0.0", Status::Approved)];
        let got = idx
            .get_or_load(&t, "files", async {
                // The write lands while the store read is in flight.
                idx.evict(&t, "files");
                Ok::<_, ()>(stale.clone())
            })
            .await
            .unwrap();
        assert_eq!(
            got.latest.as_deref(),
            Some("1.0.0"),
            "the reader still gets its answer"
        );
        assert!(
            idx.get(&t, "files").is_none(),
            "the stale copy must not be cached after the eviction"
        );
        // The next reader loads afresh and, with no write in between, stores.
        let fresh = vec![meta("1.0.0", Status::Revoked)];
        let got = idx
            .get_or_load(&t, "files", async { Ok::<_, ()>(fresh.clone()) })
            .await
            .unwrap();
        assert!(got.latest.is_none());
        assert!(idx.get(&t, "files").unwrap().latest.is_none());
    }

    #[tokio::test]
    async fn clear_also_fences_readers_in_flight() {
        let idx = EtagIndex::default();
        let t = TenantId::parse("acme").unwrap();
        idx.get_or_load(&t, "files", async {
            idx.clear();
            Ok::<_, ()>(vec![meta("1.0.0", Status::Approved)])
        })
        .await
        .unwrap();
        assert!(idx.get(&t, "files").is_none());
    }

    #[test]
    fn tickets_of_other_servers_survive_unrelated_evictions_mostly() {
        let idx = EtagIndex::default();
        let t = TenantId::parse("acme").unwrap();
        let ticket = idx.ticket(&t, "a");
        idx.evict(&t, "a");
        assert!(!idx.put(ticket, &t, "a", index_of(&[])));
        let ticket = idx.ticket(&t, "a");
        assert!(idx.put(ticket, &t, "a", index_of(&[])));
        assert!(idx.get(&t, "a").is_some());
    }

    #[test]
    fn if_none_match_forms() {
        let tag = "\"abc.r1\"";
        assert!(if_none_match("\"abc.r1\"", tag));
        assert!(if_none_match("W/\"abc.r1\"", tag));
        assert!(if_none_match("\"x\", \"abc.r1\"", tag));
        assert!(if_none_match("*", tag));
        assert!(!if_none_match("\"abc.r2\"", tag));
        assert!(!if_none_match("abc.r1", tag));
    }
}
