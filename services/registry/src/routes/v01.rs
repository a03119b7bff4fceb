//! The official MCP registry's read API (`/v0.1`) over a tenant's approved
//! versions: a private subregistry at `/t/{tenant}` (the view and the use
//! cases are in [`crate::subregistry`]).
//!
//! Reads need the `reader` (or `admin`) role. Not-found answers use the
//! official API's body, `{"error": "..."}` (`application/json`), for an
//! unknown server or version and for another tenant's (or a missing)
//! subregistry alike; authentication (401), role (403) and query (400)
//! failures are problem+json like the rest of Pinfold. Every `200` carries a
//! strong `ETag`; `If-None-Match` answers `304`. Answers are `private,
//! no-cache` with `Vary: Authorization`: a status can change at any time
//! and a shared cache must never hand one tenant's answer to another.

use std::collections::HashMap;

use pinfold_core::ids::TenantId;
use pinfold_core::names::ServerName;
use pinfold_http::pagination::{DEFAULT_LIMIT, MAX_LIMIT, decode_cursor, encode_cursor};
use pinfold_http::problem::NotAProblem;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pinfold_core::ids::Timestamp;
use pinfold_http::TenantScope;
use pinfold_http::auth::Role;
use pinfold_http::cpu::offload;
use pinfold_http::problem::{ApiError, FieldError, ProblemBody};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::error::{server_key, store_error};
use crate::index::{if_none_match, record_etag};
use crate::model::Status;
use crate::policy::EnforcementModes;
use crate::routes::conditional::{IfNoneMatch, etag_value, not_modified};
use crate::service::server_index;
use crate::state::RegistryState;
use crate::subregistry::listing::{self, Entry, ListRequest, VersionFilter};
use crate::subregistry::response::{self, ListMetadata, NotFoundBody, ServerList, ServerResponse};
use crate::subregistry::{etag, views, visibility};

/// The official 404 message for a server or version.
const SERVER_NOT_FOUND: &str = "Server not found";
/// The official 404 message for a subregistry (tenant) that is absent or
/// not the caller's: identical in both cases.
const NOT_FOUND: &str = "Not found";

/// A `/v0.1` failure: a problem, or the official `{"error"}` 404.
#[derive(Debug)]
pub enum V01Error {
    /// Rendered as problem+json.
    Problem(ApiError),
    /// 404 with the official body.
    NotFound(&'static str),
}

impl From<ApiError> for V01Error {
    /// Every 404 of the registry (an unknown tenant, server or version)
    /// takes the official shape; anything else stays a problem.
    fn from(e: ApiError) -> Self {
        if e.status == StatusCode::NOT_FOUND {
            V01Error::NotFound(if e.code == "tenant_not_found" {
                NOT_FOUND
            } else {
                SERVER_NOT_FOUND
            })
        } else {
            V01Error::Problem(e)
        }
    }
}

impl IntoResponse for V01Error {
    fn into_response(self) -> Response {
        match self {
            V01Error::Problem(e) => e.into_response(),
            V01Error::NotFound(message) => {
                let mut r = (
                    StatusCode::NOT_FOUND,
                    Json(NotFoundBody {
                        error: message.to_owned(),
                    }),
                )
                    .into_response();
                no_cache(r.headers_mut());
                r.extensions_mut().insert(NotAProblem);
                r
            }
        }
    }
}

/// Admits a request to a tenant's subregistry: the tenant boundary (404
/// in the official shape), then the role (403).
fn admit(scope: Result<TenantScope, ApiError>) -> Result<TenantScope, V01Error> {
    let scope = scope?;
    scope.require_any(&[Role::Reader, Role::Admin])?;
    Ok(scope)
}

/// The tenant's enforcement modes; a tenant that does not exist (a token
/// outliving its tenant) has no subregistry.
async fn tenant_modes(
    st: &RegistryState,
    scope: &TenantScope,
) -> Result<EnforcementModes, V01Error> {
    views::modes(st, scope.tenant())
        .await?
        .ok_or(V01Error::NotFound(NOT_FOUND))
}

fn no_cache(h: &mut HeaderMap) {
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-cache"),
    );
    h.insert(header::VARY, HeaderValue::from_static("Authorization"));
}

