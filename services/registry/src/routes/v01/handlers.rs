//! The `/v0.1` handlers: the server list, one server's versions and one
//! version, each admitted to the tenant's subregistry first.

use axum::extract::{Path, Query, State};
use axum::response::Response;
use pinfold_http::TenantScope;
use pinfold_http::auth::Role;
use pinfold_http::cpu::offload;
use pinfold_http::problem::{ApiError, ProblemBody};

use crate::error::{server_key, store_error};
use crate::index::record_etag;
use crate::model::Status;
use crate::policy::EnforcementModes;
use crate::routes::conditional::IfNoneMatch;
use crate::routes::v01::answer::{list_response, not_modified_if, respond};
use crate::routes::v01::error::{NOT_FOUND, SERVER_NOT_FOUND, V01Error};
use crate::routes::v01::params::{
    SubregistryListQuery, SubregistryServerPath, SubregistryVersionPath, SubregistryVersionsQuery,
    parse_bool, query_map,
};
use crate::service::server_index;
use crate::state::RegistryState;
use crate::subregistry::listing::{self, Entry, ListRequest};
use crate::subregistry::response::{self, NotFoundBody, ServerList, ServerResponse};
use crate::subregistry::{etag, views, visibility};

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
