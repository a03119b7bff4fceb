//! Which entries a listing holds: a page of the tenant's visible versions
//! (or each server's `latest` only) and one server's versions, each entry
//! marked with whether it is what `latest` resolves to.

use std::cmp::Ordering;
use std::collections::HashMap;

use pinfold_core::ids::{TenantId, Timestamp};
use pinfold_http::problem::ApiError;

use crate::error::store_error;
use crate::index::{latest, semver_cmp};
use crate::model::{ListedVersion, VersionMeta};
use crate::state::RegistryState;
use crate::store::SubregistryQuery;

/// Longest `search` accepted.
pub const MAX_SEARCH_CHARS: usize = 200;

/// Which versions a listing returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionFilter {
    /// Every visible version.
    All,
    /// Each server's latest version only.
    Latest,
    /// This exact version of each server.
    Exact(String),
}

/// A listing request, parsed.
#[derive(Debug, Clone)]
pub struct ListRequest {
    /// Case-insensitive substring of the server name.
    pub search: Option<String>,
    /// Only versions updated strictly after this instant (deleted ones
    /// included, so that a mirror learns about deletions).
    pub updated_since: Option<Timestamp>,
    /// Which versions.
    pub version: VersionFilter,
    /// Include deleted (revoked) versions.
    pub include_deleted: bool,
    /// Where the previous page ended: `(server key, version)`.
    pub after: Option<(String, String)>,
    /// Page size.
    pub limit: u32,
}

/// One visible version (without its document).
#[derive(Debug, Clone)]
pub struct Entry {
    /// The server key.
    pub key: String,
    /// The server name as first published.
    pub server: String,
    /// The version.
    pub meta: VersionMeta,
    /// Whether it is what `latest` resolves to.
    pub is_latest: bool,
}

/// A page of a listing.
#[derive(Debug)]
pub struct Page {
    /// The entries, in order.
    pub entries: Vec<Entry>,
    /// Where the next page starts after, if there is one.
    pub next: Option<(String, String)>,
}

/// Orders versions newest first: semver precedence, highest first (strings
/// that are not semver after those, in reverse byte order).
pub fn newest_first(a: &str, b: &str) -> Ordering {
    semver_cmp(b, a)
}

/// A page of the tenant's subregistry.
pub async fn list(
    st: &RegistryState,
    tenant: &TenantId,
    req: &ListRequest,
) -> Result<Page, ApiError> {
    if req.version == VersionFilter::Latest {
        return list_latest(st, tenant, req).await;
    }
    let query = SubregistryQuery {
        server: None,
        search: req.search.clone(),
        updated_since: req.updated_since,
        version: match &req.version {
            VersionFilter::Exact(v) => Some(v.clone()),
            _ => None,
        },
        include_revoked: req.include_deleted || req.updated_since.is_some(),
        after: req.after.clone(),
        limit: req.limit + 1,
    };
    let mut rows = st
        .store
        .subregistry_versions(tenant, &query)
        .await
        .map_err(store_error)?;
    let next = if rows.len() > req.limit as usize {
        rows.truncate(req.limit as usize);
        rows.last().map(|v| (v.key.clone(), v.meta.version.clone()))
    } else {
        None
    };
    // What `latest` is for each server on the page.
    let mut servers: Vec<String> = rows.iter().map(|v| v.key.clone()).collect();
    servers.dedup();
    let latest = latest_of(st, tenant, &servers).await?;
    let entries = rows
        .into_iter()
        .map(|v| {
            let is_latest = latest.get(&v.key) == Some(&v.meta.version);
            entry(v, is_latest)
        })
        .collect();
    Ok(Page { entries, next })
}

fn entry(v: ListedVersion, is_latest: bool) -> Entry {
    Entry {
        key: v.key,
        server: v.server,
        meta: v.meta,
        is_latest,
    }
}

/// The version `latest` resolves to for each of `servers` that has one
/// (the registry's one rule, [`crate::index::latest`]).
async fn latest_of(
    st: &RegistryState,
    tenant: &TenantId,
    servers: &[String],
) -> Result<HashMap<String, String>, ApiError> {
    let approved = st
        .store
        .approved_versions(tenant, servers)
        .await
        .map_err(store_error)?;
    Ok(by_server(approved)
        .into_iter()
        .filter_map(|(key, versions)| {
            let metas: Vec<VersionMeta> = versions.into_iter().map(|v| v.meta).collect();
            latest(&metas).map(|m| (key, m.version.clone()))
        })
        .collect())
}