/// `304` when the caller holds `tag`.
fn not_modified_if(inm: Option<&HeaderValue>, tag: &str) -> Option<Response> {
    let held = inm.and_then(|v| v.to_str().ok())?;
    if_none_match(held, tag).then(|| {
        let mut r = not_modified(tag, &[]);
        no_cache(r.headers_mut());
        r
    })
}

/// `200` with a JSON `body` and its `ETag`.
fn respond(body: Vec<u8>, tag: &str) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::ETAG, etag_value(tag));
    no_cache(h);
    r
}

// ---------------------------------------------------------------- query parameters

/// 400 `invalid_query` naming the parameter.
fn bad_query(param: &str, code: &str, message: impl Into<String>) -> ApiError {
    let message = message.into();
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "invalid_query",
        "Invalid query parameter",
    )
    .detail(message.clone())
    .with_errors(vec![FieldError {
        pointer: format!("?{param}"),
        code: code.into(),
        message,
    }])
}

/// The query parameters as a map, refusing parameters the route does not
/// take (a misspelt filter must not silently return everything) and
/// repeated ones.
fn query_map<'a>(
    pairs: &'a [(String, String)],
    allowed: &[&str],
) -> Result<HashMap<&'a str, &'a str>, ApiError> {
    let mut map = HashMap::new();
    for (k, v) in pairs {
        if !allowed.contains(&k.as_str()) {
            let takes = if allowed.is_empty() {
                "this route takes no query parameters".to_owned()
            } else {
                format!("this route takes {}", allowed.join(", "))
            };
            return Err(bad_query(
                k,
                "unknown_parameter",
                format!("unknown query parameter {k:?}; {takes}"),
            ));
        }
        if map.insert(k.as_str(), v.as_str()).is_some() {
            return Err(bad_query(
                k,
                "repeated_parameter",
                format!("{k} is given more than once"),
            ));
        }
    }
    Ok(map)
}

fn parse_limit(raw: Option<&str>) -> Result<u32, ApiError> {
    let Some(raw) = raw else {
        return Ok(DEFAULT_LIMIT);
    };
    match raw.parse::<u32>() {
        Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
        _ => Err(bad_query(
            "limit",
            "out_of_range",
            format!("limit must be an integer from 1 to {MAX_LIMIT}, got {raw:?}"),
        )),
    }
}

fn parse_bool(param: &str, raw: Option<&str>) -> Result<bool, ApiError> {
    match raw {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(bad_query(
            param,
            "invalid_value",
            format!("{param} must be true or false, got {other:?}"),
        )),
    }
}

/// A cursor holds the `(server key, version)` a page ended at.
fn cursor_for(key: &str, version: &str) -> String {
    encode_cursor(&format!("{key}\n{version}"))
}

fn parse_cursor(raw: Option<&str>) -> Result<Option<(String, String)>, ApiError> {
    let Some(raw) = raw else { return Ok(None) };
    decode_cursor(raw)
        .and_then(|text| {
            let (key, version) = text.split_once('\n')?;
            let canonical = ServerName::parse(key).ok()?;
            (canonical.canonical() == key && !version.is_empty() && version.len() <= 255)
                .then(|| (key.to_owned(), version.to_owned()))
        })
        .map(Some)
        .ok_or_else(|| {
            bad_query(
                "cursor",
                "invalid_cursor",
                "cursor is not one this server issued (pass metadata.nextCursor as it came)",
            )
        })
}

fn parse_since(raw: Option<&str>) -> Result<Option<Timestamp>, ApiError> {
    let Some(raw) = raw else { return Ok(None) };
    let at = time::OffsetDateTime::parse(raw, &time::format_description::well_known::Rfc3339)
        .map_err(|_| {
            bad_query(
                "updated_since",
                "invalid_timestamp",
                format!(
                    "updated_since must be an RFC 3339 date-time such as 2025-01-31T12:00:00Z \
                     (encode a + offset as %2B), got {raw:?}"
                ),
            )
        })?;
    let millis = at.unix_timestamp_nanos() / 1_000_000;
    let millis = i64::try_from(millis).map_err(|_| {
        bad_query(
            "updated_since",
            "invalid_timestamp",
            "updated_since is out of range",
        )
    })?;
    Ok(Some(Timestamp::from_millis(millis)))
}

