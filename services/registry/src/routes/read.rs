//! Reads: the server list, a server summary and a version record.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use pinfold_core::ids::Timestamp;
use pinfold_http::TenantScope;
use pinfold_http::pagination::finish_page;
use pinfold_http::problem::{ApiError, FieldError, ProblemBody};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::error::{server_key, server_not_found, store_error};
use crate::model::{ServerRow, Status, VersionMeta};
use crate::routes::conditional::{IfNoneMatch, not_modified_with};
use crate::routes::paths::{ServerPath, VersionPath};
use crate::routes::record::{VersionRecord, record_response};
use crate::service::{load_record, server_index};
use crate::state::RegistryState;
use crate::store::ServerQuery;

// ---------------------------------------------------------------- reads

/// `?q=&status=&limit=&cursor=`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ServerListQuery {
    /// Case-insensitive substring of name, title or description.
    #[param(max_length = 200)]
    pub q: Option<String>,
    /// Only servers with a version in this status.
    pub status: Option<Status>,
    /// Page size, 1 to 100 (default 30).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    /// The `next_cursor` of the previous page.
    #[param(min_length = 1, max_length = 1024, pattern = "^[A-Za-z0-9_-]+$")]
    pub cursor: Option<String>,
}

/// A page of servers.
#[derive(Debug, Serialize, ToSchema)]
pub struct ServerPage {
    /// Servers ordered by name.
    pub items: Vec<ServerRow>,
    /// Pass as `cursor` for the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

/// List servers (any role in the tenant).
#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/servers",
    tag = "registry",
    operation_id = "list_servers",
    params(("tenant" = String, Path, description = "Tenant id"), ServerListQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "A page of servers", body = ServerPage),
        (status = 404, description = "No such tenant", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Bad query", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn list_servers(
    State(st): State<RegistryState>,
    scope: TenantScope,
    Query(q): Query<ServerListQuery>,
) -> Result<Json<ServerPage>, ApiError> {
    scope.require_member()?;
    let page = pinfold_http::pagination::PageQuery {
        limit: q.limit,
        cursor: q.cursor.clone(),
    };
    let limit = page.limit()?;
    let after = page.cursor()?;
    if let Some(text) = &q.q
        && text.chars().count() > 200
    {
        return Err(ApiError::validation(vec![FieldError {
            pointer: "?q".into(),
            code: "too_long".into(),
            message: "q is at most 200 characters".into(),
        }]));
    }
    let query = ServerQuery {
        q: q.q.filter(|s| !s.is_empty()),
        status: q.status,
        after,
        limit: limit + 1,
    };
    let mut rows = st
        .store
        .servers(scope.tenant(), &query)
        .await
        .map_err(store_error)?;
    let next_cursor = finish_page(&mut rows, limit, |(key, _)| key.clone());
    Ok(Json(ServerPage {
        items: rows.into_iter().map(|(_, r)| r).collect(),
        next_cursor,
    }))
}

/// One version in a server summary.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionSummary {
    /// Version.
    pub version: String,
    /// Digest.
    pub digest: String,
    /// Status.
    pub status: Status,
    /// When published.
    #[schema(value_type = String, format = DateTime)]
    pub published_at: Timestamp,
    /// When the status last changed.
    #[schema(value_type = String, format = DateTime)]
    pub status_changed_at: Timestamp,
}

/// A server with its versions.
#[derive(Debug, Serialize, ToSchema)]
pub struct ServerSummary {
    /// The server.
    #[serde(flatten)]
    pub server: ServerRow,
    /// The highest approved version, if any.
    pub latest: Option<String>,
    /// Versions, highest semver first.
    pub versions: Vec<VersionSummary>,
}

fn semver_desc(versions: &mut [VersionMeta]) {
    versions.sort_by(|a, b| crate::index::semver_cmp(&b.version, &a.version));
}

/// A server's summary with all its versions (any role in the tenant).
#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/servers/{server}",
    tag = "registry",
    operation_id = "get_server",
    params(ServerPath),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The server", body = ServerSummary),
        (status = 404, description = "No such server", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn get_server(
    State(st): State<RegistryState>,
    scope: TenantScope,
    Path(p): Path<ServerPath>,
) -> Result<Json<ServerSummary>, ApiError> {
    scope.require_member()?;
    let name = server_key(&p.server)?;
    let row = st
        .store
        .server(scope.tenant(), name.canonical())
        .await
        .map_err(store_error)?
        .ok_or_else(server_not_found)?;
    let mut versions = st
        .store
        .versions(scope.tenant(), name.canonical())
        .await
        .map_err(store_error)?;
    semver_desc(&mut versions);
    let latest = crate::index::latest(&versions).map(|v| v.version.clone());
    Ok(Json(ServerSummary {
        server: row,
        latest,
        versions: versions
            .into_iter()
            .map(|v| VersionSummary {
                version: v.version,
                digest: v.digest,
                status: v.status.status,
                published_at: v.published_at,
                status_changed_at: v.status.changed_at,
            })
            .collect(),
    }))
}

/// A version record (any role in the tenant). `{version}` may be `latest`.
///
/// Strong `ETag` (digest and status revision); `If-None-Match` answers `304`
/// from an in-process index without a database round trip. The server
/// answers the same `304` before routing when everything it needs is
/// already in memory ([`crate::index::not_modified`]).
#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/servers/{server}/versions/{version}",
    tag = "registry",
    operation_id = "get_version",
    params(VersionPath, ("If-None-Match" = Option<String>, Header, description = "ETags you hold")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The record", body = VersionRecord, headers(("ETag" = String))),
        (status = 304, description = "Not modified"),
        (status = 404, description = "No such version", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn get_version(
    State(st): State<RegistryState>,
    scope: TenantScope,
    Path(p): Path<VersionPath>,
    IfNoneMatch(inm): IfNoneMatch,
) -> Result<Response, ApiError> {
    scope.require_member()?;
    let name = server_key(&p.server)?;
    let key = name.canonical();
    if let Some(inm) = inm.as_ref().and_then(|v| v.to_str().ok()) {
        let idx = server_index(&st, scope.tenant(), key).await?;
        if let Some(etag) = crate::index::still_current(&idx, &p.version, inm) {
            return Ok(not_modified_with(etag));
        }
    }
    let (stored, reviews) = load_record(&st, scope.tenant(), key, &p.version).await?;
    record_response(&stored, reviews)
}
