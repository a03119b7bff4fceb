//! The subregistry: a tenant's approved versions in the shapes of the
//! official MCP registry's read API (`/v0.1`), so that an existing registry
//! client can use `https://pinfold.example/t/{tenant}` as the base URL of a
//! private subregistry. The use cases and the view, without HTTP (the
//! handlers are in `routes::v01`).
//!
//! What is visible: every version that was ever approved — `approved`
//! (official status `active`), `deprecated` (`deprecated`) and `revoked`
//! after an approval (`deleted`, listed only with `include_deleted`).
//! Pending and rejected versions, and versions revoked before anyone
//! approved them, never appear.
//!
//! Each entry's `server` is the published card without its `signature`
//! (the `server.json` part). The official `_meta` key allows no extra
//! members, so Pinfold's own data — digest, attestation, enforcement mode,
//! status and the worst-case tools — goes under [`PINFOLD_META`].

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use pinfold_core::Mode;
use pinfold_core::card::{Limits, ServerCard};
use pinfold_core::ids::{TenantId, Timestamp};
use pinfold_http::cpu::offload;
use pinfold_http::problem::ApiError;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::error::store_error;
use crate::index::{latest, record_etag, semver_cmp};
use crate::model::{ListedVersion, Status, StoredVersion, VersionMeta};
use crate::state::{EnforcementModes, RegistryState};
use crate::store::SubregistryQuery;

/// The official registry's `_meta` key (its members are fixed).
pub const OFFICIAL_META: &str = "io.modelcontextprotocol.registry/official";

/// Pinfold's own `_meta` key: the reverse-DNS name of the project's
/// repository, as server names are built.
pub const PINFOLD_META: &str = "io.github.pinfold/pinfold";

/// Longest `search` accepted.
pub const MAX_SEARCH_CHARS: usize = 200;

/// Longest `statusMessage` the official schema allows.
pub const MAX_STATUS_MESSAGE_CHARS: usize = 500;

/// Longest `description` the official `server.json` schema allows.
pub const MAX_DESCRIPTION_CHARS: usize = 100;

/// The official status of a version, or `None` when the subregistry never
/// shows it (pending, rejected).
pub fn official_status(status: Status) -> Option<&'static str> {
    match status {
        Status::Approved => Some("active"),
        Status::Deprecated => Some("deprecated"),
        Status::Revoked => Some("deleted"),
        Status::Pending | Status::Rejected => None,
    }
}

/// Whether the subregistry shows a version: it was approved at some point
/// (an approval records `approved_at`, and no later transition clears it).
pub fn visible(meta: &VersionMeta) -> bool {
    meta.status.approved_at.is_some() && official_status(meta.status.status).is_some()
}

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

/// The rendered views of `entries`, in order: from the view cache, the
/// documents of the misses read in one query and rendered on the CPU pool.
pub async fn views(
    st: &RegistryState,
    tenant: &TenantId,
    entries: &[Entry],
) -> Result<Vec<Arc<DocView>>, ApiError> {
    let mut out: Vec<Option<Arc<DocView>>> = entries
        .iter()
        .map(|e| st.views.get(tenant, &e.meta.digest))
        .collect();
    let missing: Vec<(String, String)> = entries
        .iter()
        .zip(&out)
        .filter(|(_, v)| v.is_none())
        .map(|(e, _)| (e.key.clone(), e.meta.version.clone()))
        .collect();
    if missing.is_empty() {
        return Ok(out.into_iter().flatten().collect());
    }
    let docs = st
        .store
        .versions_by_keys(tenant, &missing)
        .await
        .map_err(store_error)?;
    let limits = st.limits.clone();
    let rendered = offload(move || {
        docs.into_iter()
            .map(|(_, stored)| {
                DocView::render(&stored.document, &limits)
                    .map(|v| (stored.meta.digest, Arc::new(v)))
                    .map_err(|e| (stored.server, e))
            })
            .collect::<Result<HashMap<String, Arc<DocView>>, (String, String)>>()
    })
    .await?
    .map_err(|(server, e)| {
        tracing::error!(error = %e, server.name = %server, "subregistry view failed");
        ApiError::internal()
    })?;
    for (digest, view) in &rendered {
        st.views.insert(tenant, digest, view.clone());
    }
    for (slot, e) in out.iter_mut().zip(entries) {
        if slot.is_none() {
            // Versions are never deleted, so every missing one was read.
            *slot = Some(rendered.get(&e.meta.digest).cloned().ok_or_else(|| {
                tracing::error!(server.name = %e.server, version = %e.meta.version,
                    "a listed version has no document");
                ApiError::internal()
            })?);
        }
    }
    Ok(out.into_iter().flatten().collect())
}