fn parse_version(raw: Option<&str>) -> Result<VersionFilter, ApiError> {
    match raw {
        None => Ok(VersionFilter::All),
        Some("latest") => Ok(VersionFilter::Latest),
        Some(v) if !v.is_empty() && v.len() <= 255 => Ok(VersionFilter::Exact(v.to_owned())),
        Some(_) => Err(bad_query(
            "version",
            "invalid_value",
            "version must be `latest` or an exact version of 1 to 255 characters",
        )),
    }
}

fn parse_search(raw: Option<&str>) -> Result<Option<String>, ApiError> {
    match raw {
        Some(s) if s.chars().count() > listing::MAX_SEARCH_CHARS => Err(bad_query(
            "search",
            "too_long",
            format!("search is at most {} characters", listing::MAX_SEARCH_CHARS),
        )),
        Some(s) if !s.is_empty() => Ok(Some(s.to_owned())),
        _ => Ok(None),
    }
}

/// The query of `GET /t/{tenant}/v0.1/servers` (as the official API
/// defines it).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SubregistryListQuery {
    /// `metadata.nextCursor` of the previous page (opaque).
    #[param(min_length = 1, max_length = 1024, pattern = "^[A-Za-z0-9_-]+$")]
    pub cursor: Option<String>,
    /// Page size, 1 to 100 (default 30).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    /// Case-insensitive substring of the server name.
    #[param(max_length = 200)]
    pub search: Option<String>,
    /// An RFC 3339 date-time: only versions updated strictly after it;
    /// deleted versions are then always included (`include_deleted` is
    /// implied), so that a mirror learns about deletions.
    #[param(format = DateTime)]
    pub updated_since: Option<String>,
    /// `latest` (each server's latest version) or an exact version.
    #[param(min_length = 1, max_length = 255)]
    pub version: Option<String>,
    /// Include deleted (revoked) versions (default `false`).
    pub include_deleted: Option<bool>,
}

const LIST_PARAMS: &[&str] = &[
    "cursor",
    "limit",
    "search",
    "updated_since",
    "version",
    "include_deleted",
];

impl ListRequest {
    fn from_query(pairs: &[(String, String)]) -> Result<ListRequest, ApiError> {
        let q = query_map(pairs, LIST_PARAMS)?;
        Ok(ListRequest {
            limit: parse_limit(q.get("limit").copied())?,
            after: parse_cursor(q.get("cursor").copied())?,
            search: parse_search(q.get("search").copied())?,
            updated_since: parse_since(q.get("updated_since").copied())?,
            version: parse_version(q.get("version").copied())?,
            include_deleted: parse_bool("include_deleted", q.get("include_deleted").copied())?,
        })
    }
}

/// The query of `GET .../versions`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SubregistryVersionsQuery {
    /// Include deleted (revoked) versions (default `false`).
    pub include_deleted: Option<bool>,
}

/// Path of a server in a subregistry.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path, rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
pub struct SubregistryServerPath {
    /// Tenant id.
    pub tenant: String,
    /// Server name, URL-encoded (`io.github.acme%2Ffiles`).
    pub server_name: String,
}

/// Path of a version in a subregistry.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path, rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
pub struct SubregistryVersionPath {
    /// Tenant id.
    pub tenant: String,
    /// Server name, URL-encoded (`io.github.acme%2Ffiles`).
    pub server_name: String,
    /// An exact version, or `latest`.
    pub version: String,
}

// ---------------------------------------------------------------- rendering

