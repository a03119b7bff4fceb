//! The in-process ETag index.
//!
//! A conditional `GET` of a version record (`If-None-Match`) is answered
//! from memory: per (tenant, server) the index holds each version's record
//! `ETag` and which version `latest` points at. Any write to a server evicts
//! its entry on this replica at once; other replicas evict on the database's
//! change notification (PostgreSQL `LISTEN/NOTIFY`), and every entry expires
//! after a short TTL as a safety net.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use signet_core::ids::TenantId;

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
    /// The document's digest.
    pub digest: String,
}

/// What the index knows about one server.
#[derive(Debug, Default)]
pub struct ServerIndex {
    /// version → entry.
    pub entries: HashMap<String, IndexEntry>,
    /// The version `latest` resolves to.
    pub latest: Option<String>,
}

impl ServerIndex {
    /// Builds the index from the server's versions.
    pub fn build(versions: &[VersionMeta]) -> ServerIndex {
        ServerIndex {
            entries: versions
                .iter()
                .map(|v| {
                    (
                        v.version.clone(),
                        IndexEntry {
                            record_etag: record_etag(v),
                            digest: v.digest.clone(),
                        },
                    )
                })
                .collect(),
            latest: latest(versions).map(|v| v.version.clone()),
        }
    }

    /// The record ETag for `version` (`latest` allowed).
    pub fn etag(&self, version: &str) -> Option<&str> {
        let v = if version == "latest" {
            self.latest.as_deref()?
        } else {
            version
        };
        self.entries.get(v).map(|e| e.record_etag.as_str())
    }
}

/// The index itself.
pub struct EtagIndex {
    cache: moka::sync::Cache<(TenantId, String), Arc<ServerIndex>>,
}

impl Default for EtagIndex {
    fn default() -> Self {
        Self::new(100_000, Duration::from_secs(30))
    }
}

impl EtagIndex {
    /// An index holding at most `capacity` servers for at most `ttl`.
    pub fn new(capacity: u64, ttl: Duration) -> Self {
        Self {
            cache: moka::sync::Cache::builder()
                .max_capacity(capacity)
                .time_to_live(ttl)
                .build(),
        }
    }

    /// The cached entry.
    pub fn get(&self, tenant: &TenantId, server_key: &str) -> Option<Arc<ServerIndex>> {
        // Avoid allocating on the hot path: moka needs an owned key, so
        // build it once.
        self.cache.get(&(tenant.clone(), server_key.to_owned()))
    }

    /// Stores an entry.
    pub fn put(&self, tenant: &TenantId, server_key: &str, idx: Arc<ServerIndex>) {
        self.cache
            .insert((tenant.clone(), server_key.to_owned()), idx);
    }

    /// Forgets one server (after any write to it).
    pub fn evict(&self, tenant: &TenantId, server_key: &str) {
        self.cache
            .invalidate(&(tenant.clone(), server_key.to_owned()));
    }

    /// Forgets everything (after a lost change notification).
    pub fn clear(&self) {
        self.cache.invalidate_all();
    }
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
    use signet_core::ids::Timestamp;

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