// ---------------------------------------------------------------- the view

/// One server version as the official API shows it (`ServerResponse`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ServerResponse {
    /// The `server.json` document: the published card without its
    /// `signature`.
    #[schema(value_type = Object)]
    pub server: Box<RawValue>,
    /// Registry metadata.
    #[serde(rename = "_meta")]
    pub meta: ResponseMeta,
}

/// The `_meta` of a [`ServerResponse`].
#[derive(Debug, Serialize, ToSchema)]
pub struct ResponseMeta {
    /// The official registry's metadata.
    #[serde(rename = "io.modelcontextprotocol.registry/official")]
    pub official: OfficialMeta,
    /// Pinfold's own metadata.
    #[serde(rename = "io.github.pinfold/pinfold")]
    pub pinfold: PinfoldMeta,
}

/// The official registry's metadata of a version.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OfficialMeta {
    /// `active` (approved), `deprecated` or `deleted` (revoked).
    #[schema(value_type = String, example = "active")]
    pub status: &'static str,
    /// Why it was deprecated or deleted (at most 500 characters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// When the status last changed.
    #[schema(value_type = String, format = DateTime)]
    pub status_changed_at: Timestamp,
    /// When the version was published.
    #[schema(value_type = String, format = DateTime)]
    pub published_at: Timestamp,
    /// When anything about it last changed (its status: the content is
    /// immutable).
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: Timestamp,
    /// Whether `latest` resolves to this version.
    pub is_latest: bool,
}

/// Pinfold's metadata of a version (under `io.github.pinfold/pinfold`).
#[derive(Debug, Serialize, ToSchema)]
pub struct PinfoldMeta {
    /// `sha256:<hex>` of the RFC 8785 canonical published document.
    pub digest: String,
    /// The signed attestation of this version: a path-absolute URL,
    /// resolved against the subregistry's origin.
    pub attestation: String,
    /// The tenant's enforcement mode for this server.
    #[schema(value_type = String, example = "permissive")]
    pub mode: &'static str,
    /// Pinfold's own status (`approved`, `deprecated`, `revoked`).
    pub status: Status,
    /// The worst-case `tools/list`: every tool reduced to the least safe
    /// value of each hint (SEP-2091 "Reference Implementation").
    #[schema(value_type = Vec<Object>)]
    pub tools: Box<RawValue>,
}

/// A page in the official `ServerList` shape.
#[derive(Debug, Serialize, ToSchema)]
pub struct ServerList {
    /// The versions.
    pub servers: Vec<ServerResponse>,
    /// Pagination.
    pub metadata: ListMetadata,
}

/// Pagination metadata of a [`ServerList`].
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListMetadata {
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// How many entries this page holds.
    pub count: usize,
}

/// The official 404 body.
#[derive(Debug, Serialize, ToSchema)]
pub struct NotFoundBody {
    /// What was not found.
    pub error: String,
}

/// Shortens `s` to at most `max` characters, ending with `…` when cut.
fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

/// The `server.json` view of a published card: the card without its
/// `signature`. The official schema requires a `description` of 1 to 100
/// characters where a card may have none (or, under raised limits, a longer
/// one): a missing or blank description becomes the card's title, or else
/// its name; a longer one is cut to 100 characters ending with `…`. Every
/// other member is passed through as published.
pub fn server_view(mut card: Map<String, Value>) -> Map<String, Value> {
    card.remove("signature");
    let description = match card.get("description").and_then(Value::as_str) {
        Some(d) if !d.trim().is_empty() => shorten(d, MAX_DESCRIPTION_CHARS),
        _ => {
            let fallback = ["title", "name"]
                .iter()
                .filter_map(|k| card.get(*k).and_then(Value::as_str))
                .find(|s| !s.trim().is_empty())
                .unwrap_or("MCP server");
            shorten(fallback, MAX_DESCRIPTION_CHARS)
        }
    };
    card.insert("description".into(), Value::String(description));
    card
}