/// A `ServerList` of `entries`: `304` when the caller holds its `ETag`
/// (nothing rendered), else the body, from the documents' cached views,
/// serialized on the CPU pool.
async fn list_response(
    st: &RegistryState,
    tenant: &TenantId,
    modes: EnforcementModes,
    entries: Vec<Entry>,
    next: Option<(String, String)>,
    inm: Option<&HeaderValue>,
) -> Result<Response, ApiError> {
    let tag = etag::list_etag(&entries, &modes, next.as_ref());
    if let Some(r) = not_modified_if(inm, &tag) {
        return Ok(r);
    }
    let views = views::views(st, tenant, &entries).await?;
    let tenant = tenant.clone();
    let body = offload(move || {
        let servers: Vec<ServerResponse> = entries
            .iter()
            .zip(&views)
            .map(|(e, v)| response::response(e, v, &tenant, &modes))
            .collect();
        let list = ServerList {
            metadata: ListMetadata {
                next_cursor: next.map(|(k, v)| cursor_for(&k, &v)),
                count: servers.len(),
            },
            servers,
        };
        serde_json::to_vec(&list).map_err(|_| ApiError::internal())
    })
    .await??;
    Ok(respond(body, &tag))
}

// ---------------------------------------------------------------- handlers

/// List the servers of a tenant's subregistry (role `reader` or `admin`).
///
/// The official MCP registry's `GET /v0.1/servers`: one entry per visible
/// version (approved `active`, `deprecated`, and with `include_deleted`
/// revoked `deleted`; pending and rejected versions never appear), ordered
/// by server name, then version, in pages of `limit` (default 30, at most
/// 100) joined by `metadata.nextCursor`. `server` is the `server.json` part
/// of the published card; Pinfold's digest, attestation, enforcement mode,
/// status and worst-case tools are under `_meta["io.github.pinfold/pinfold"]`.
#[utoipa::path(
    get,
    path = "/t/{tenant}/v0.1/servers",
    tag = "subregistry",
    operation_id = "list_subregistry_servers",
    params(("tenant" = String, Path, description = "Tenant id"), SubregistryListQuery,
        ("If-None-Match" = Option<String>, Header, description = "ETags you hold")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "A page of server versions", body = ServerList, headers(("ETag" = String))),
        (status = 304, description = "Not modified"),
        (status = 400, description = "Bad query parameter", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "Missing or invalid token", body = ProblemBody, content_type = "application/problem+json"),
        (status = 403, description = "Role missing", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such subregistry", body = NotFoundBody),
    )
)]
pub async fn list_subregistry_servers(
    State(st): State<RegistryState>,
    scope: Result<TenantScope, ApiError>,
    Query(pairs): Query<Vec<(String, String)>>,
    IfNoneMatch(inm): IfNoneMatch,
) -> Result<Response, V01Error> {
    let scope = admit(scope)?;
    let req = ListRequest::from_query(&pairs)?;
    let modes = tenant_modes(&st, &scope).await?;
    let page = listing::list(&st, scope.tenant(), &req).await?;
    Ok(list_response(
        &st,
        scope.tenant(),
        modes,
        page.entries,
        page.next,
        inm.as_ref(),
    )
    .await?)
}

/// Every version of one server in a subregistry, newest first (role
/// `reader` or `admin`).
///
/// The official `GET /v0.1/servers/{serverName}/versions`; deleted
/// (revoked) versions only with `include_deleted`. At most the 1,000
/// newest versions are listed; older ones stay readable by their exact
/// version. A server with nothing to show is `404`.
#[utoipa::path(
    get,
    path = "/t/{tenant}/v0.1/servers/{serverName}/versions",
    tag = "subregistry",
    operation_id = "list_subregistry_versions",
    params(SubregistryServerPath, SubregistryVersionsQuery,
        ("If-None-Match" = Option<String>, Header, description = "ETags you hold")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The server's versions, newest first", body = ServerList, headers(("ETag" = String))),
        (status = 304, description = "Not modified"),
        (status = 400, description = "Bad query parameter", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "Missing or invalid token", body = ProblemBody, content_type = "application/problem+json"),
        (status = 403, description = "Role missing", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such server", body = NotFoundBody),
    )
)]
pub async fn list_subregistry_versions(
    State(st): State<RegistryState>,
    scope: Result<TenantScope, ApiError>,
    Path(p): Path<SubregistryServerPath>,
    Query(pairs): Query<Vec<(String, String)>>,
    IfNoneMatch(inm): IfNoneMatch,
) -> Result<Response, V01Error> {
    let scope = admit(scope)?;
    let q = query_map(&pairs, &["include_deleted"])?;
    let include_deleted = parse_bool("include_deleted", q.get("include_deleted").copied())?;
    let name = server_key(&p.server_name)?;
    let modes = tenant_modes(&st, &scope).await?;
    let entries =
        listing::versions_of(&st, scope.tenant(), name.canonical(), include_deleted).await?;
    if entries.is_empty() {
        return Err(V01Error::NotFound(SERVER_NOT_FOUND));
    }
    Ok(list_response(&st, scope.tenant(), modes, entries, None, inm.as_ref()).await?)
}