fn by_server(versions: Vec<ListedVersion>) -> HashMap<String, Vec<ListedVersion>> {
    let mut out: HashMap<String, Vec<ListedVersion>> = HashMap::new();
    for v in versions {
        out.entry(v.key.clone()).or_default().push(v);
    }
    out
}

/// `version=latest`: one entry per server that has a latest version, in
/// server order. The latest version is decided by semver precedence, which
/// SQL cannot order by, so servers are read in batches and each batch's
/// latest versions are chosen here.
async fn list_latest(
    st: &RegistryState,
    tenant: &TenantId,
    req: &ListRequest,
) -> Result<Page, ApiError> {
    let want = req.limit as usize + 1;
    let mut after = req
        .after
        .as_ref()
        .map(|(s, _)| s.clone())
        .unwrap_or_default();
    let mut entries: Vec<Entry> = Vec::with_capacity(want);
    while entries.len() < want {
        let batch = st
            .store
            .servers_with_approved(
                tenant,
                &after,
                req.search.as_deref(),
                req.updated_since,
                want as u32,
            )
            .await
            .map_err(store_error)?;
        let Some(last) = batch.last().cloned() else {
            break;
        };
        let approved = st
            .store
            .approved_versions(tenant, &batch)
            .await
            .map_err(store_error)?;
        let mut grouped = by_server(approved);
        for key in &batch {
            let Some(versions) = grouped.remove(key) else {
                continue;
            };
            let metas: Vec<VersionMeta> = versions.iter().map(|v| v.meta.clone()).collect();
            let Some(top) = latest(&metas) else { continue };
            if req
                .updated_since
                .is_some_and(|since| top.status.changed_at <= since)
            {
                continue;
            }
            let top = top.version.clone();
            if let Some(v) = versions.into_iter().find(|v| v.meta.version == top) {
                entries.push(entry(v, true));
            }
            if entries.len() == want {
                break;
            }
        }
        if batch.len() < want {
            break;
        }
        after = last;
    }
    let next = if entries.len() > req.limit as usize {
        entries.truncate(req.limit as usize);
        entries
            .last()
            .map(|e| (e.key.clone(), e.meta.version.clone()))
    } else {
        None
    };
    Ok(Page { entries, next })
}

/// How many versions of one server the versions listing shows at most: the
/// newest ones. Every version stays readable by its exact number.
pub const MAX_VERSIONS_LISTED: usize = 1_000;

/// The visible versions of one server (deleted ones only with
/// `include_deleted`), newest first, at most [`MAX_VERSIONS_LISTED`];
/// empty when the server shows nothing. Only the metadata of every version
/// is read (to find `latest`); documents are rendered for the listed ones.
pub async fn versions_of(
    st: &RegistryState,
    tenant: &TenantId,
    key: &str,
    include_deleted: bool,
) -> Result<Vec<Entry>, ApiError> {
    let query = SubregistryQuery {
        server: Some(key.to_owned()),
        include_revoked: include_deleted,
        limit: u32::MAX,
        ..SubregistryQuery::default()
    };
    let rows = st
        .store
        .subregistry_versions(tenant, &query)
        .await
        .map_err(store_error)?;
    // Every approved version is among the rows (deleted ones are the only
    // ones ever filtered out), so `latest` is decided from them.
    let metas: Vec<VersionMeta> = rows.iter().map(|v| v.meta.clone()).collect();
    let top = latest(&metas).map(|m| m.version.clone());
    let mut entries: Vec<Entry> = rows
        .into_iter()
        .map(|v| {
            let is_latest = top.as_deref() == Some(v.meta.version.as_str());
            entry(v, is_latest)
        })
        .collect();
    entries.sort_by(|a, b| newest_first(&a.meta.version, &b.meta.version));
    entries.truncate(MAX_VERSIONS_LISTED);
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_first_is_semver_precedence() {
        let mut v = vec!["1.2.0", "1.10.0", "1.10.0-rc.1", "0.9.0"];
        v.sort_by(|a, b| newest_first(a, b));
        assert_eq!(v, ["1.10.0", "1.10.0-rc.1", "1.2.0", "0.9.0"]);
    }
}