/// The attestation path of a version: the `/v1` attestation resource.
pub fn attestation_path(tenant: &TenantId, server: &str, version: &str) -> String {
    format!(
        "/v1/tenants/{tenant}/servers/{}/versions/{version}/attestation",
        server.replace('/', "%2F")
    )
}

/// The official metadata of a visible version.
pub fn official_meta(meta: &VersionMeta, is_latest: bool) -> OfficialMeta {
    let status = official_status(meta.status.status).unwrap_or("deleted");
    let status_message = match meta.status.status {
        Status::Deprecated | Status::Revoked => meta
            .status
            .reason
            .as_deref()
            .map(|r| shorten(r, MAX_STATUS_MESSAGE_CHARS)),
        _ => None,
    };
    OfficialMeta {
        status,
        status_message,
        status_changed_at: meta.status.changed_at,
        published_at: meta.published_at,
        // The content is immutable: the last change is a status change
        // (publication itself sets the first status).
        updated_at: meta.status.changed_at.max(meta.published_at),
        is_latest,
    }
}

/// What the subregistry shows of a published document — its `server.json`
/// view and its worst-case tools — rendered once: both depend on the
/// document alone, so they are cached by digest ([`ViewCache`]).
#[derive(Debug)]
pub struct DocView {
    /// [`server_view`] of the document, serialized.
    pub server: Box<RawValue>,
    /// The worst-case `tools` array, serialized.
    pub tools: Box<RawValue>,
}

impl DocView {
    /// Renders the view of a stored document (CPU work: it parses the
    /// document and reduces every tool; run it on the CPU pool).
    pub fn render(document: &str, limits: &Limits) -> Result<DocView, String> {
        let doc: Value =
            serde_json::from_str(document).map_err(|e| format!("stored document: {e}"))?;
        let card = ServerCard::from_value(&doc, limits)
            .map_err(|e| format!("stored document no longer validates: {e}"))?;
        let mut reduced = pinfold_core::reduce::reduce_signature(&card.signature);
        drop(card);
        let tools = reduced
            .get_mut("tools")
            .map(Value::take)
            .unwrap_or(Value::Array(Vec::new()));
        let Value::Object(obj) = doc else {
            return Err("stored document is not an object".into());
        };
        let server = serde_json::value::to_raw_value(&server_view(obj));
        let tools = serde_json::value::to_raw_value(&tools);
        Ok(DocView {
            server: server.map_err(|e| e.to_string())?,
            tools: tools.map_err(|e| e.to_string())?,
        })
    }

    /// Bytes held.
    fn weight(&self) -> u32 {
        u32::try_from(self.server.get().len() + self.tools.get().len()).unwrap_or(u32::MAX)
    }
}

/// Rendered [`DocView`]s by (tenant, digest), bounded by bytes. Only an
/// optimisation: a miss renders again. Keyed by tenant as well, so that
/// nothing is shared between tenants, not even the timing of a hit.
pub struct ViewCache {
    cache: moka::sync::Cache<(TenantId, String), Arc<DocView>>,
}

impl ViewCache {
    /// A cache holding at most `max_bytes` of rendered views, each for at
    /// most ten minutes after its last use.
    pub fn new(max_bytes: u64) -> ViewCache {
        ViewCache {
            cache: moka::sync::Cache::builder()
                .max_capacity(max_bytes)
                .weigher(|_, v: &Arc<DocView>| v.weight())
                .time_to_idle(std::time::Duration::from_secs(600))
                .build(),
        }
    }

    /// The cached view of the document with `digest` in `tenant`.
    pub fn get(&self, tenant: &TenantId, digest: &str) -> Option<Arc<DocView>> {
        self.cache.get(&(tenant.clone(), digest.to_owned()))
    }

