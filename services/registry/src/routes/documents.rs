//! The immutable document views: the signature, the card (with CORS) and
//! the worst-case `tools/list`.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pinfold_http::TenantScope;
use pinfold_http::problem::{ApiError, ProblemBody};
use serde_json::Value;

use crate::error::server_key;
use crate::index::{document_etag, if_none_match};
use crate::model::StoredVersion;
use crate::routes::conditional::{etag_value, inm, not_modified};
use crate::routes::paths::VersionPath;
use crate::service::{load, server_index};
use crate::state::RegistryState;

/// Caching headers of a document answer. Every document is read with a
/// bearer token, so it is `private`: a shared cache (CDN, corporate proxy)
/// must never store one tenant's document and hand it to another client. An
/// exact version never changes, so a private cache may keep it for a year
/// (`immutable`); `latest` moves, so it is revalidated every time.
/// `Vary: Authorization` tells any cache that the answer depends on who asks.
fn cache_headers(h: &mut HeaderMap, exact: bool) {
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(if exact {
            "private, max-age=31536000, immutable"
        } else {
            "private, no-cache"
        }),
    );
    h.insert(header::VARY, HeaderValue::from_static("Authorization"));
}

fn document_response(
    stored: &StoredVersion,
    exact: bool,
    extra: &[(header::HeaderName, HeaderValue)],
) -> Response {
    let mut resp = stored.document.clone().into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(
        header::ETAG,
        etag_value(&document_etag(&stored.meta.digest)),
    );
    cache_headers(h, exact);
    for (k, v) in extra {
        h.insert(k.clone(), v.clone());
    }
    resp
}

async fn conditional_document(
    st: &RegistryState,
    scope: &TenantScope,
    p: &VersionPath,
    headers: &HeaderMap,
    extra: &[(header::HeaderName, HeaderValue)],
) -> Result<Response, ApiError> {
    scope.require_member()?;
    let name = server_key(&p.server)?;
    let key = name.canonical();
    let exact = p.version != "latest";
    if let Some(inm) = inm(headers) {
        let idx = server_index(st, scope.tenant(), key).await?;
        let version = if exact {
            Some(p.version.as_str())
        } else {
            idx.latest.as_deref()
        };
        if let Some(entry) = version.and_then(|v| idx.entries.get(v))
            && if_none_match(inm, &document_etag(&entry.digest))
        {
            let mut r = not_modified(&document_etag(&entry.digest), extra);
            cache_headers(r.headers_mut(), exact);
            return Ok(r);
        }
    }
    let stored = load(st, scope.tenant(), key, &p.version).await?;
    Ok(document_response(&stored, exact, extra))
}

/// The immutable published document alone (any role in the tenant).
///
/// The body is the RFC 8785 canonical form: its SHA-256 is the digest. An
/// exact version is cacheable forever by the client itself (`private,
/// immutable`, `Vary: Authorization`), never by a shared cache.
#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/servers/{server}/versions/{version}/signature",
    tag = "registry",
    operation_id = "get_signature",
    params(VersionPath, ("If-None-Match" = Option<String>, Header, description = "ETags you hold")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The canonical document", content_type = "application/json", body = Object,
            headers(("ETag" = String), ("Cache-Control" = String))),
        (status = 304, description = "Not modified"),
        (status = 404, description = "No such version", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn get_signature(
    State(st): State<RegistryState>,
    scope: TenantScope,
    Path(p): Path<VersionPath>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    conditional_document(&st, &scope, &p, &headers, &[]).await
}

fn cors() -> [(header::HeaderName, HeaderValue); 2] {
    [
        (
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        ),
        (
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("ETag"),
        ),
    ]
}

/// The server card as a client would fetch `.well-known/mcp.json` (any role;
/// CORS enabled).
#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/servers/{server}/versions/{version}/card",
    tag = "registry",
    operation_id = "get_card",
    params(VersionPath, ("If-None-Match" = Option<String>, Header, description = "ETags you hold")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The server card", content_type = "application/json", body = Object,
            headers(("ETag" = String), ("Access-Control-Allow-Origin" = String))),
        (status = 304, description = "Not modified"),
        (status = 404, description = "No such version", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn get_card(
    State(st): State<RegistryState>,
    scope: TenantScope,
    Path(p): Path<VersionPath>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    conditional_document(&st, &scope, &p, &headers, &cors()).await
}

/// CORS preflight for the card.
#[utoipa::path(
    options,
    path = "/v1/tenants/{tenant}/servers/{server}/versions/{version}/card",
    tag = "registry",
    operation_id = "preflight_card",
    params(VersionPath),
    responses((status = 204, description = "CORS preflight answer"))
)]
pub async fn preflight_card() -> Response {
    let mut r = StatusCode::NO_CONTENT.into_response();
    let h = r.headers_mut();
    for (k, v) in cors() {
        h.insert(k, v);
    }
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, OPTIONS"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("Authorization, If-None-Match"),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    r
}

/// The worst-case `tools/list` result a client would see (any role).
///
/// Each tool's annotation possibilities are reduced to the least safe value
/// of every hint (SEP-2091 "Reference Implementation").
#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/servers/{server}/versions/{version}/tools",
    tag = "registry",
    operation_id = "get_tools",
    params(VersionPath),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "`{\"tools\": [...]}`", content_type = "application/json", body = Object, headers(("ETag" = String))),
        (status = 304, description = "Not modified"),
        (status = 404, description = "No such version", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn get_tools(
    State(st): State<RegistryState>,
    scope: TenantScope,
    Path(p): Path<VersionPath>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    scope.require_member()?;
    let name = server_key(&p.server)?;
    let stored = load(&st, scope.tenant(), name.canonical(), &p.version).await?;
    let hex = stored.meta.digest.trim_start_matches("sha256:");
    let tag = format!("\"{hex}.tools\"");
    if inm(&headers).is_some_and(|h| if_none_match(h, &tag)) {
        return Ok(not_modified(&tag, &[]));
    }
    let doc: Value = serde_json::from_str(&stored.document).map_err(|_| ApiError::internal())?;
    let tools = pinfold_core::ops::reduce_document(&doc).map_err(|e| {
        tracing::error!(error = %e, "stored document no longer validates");
        ApiError::internal()
    })?;
    let mut resp = Json(tools).into_response();
    resp.headers_mut().insert(header::ETAG, etag_value(&tag));
    Ok(resp)
}