/// One version of a server in a subregistry (role `reader` or `admin`).
///
/// The official `GET /v0.1/servers/{serverName}/versions/{version}`;
/// `latest` is the registry's latest (the highest approved version by
/// semver precedence, releases before pre-releases). An exact version that
/// was revoked after its approval is still answered, with status
/// `deleted`, so that a client pinned to it learns it was withdrawn.
/// `If-None-Match` is answered from the registry's in-process index for
/// an approved or deprecated version.
#[utoipa::path(
    get,
    path = "/t/{tenant}/v0.1/servers/{serverName}/versions/{version}",
    tag = "subregistry",
    operation_id = "get_subregistry_version",
    params(SubregistryVersionPath,
        ("If-None-Match" = Option<String>, Header, description = "ETags you hold")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The version", body = ServerResponse, headers(("ETag" = String))),
        (status = 304, description = "Not modified"),
        (status = 400, description = "Bad query parameter", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "Missing or invalid token", body = ProblemBody, content_type = "application/problem+json"),
        (status = 403, description = "Role missing", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such server or version", body = NotFoundBody),
    )
)]
pub async fn get_subregistry_version(
    State(st): State<RegistryState>,
    scope: Result<TenantScope, ApiError>,
    Path(p): Path<SubregistryVersionPath>,
    Query(pairs): Query<Vec<(String, String)>>,
    IfNoneMatch(inm): IfNoneMatch,
) -> Result<Response, V01Error> {
    let scope = admit(scope)?;
    query_map(&pairs, &[])?;
    let tenant = scope.tenant();
    let name = server_key(&p.server_name)?;
    let key = name.canonical();
    let modes = tenant_modes(&st, &scope).await?;
    let mode = modes.mode_for(key);
    let idx = server_index(&st, tenant, key).await?;
    let exact = if p.version == "latest" {
        idx.latest.clone()
    } else {
        Some(p.version.clone())
    };
    let Some((exact, entry)) = exact.and_then(|v| idx.entries.get(&v).map(|e| (v, e))) else {
        return Err(V01Error::NotFound(SERVER_NOT_FOUND));
    };
    let is_latest = idx.latest.as_deref() == Some(exact.as_str());
    match entry.status {
        Status::Pending | Status::Rejected => return Err(V01Error::NotFound(SERVER_NOT_FOUND)),
        // Approved and deprecated versions are visible: the index alone
        // answers a conditional request. (A revoked one is visible only if
        // it was approved first, which the index does not record.)
        Status::Approved | Status::Deprecated => {
            let tag = etag::entry_etag(&entry.record_etag, is_latest, mode);
            if let Some(r) = not_modified_if(inm.as_ref(), &tag) {
                return Ok(r);
            }
        }
        Status::Revoked => {}
    }
    let stored = st
        .store
        .version(tenant, key, &exact)
        .await
        .map_err(store_error)?
        .filter(|s| visibility::visible(&s.meta))
        .ok_or(V01Error::NotFound(SERVER_NOT_FOUND))?;
    let tag = etag::entry_etag(&record_etag(&stored.meta), is_latest, mode);
    if let Some(r) = not_modified_if(inm.as_ref(), &tag) {
        return Ok(r);
    }
    let tenant = tenant.clone();
    let limits = st.limits.clone();
    let views = st.views.clone();
    let entry = Entry {
        key: key.to_owned(),
        server: stored.server.clone(),
        meta: stored.meta.clone(),
        is_latest,
    };
    let body = offload(move || {
        let view = views.view(&tenant, &stored, &limits)?;
        let resp = response::response(&entry, &view, &tenant, &modes);
        serde_json::to_vec(&resp).map_err(|_| ApiError::internal())
    })
    .await??;
    Ok(respond(body, &tag))
}