    /// Caches the view of the document with `digest` in `tenant`.
    pub fn insert(&self, tenant: &TenantId, digest: &str, view: Arc<DocView>) {
        self.cache.insert((tenant.clone(), digest.to_owned()), view);
    }

    /// The view of `stored` in `tenant`, rendered here on a miss (CPU work).
    pub fn view(
        &self,
        tenant: &TenantId,
        stored: &StoredVersion,
        limits: &Limits,
    ) -> Result<Arc<DocView>, ApiError> {
        let key = (tenant.clone(), stored.meta.digest.clone());
        if let Some(v) = self.cache.get(&key) {
            return Ok(v);
        }
        let view = DocView::render(&stored.document, limits).map_err(|e| {
            tracing::error!(error = %e, server.name = %stored.server, "subregistry view failed");
            ApiError::internal()
        })?;
        let view = Arc::new(view);
        self.cache.insert(key, view.clone());
        Ok(view)
    }
}

impl Default for ViewCache {
    /// 64 MiB.
    fn default() -> Self {
        ViewCache::new(64 << 20)
    }
}

/// One entry as the official API shows it, from its rendered view.
pub fn response(
    entry: &Entry,
    view: &DocView,
    tenant: &TenantId,
    modes: &EnforcementModes,
) -> ServerResponse {
    let meta = &entry.meta;
    ServerResponse {
        server: view.server.clone(),
        meta: ResponseMeta {
            official: official_meta(meta, entry.is_latest),
            pinfold: PinfoldMeta {
                digest: meta.digest.clone(),
                attestation: attestation_path(tenant, &entry.server, &meta.version),
                mode: modes.mode_for(&entry.key).as_str(),
                status: meta.status.status,
                tools: view.tools.clone(),
            },
        },
    }
}

/// The enforcement modes of the tenant, or `None` when it does not exist.
pub async fn modes(
    st: &RegistryState,
    tenant: &TenantId,
) -> Result<Option<EnforcementModes>, ApiError> {
    st.policies
        .enforcement_modes(tenant)
        .await
        .map_err(store_error)
}

/// A list's strong `ETag`: a hash of what its body is made of — each
/// entry's server, version, record `ETag`, latest flag and mode, and where
/// the next page starts — so that a conditional request is answered
/// without rendering the page. (The documents are covered by their
/// digests, inside the record `ETag`s.)
pub fn list_etag(
    entries: &[Entry],
    modes: &EnforcementModes,
    next: Option<&(String, String)>,
) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(b"v0.1 list\n");
    for e in entries {
        h.update(e.key.as_bytes());
        h.update(b"\n");
        h.update(e.server.as_bytes());
        h.update(b"\n");
        h.update(record_etag(&e.meta).as_bytes());
        h.update(if e.is_latest {
            "\nlatest\n"
        } else {
            "\nolder\n"
        });
        h.update(modes.mode_for(&e.key).as_str().as_bytes());
        h.update(b"\n");
    }
    if let Some((k, v)) = next {
        h.update(b"next\n");
        h.update(k.as_bytes());
        h.update(b"\n");
        h.update(v.as_bytes());
    }
    format!("\"{}\"", hex::encode(&h.finalize()[..20]))
}

