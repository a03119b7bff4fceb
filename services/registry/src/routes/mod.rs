//! The registry's HTTP handlers, one module per concern (`v01` is the
//! official-registry-compatible subregistry), and what they
//! share: path parameters, the version record view and conditional-GET
//! helpers (docs/REGISTRY.md walks through the API).

use axum::Json;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pinfold_core::Mode;
use pinfold_core::card::ServerCard;
use pinfold_core::ids::Timestamp;
use pinfold_http::auth::Role;
use pinfold_http::body::{read_json_bytes, read_value};
use pinfold_http::cpu::offload;
use pinfold_http::pagination::finish_page;
use pinfold_http::problem::{ApiError, FieldError, ProblemBody};
use pinfold_http::tenant::tenant_not_found;
use pinfold_http::{StrictJson, TenantScope};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::*;
use crate::index::{document_etag, if_none_match, record_etag};
use crate::keys::{AttestationClaims, jwks, sign_attestation};
use crate::model::{Action, Decision, Review, ServerRow, Status, StoredVersion, VersionMeta};
use crate::service::*;
use crate::state::*;
use crate::store::ServerQuery;

mod attest;
mod compare;
mod documents;
mod publish;
mod read;
mod review;
mod v01;

pub use attest::*;
pub use compare::*;
pub use documents::*;
pub use publish::*;
pub use read::*;
pub use review::*;
pub use v01::*;

/// The registry routes, with their OpenAPI description.
pub fn router() -> OpenApiRouter<RegistryState> {
    OpenApiRouter::new()
        .routes(routes!(list_servers))
        .routes(routes!(get_server))
        .routes(routes!(publish_version, get_version))
        .routes(routes!(get_signature))
        .routes(routes!(get_tools))
        .routes(routes!(get_card, preflight_card))
        .routes(routes!(review_version))
        .routes(routes!(set_version_status))
        .routes(routes!(diff_versions))
        .routes(routes!(verify_version))
        .routes(routes!(get_attestation))
        .routes(routes!(get_jwks))
        .routes(routes!(import_server_json))
        .routes(routes!(list_subregistry_servers))
        .routes(routes!(list_subregistry_versions))
        .routes(routes!(get_subregistry_version))
}

/// Path of a server.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ServerPath {
    /// Tenant id.
    pub tenant: String,
    /// Server name, URL-encoded (`io.github.acme%2Ffiles`).
    pub server: String,
}

/// Path of a version.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct VersionPath {
    /// Tenant id.
    pub tenant: String,
    /// Server name, URL-encoded (`io.github.acme%2Ffiles`).
    pub server: String,
    /// Exact semantic version, or `latest` (highest approved) on reads.
    pub version: String,
}

/// A version record.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionRecord {
    /// Server name.
    pub server: String,
    /// Version.
    pub version: String,
    /// `sha256:<hex>` of the RFC 8785 canonical document.
    pub digest: String,
    /// Trust status.
    pub status: Status,
    /// The published document (server card with its `signature`), in its
    /// canonical form, passed through without re-parsing.
    #[schema(value_type = Object)]
    pub card: Box<serde_json::value::RawValue>,
    /// Publisher (token `sub`).
    pub published_by: String,
    /// When it was published.
    #[schema(value_type = String, format = DateTime)]
    pub published_at: Timestamp,
    /// When the status last changed.
    #[schema(value_type = String, format = DateTime)]
    pub status_changed_at: Timestamp,
    /// Note or reason of the last status change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_reason: Option<String>,
    /// Who approved it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    /// When it was approved.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub approved_at: Option<Timestamp>,
    /// Review history, oldest first.
    pub reviews: Vec<Review>,
}

pub(crate) fn record(
    stored: &StoredVersion,
    reviews: Vec<Review>,
) -> Result<VersionRecord, ApiError> {
    let card = serde_json::value::RawValue::from_string(stored.document.clone()).map_err(|e| {
        tracing::error!(error = %e, "stored document is not JSON");
        ApiError::internal()
    })?;
    let m = &stored.meta;
    Ok(VersionRecord {
        server: stored.server.clone(),
        version: m.version.clone(),
        digest: m.digest.clone(),
        status: m.status.status,
        card,
        published_by: m.published_by.clone(),
        published_at: m.published_at,
        status_changed_at: m.status.changed_at,
        status_reason: m.status.reason.clone(),
        approved_by: m.status.approved_by.clone(),
        approved_at: m.status.approved_at,
        reviews,
    })
}

/// The record as a `200` answer with its `ETag`.
pub(crate) fn record_response(
    stored: &StoredVersion,
    reviews: Vec<Review>,
) -> Result<Response, ApiError> {
    let tag = record_etag(&stored.meta);
    let mut resp = Json(record(stored, reviews)?).into_response();
    resp.headers_mut().insert(header::ETAG, etag_value(&tag));
    Ok(resp)
}

pub(crate) fn etag_value(tag: &str) -> HeaderValue {
    HeaderValue::from_str(tag).unwrap_or_else(|_| HeaderValue::from_static("\"invalid\""))
}

pub(crate) fn not_modified(tag: &str, extra: &[(header::HeaderName, HeaderValue)]) -> Response {
    let mut r = StatusCode::NOT_MODIFIED.into_response();
    r.headers_mut().insert(header::ETAG, etag_value(tag));
    for (k, v) in extra {
        r.headers_mut().insert(k.clone(), v.clone());
    }
    r
}

/// `304` with a prepared `ETag` header value.
pub(crate) fn not_modified_with(etag: HeaderValue) -> Response {
    let mut r = StatusCode::NOT_MODIFIED.into_response();
    r.headers_mut().insert(header::ETAG, etag);
    r
}

/// The `If-None-Match` header of a request, if any: only that value is
/// copied (a `HeaderMap` extractor would copy every header).
pub struct IfNoneMatch(pub Option<HeaderValue>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for IfNoneMatch {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(IfNoneMatch(
            parts.headers.get(header::IF_NONE_MATCH).cloned(),
        ))
    }
}

pub(crate) fn inm(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
}