/// The strong `ETag` of one version's response, built on its record
/// `ETag` ([`crate::index::record_etag`]: digest and status revision) plus
/// what else the response shows that can change: whether it is the latest,
/// and the enforcement mode.
pub fn entry_etag(record_etag: &str, is_latest: bool, mode: Mode) -> String {
    format!(
        "\"{}.{}.{}\"",
        record_etag.trim_matches('"'),
        if is_latest { "latest" } else { "older" },
        mode.as_str()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::record_etag;
    use crate::model::StatusRow;
    use serde_json::json;

    fn meta(status: Status, approved: bool, reason: Option<&str>) -> VersionMeta {
        VersionMeta {
            version: "1.0.0".into(),
            digest: format!("sha256:{}", "b".repeat(64)),
            published_by: "p".into(),
            published_at: Timestamp::from_millis(1_000),
            status: StatusRow {
                status,
                revision: 2,
                changed_at: Timestamp::from_millis(5_000),
                reason: reason.map(str::to_owned),
                approved_by: None,
                approved_at: approved.then_some(Timestamp::from_millis(2_000)),
            },
        }
    }

    #[test]
    fn statuses_map_onto_the_official_ones() {
        assert_eq!(official_status(Status::Approved), Some("active"));
        assert_eq!(official_status(Status::Deprecated), Some("deprecated"));
        assert_eq!(official_status(Status::Revoked), Some("deleted"));
        assert_eq!(official_status(Status::Pending), None);
        assert_eq!(official_status(Status::Rejected), None);
    }

    #[test]
    fn only_versions_approved_once_are_visible() {
        assert!(visible(&meta(Status::Approved, true, None)));
        assert!(visible(&meta(Status::Deprecated, true, None)));
        assert!(visible(&meta(Status::Revoked, true, None)));
        assert!(!visible(&meta(Status::Revoked, false, None)));
        assert!(!visible(&meta(Status::Pending, false, None)));
        assert!(!visible(&meta(Status::Rejected, false, None)));
    }

    #[test]
    fn the_server_view_drops_the_signature_and_fits_the_description() {
        let card = json!({"name": "io.github.a/b", "version": "1.0.0", "title": "B",
            "description": "d", "signature": {"tools": []}, "_meta": {"x": 1}});
        let v = server_view(card.as_object().unwrap().clone());
        assert_eq!(
            Value::Object(v),
            json!({"name": "io.github.a/b", "version": "1.0.0", "title": "B",
                "description": "d", "_meta": {"x": 1}})
        );
        let no_desc = json!({"name": "io.github.a/b", "version": "1.0.0", "title": "Bee"});
        let v = server_view(no_desc.as_object().unwrap().clone());
        assert_eq!(v["description"], "Bee");
        let blank = json!({"name": "io.github.a/b", "version": "1.0.0", "description": "  "});
        let v = server_view(blank.as_object().unwrap().clone());
        assert_eq!(v["description"], "io.github.a/b");
        let long =
            json!({"name": "io.github.a/b", "version": "1.0.0", "description": "é".repeat(150)});
        let v = server_view(long.as_object().unwrap().clone());
        let d = v["description"].as_str().unwrap();
        assert_eq!(d.chars().count(), 100);
        assert!(d.ends_with('…'));
        assert!(d.starts_with("éé"));
    }

    #[test]
    fn official_meta_carries_messages_only_for_deprecated_and_deleted() {
        let active = official_meta(&meta(Status::Approved, true, Some("looks fine")), true);
        assert_eq!(active.status, "active");
        assert_eq!(active.status_message, None);
        assert!(active.is_latest);
        assert_eq!(active.updated_at, Timestamp::from_millis(5_000));
        assert_eq!(active.published_at, Timestamp::from_millis(1_000));
        let long = "x".repeat(600);
        let gone = official_meta(&meta(Status::Revoked, true, Some(&long)), false);
        assert_eq!(gone.status, "deleted");
        let msg = gone.status_message.unwrap();
        assert_eq!(msg.chars().count(), MAX_STATUS_MESSAGE_CHARS);
        let body =
            serde_json::to_value(official_meta(&meta(Status::Deprecated, true, None), false))
                .unwrap();
        assert_eq!(
            body,
            json!({"status": "deprecated", "statusChangedAt": "1970-01-01T00:00:05.000Z",
                "publishedAt": "1970-01-01T00:00:01.000Z", "updatedAt": "1970-01-01T00:00:05.000Z",
                "isLatest": false})
        );
    }

    #[test]
    fn etags_change_with_everything_the_response_shows() {
        let m = meta(Status::Approved, true, None);
        let tag = |m: &VersionMeta, latest, mode| entry_etag(&record_etag(m), latest, mode);
        let base = tag(&m, true, Mode::Strict);
        assert_eq!(base, format!("\"{}.r2.latest.strict\"", "b".repeat(64)));
        assert_ne!(base, tag(&m, false, Mode::Strict));
        assert_ne!(base, tag(&m, true, Mode::Permissive));
        let mut later = m.clone();
        later.status.revision = 3;
        assert_ne!(base, tag(&later, true, Mode::Strict));
        let mut other = m.clone();
        other.digest = format!("sha256:{}", "c".repeat(64));
        assert_ne!(base, tag(&other, true, Mode::Strict));
    }

    #[test]
    fn views_render_once_per_tenant_and_digest() {
        let doc = json!({"name": "io.github.a/b", "version": "1.0.0", "title": "Bee",
            "signature": {"tools": [{"name": "t", "inputSchema": {"type": "object"},
                "annotations": [{"readOnlyHint": true}, {"readOnlyHint": false}]}]}});
        let stored = StoredVersion {
            server: "io.github.a/b".into(),
            meta: meta(Status::Approved, true, None),
            document: doc.to_string(),
        };
        let cache = ViewCache::default();
        let (a, b) = (
            TenantId::parse("acme").unwrap(),
            TenantId::parse("bee").unwrap(),
        );
        let limits = Limits::default();
        let first = cache.view(&a, &stored, &limits).unwrap();
        let server: Value = serde_json::from_str(first.server.get()).unwrap();
        assert_eq!(
            server,
            json!({"name": "io.github.a/b", "version": "1.0.0", "title": "Bee", "description": "Bee"})
        );
        let tools: Value = serde_json::from_str(first.tools.get()).unwrap();
        assert_eq!(tools[0]["name"], "t");
        assert_eq!(
            tools[0]["annotations"]["readOnlyHint"], false,
            "the worst case"
        );
        assert!(Arc::ptr_eq(
            &first,
            &cache.view(&a, &stored, &limits).unwrap()
        ));
        assert!(!Arc::ptr_eq(
            &first,
            &cache.view(&b, &stored, &limits).unwrap()
        ));
        let broken = StoredVersion {
            document: "{\"name\": 1}".into(),
            meta: VersionMeta {
                digest: format!("sha256:{}", "d".repeat(64)),
                ..stored.meta.clone()
            },
            ..stored
        };
        assert!(cache.view(&a, &broken, &limits).is_err());
    }

    #[test]
    fn list_etags_change_with_every_entry_and_the_next_page() {
        let e = |v: &str, latest: bool| Entry {
            key: "io.github.a/b".into(),
            server: "io.github.a/b".into(),
            meta: VersionMeta {
                version: v.into(),
                ..meta(Status::Approved, true, None)
            },
            is_latest: latest,
        };
        let strict = EnforcementModes {
            default: Mode::Strict,
            overrides: vec![],
        };
        let base = list_etag(&[e("1.0.0", true)], &strict, None);
        assert_eq!(base, list_etag(&[e("1.0.0", true)], &strict, None));
        assert_ne!(base, list_etag(&[e("1.0.0", false)], &strict, None));
        assert_ne!(
            base,
            list_etag(&[e("1.0.0", true), e("0.9.0", false)], &strict, None)
        );
        let advisory = EnforcementModes {
            default: Mode::Strict,
            overrides: vec![("IO.GITHUB.A/B".into(), Mode::Advisory)],
        };
        assert_ne!(base, list_etag(&[e("1.0.0", true)], &advisory, None));
        let next = ("io.github.a/b".to_owned(), "1.0.0".to_owned());
        assert_ne!(base, list_etag(&[e("1.0.0", true)], &strict, Some(&next)));
        let mut revised = e("1.0.0", true);
        revised.meta.status.revision += 1;
        assert_ne!(base, list_etag(&[revised], &strict, None));
        assert_ne!(base, list_etag(&[], &strict, None));
    }

    #[test]
    fn attestation_paths_encode_the_slash() {
        let t = TenantId::parse("acme").unwrap();
        assert_eq!(
            attestation_path(&t, "io.github.acme/files", "1.2.0"),
            "/v1/tenants/acme/servers/io.github.acme%2Ffiles/versions/1.2.0/attestation"
        );
    }

    #[test]
    fn newest_first_is_semver_precedence() {
        let mut v = vec!["1.2.0", "1.10.0", "1.10.0-rc.1", "0.9.0"];
        v.sort_by(|a, b| newest_first(a, b));
        assert_eq!(v, ["1.10.0", "1.10.0-rc.1", "1.2.0", "0.9.0"]);
    }
}
