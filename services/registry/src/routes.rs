//! Registry routes: publish, read, review, lifecycle, diff, verify,
//! attestations and import (DESIGN.md "HTTP API (v1)" → Registry).

use std::sync::Arc;

use async_trait::async_trait;
use axum::Json;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use signet_core::Mode;
use signet_core::card::{Limits, ServerCard};
use signet_core::error::ValidationErrors;
use signet_core::ids::{TenantId, Timestamp};
use signet_core::names::ServerName;
use signet_http::auth::Role;
use signet_http::body::read_value;
use signet_http::pagination::finish_page;
use signet_http::problem::{ApiError, FieldError, ProblemBody};
use signet_http::tenant::tenant_not_found;
use signet_http::{StrictJson, TenantScope};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::index::{EtagIndex, ServerIndex, document_etag, if_none_match, record_etag};
use crate::keys::{AttestationClaims, Keyring, jwks, sign_attestation};
use crate::model::{
    Action, NewVersion, PublishOutcome, Review, ServerRow, Status, StatusChange, StoredVersion,
    VersionMeta,
};
use crate::store::{RegistryStore, RegistryStoreError, ServerQuery};

/// What the registry needs to know about a tenant's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistryPolicy {
    /// Whether new versions wait for review.
    pub approval_required: bool,
    /// The enforcement mode for this server (tenant mode or server override).
    pub mode: Mode,
}

/// Tenant policies, as the registry sees them. The server implements this on
/// top of the tenancy store (service crates never depend on each other).
#[async_trait]
pub trait PolicySource: Send + Sync + 'static {
    /// The policy for `server_key` in `tenant`, or `None` when the tenant
    /// does not exist.
    async fn registry_policy(
        &self,
        tenant: &TenantId,
        server_key: &str,
    ) -> Result<Option<RegistryPolicy>, RegistryStoreError>;
}

/// What the registry routes need.
#[derive(Clone)]
pub struct RegistryState {
    /// The store.
    pub store: Arc<dyn RegistryStore>,
    /// Tenant policies.
    pub policies: Arc<dyn PolicySource>,
    /// Seals tenant attestation keys.
    pub keyring: Arc<Keyring>,
    /// Conditional-GET index.
    pub index: Arc<EtagIndex>,
    /// Document limits.
    pub limits: Limits,
}

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
}

fn now() -> Timestamp {
    Timestamp::from_millis(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0),
    )
}

/// Maps a store error to the HTTP edge, logging what the client must not see.
pub fn store_error(e: RegistryStoreError) -> ApiError {
    match e {
        RegistryStoreError::TenantNotFound => tenant_not_found(),
        RegistryStoreError::NotFound => version_not_found(),
        RegistryStoreError::Stale => ApiError::new(
            StatusCode::CONFLICT,
            "concurrent_change",
            "Changed concurrently",
        )
        .detail("the version's status changed while this request ran; read it again and retry"),
        RegistryStoreError::Unavailable(cause) => {
            tracing::error!(error = %cause, "database unavailable");
            ApiError::unavailable("the database is unavailable; retry later")
        }
        RegistryStoreError::Other(cause) => {
            tracing::error!(error = %cause, "database error");
            ApiError::internal()
        }
    }
}

fn version_not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "version_not_found",
        "Version not found",
    )
    .detail("no such server version in this tenant")
}

fn server_not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "server_not_found",
        "Server not found",
    )
    .detail("no such server in this tenant")
}

/// Converts core validation errors: limits → 413, the rest → 422.
pub fn validation_error(errors: ValidationErrors) -> ApiError {
    let too_large = errors.exceeds_limits();
    let fields: Vec<FieldError> = errors
        .errors
        .into_iter()
        .map(|e| FieldError {
            pointer: e.pointer,
            code: e.code.to_owned(),
            message: e.message,
        })
        .collect();
    if too_large {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "document_too_large",
            "Document exceeds the configured limits",
        )
        .detail("the document exceeds a configured limit (size, tools, nesting or possibilities)")
        .with_errors(fields)
    } else {
        ApiError::validation(fields)
    }
}

/// The server key of a path segment; an invalid name cannot exist, so 404.
fn server_key(raw: &str) -> Result<ServerName, ApiError> {
    ServerName::parse(raw).map_err(|_| server_not_found())
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

fn record(stored: &StoredVersion, reviews: Vec<Review>) -> Result<VersionRecord, ApiError> {
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

fn etag_value(tag: &str) -> HeaderValue {
    HeaderValue::from_str(tag).unwrap_or_else(|_| HeaderValue::from_static("\"invalid\""))
}

fn not_modified(tag: &str, extra: &[(header::HeaderName, HeaderValue)]) -> Response {
    let mut r = StatusCode::NOT_MODIFIED.into_response();
    r.headers_mut().insert(header::ETAG, etag_value(tag));
    for (k, v) in extra {
        r.headers_mut().insert(k.clone(), v.clone());
    }
    r
}

fn inm(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
}

async fn server_index(
    st: &RegistryState,
    tenant: &TenantId,
    key: &str,
) -> Result<Arc<ServerIndex>, ApiError> {
    if let Some(idx) = st.index.get(tenant, key) {
        return Ok(idx);
    }
    let versions = st.store.versions(tenant, key).await.map_err(store_error)?;
    let idx = Arc::new(ServerIndex::build(&versions));
    st.index.put(tenant, key, idx.clone());
    Ok(idx)
}

/// Resolves `latest` to an exact version.
async fn resolve_version(
    st: &RegistryState,
    tenant: &TenantId,
    key: &str,
    version: &str,
) -> Result<String, ApiError> {
    if version != "latest" {
        return Ok(version.to_owned());
    }
    let idx = server_index(st, tenant, key).await?;
    match &idx.latest {
        Some(v) => Ok(v.clone()),
        None if idx.entries.is_empty() => Err(server_not_found()),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "no_trusted_version",
            "No trusted version",
        )
        .detail("this server has no approved version, so `latest` resolves to nothing")),
    }
}

async fn load(
    st: &RegistryState,
    tenant: &TenantId,
    key: &str,
    version: &str,
) -> Result<StoredVersion, ApiError> {
    let exact = resolve_version(st, tenant, key, version).await?;
    st.store
        .version(tenant, key, &exact)
        .await
        .map_err(store_error)?
        .ok_or_else(version_not_found)
}

// ---------------------------------------------------------------- publish

/// Publishes a document after validating it; shared by publish and import.
async fn publish_document(
    st: &RegistryState,
    scope: &TenantScope,
    doc: Value,
    path: Option<(&str, &str)>,
    event: &str,
) -> Result<Response, ApiError> {
    let card = ServerCard::from_owned(doc, &st.limits).map_err(validation_error)?;
    if let Some((server, version)) = path {
        let mut errors = Vec::new();
        let same_server = ServerName::parse(server).is_ok_and(|s| s == card.name);
        if !same_server {
            errors.push(FieldError {
                pointer: "/name".into(),
                code: "path_mismatch".into(),
                message: format!(
                    "the document names server {:?} but the path says {server:?}",
                    card.name.as_str()
                ),
            });
        }
        if card.version.to_string() != version {
            errors.push(FieldError {
                pointer: "/version".into(),
                code: "path_mismatch".into(),
                message: format!(
                    "the document has version {:?} but the path says {version:?}",
                    card.version.to_string()
                ),
            });
        }
        if !errors.is_empty() {
            return Err(ApiError::validation(errors));
        }
    }
    let tenant = scope.tenant();
    let key = card.name.canonical().to_owned();
    let policy = st
        .policies
        .registry_policy(tenant, &key)
        .await
        .map_err(store_error)?
        .ok_or_else(tenant_not_found)?;
    let document = std::str::from_utf8(card.canonical()).map_err(|_| ApiError::internal())?;
    let version = card.version.to_string();
    let new = NewVersion {
        server_key: &key,
        server_display: card.name.as_str(),
        version: &version,
        digest: card.digest(),
        document,
        title: card.title.as_deref(),
        description: card.description.as_deref(),
        published_by: scope.actor(),
        at: now(),
        initial: if policy.approval_required {
            Status::Pending
        } else {
            Status::Approved
        },
        event,
        event_data: json!({
            "digest": card.digest(),
            "tools": card.signature.tools.len(),
            "approval_required": policy.approval_required,
        }),
    };
    let outcome = st.store.publish(tenant, &new).await.map_err(store_error)?;
    st.index.evict(tenant, &key);
    let (status, stored) = match outcome {
        PublishOutcome::Created(v) => (StatusCode::CREATED, v),
        PublishOutcome::Existing(v) => (StatusCode::OK, v),
        PublishOutcome::Conflict { existing_digest } => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "version_exists",
                "Version exists with different content",
            )
            .detail(format!(
                "{} {version} is already published with other content; versions are immutable, publish a new version",
                card.name
            ))
            .with("existing_digest", existing_digest)
            .with("submitted_digest", card.digest()));
        }
    };
    let reviews = if status == StatusCode::CREATED {
        Vec::new()
    } else {
        st.store
            .reviews(tenant, &key, &version)
            .await
            .map_err(store_error)?
    };
    let tag = record_etag(&stored.meta);
    let body = record(&stored, reviews)?;
    let location = format!(
        "/v1/tenants/{tenant}/servers/{}/versions/{version}",
        card.name.as_str().replace('/', "%2F")
    );
    let mut resp = (status, Json(body)).into_response();
    resp.headers_mut().insert(header::ETAG, etag_value(&tag));
    if let Ok(v) = HeaderValue::from_str(&location) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    Ok(resp)
}

/// Publish a version (roles `publisher`, `admin`).
///
/// The body is the server card with its `signature`. Signet validates it,
/// canonicalises it (RFC 8785) and stores it under its digest. Versions are
/// immutable: the same content again is `200` with the same body, different
/// content is `409` with both digests. New versions start `pending`, or
/// `approved` when the tenant's policy requires no review.
#[utoipa::path(
    put,
    path = "/v1/tenants/{tenant}/servers/{server}/versions/{version}",
    tag = "registry",
    operation_id = "publish_version",
    params(VersionPath),
    request_body(content = Object, description = "Server card with its signature", example = json!({
        "name": "io.github.acme/files", "version": "1.0.0", "description": "Files in an Acme workspace",
        "signature": {"tools": [{"name": "read_file", "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true}}], "prompts": [], "resources": [], "resourceTemplates": []}})),
    security(("bearer" = [])),
    responses(
        (status = 201, description = "Published", body = VersionRecord, headers(("ETag" = String), ("Location" = String))),
        (status = 200, description = "Identical content was already published", body = VersionRecord),
        (status = 400, description = "Malformed JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "Missing or invalid token", body = ProblemBody, content_type = "application/problem+json"),
        (status = 403, description = "Role missing", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such tenant", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "Version exists with other content", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "Over the configured limits", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Invalid document (every error with its pointer)", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn publish_version(
    State(st): State<RegistryState>,
    scope: TenantScope,
    Path(p): Path<VersionPath>,
    req: Request,
) -> Result<Response, ApiError> {
    scope.require_any(&[Role::Publisher, Role::Admin])?;
    let doc = read_value(req, &()).await?;
    publish_document(
        &st,
        &scope,
        doc,
        Some((&p.server, &p.version)),
        "version.published",
    )
    .await
}

/// Import an official-registry `server.json` (roles `publisher`, `admin`).
///
/// Creates the server and a version whose signature is empty, ready for a
/// capture to fill in a later version. Accepts the registry's `server.json`
/// formats; `$schema` is dropped, every other member is kept. Errors point
/// at the offending `server.json` field.
#[utoipa::path(
    post,
    path = "/v1/tenants/{tenant}/import/server-json",
    tag = "registry",
    operation_id = "import_server_json",
    params(("tenant" = String, Path, description = "Tenant id")),
    request_body(content = Object, description = "An official-registry server.json", example = json!({
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-09-29/server.schema.json",
        "name": "io.github.acme/files", "version": "1.0.0", "description": "Files in an Acme workspace",
        "remotes": [{"type": "streamable-http", "url": "https://mcp.acme.example/files"}]})),
    security(("bearer" = [])),
    responses(
        (status = 201, description = "Imported", body = VersionRecord),
        (status = 200, description = "Identical content was already imported", body = VersionRecord),
        (status = 409, description = "Version exists with other content", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Invalid server.json", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn import_server_json(
    State(st): State<RegistryState>,
    scope: TenantScope,
    req: Request,
) -> Result<Response, ApiError> {
    scope.require_any(&[Role::Publisher, Role::Admin])?;
    let doc = read_value(req, &()).await?;
    let Value::Object(mut map) = doc else {
        return Err(ApiError::validation(vec![FieldError {
            pointer: "".into(),
            code: "wrong_type".into(),
            message: "a server.json document is a JSON object".into(),
        }]));
    };
    map.remove("$schema");
    // The 2025-07-09 format carried the version in `version_detail`.
    if !map.contains_key("version")
        && let Some(v) = map
            .get("version_detail")
            .and_then(|d| d.get("version"))
            .cloned()
    {
        map.insert("version".into(), v);
    }
    if map.contains_key("signature") {
        return Err(ApiError::validation(vec![FieldError {
            pointer: "/signature".into(),
            code: "unexpected_signature".into(),
            message: "server.json carries no signature; publish a signed card with PUT instead"
                .into(),
        }]));
    }
    let mut sig = Map::new();
    for k in ["tools", "prompts", "resources", "resourceTemplates"] {
        sig.insert(k.into(), Value::Array(Vec::new()));
    }
    map.insert("signature".into(), Value::Object(sig));
    publish_document(&st, &scope, Value::Object(map), None, "version.imported").await
}

// ---------------------------------------------------------------- reads

/// `?q=&status=&limit=&cursor=`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ServerListQuery {
    /// Case-insensitive substring of name, title or description.
    pub q: Option<String>,
    /// Only servers with a version in this status.
    pub status: Option<Status>,
    /// Page size, 1 to 100 (default 30).
    pub limit: Option<u32>,
    /// The `next_cursor` of the previous page.
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
    let page = signet_http::pagination::PageQuery {
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
    versions.sort_by(|a, b| {
        match (
            semver::Version::parse(&a.version),
            semver::Version::parse(&b.version),
        ) {
            (Ok(x), Ok(y)) => y.cmp(&x),
            _ => b.version.cmp(&a.version),
        }
    });
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
/// from an in-process index without a database round trip.
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
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    scope.require_member()?;
    let name = server_key(&p.server)?;
    let key = name.canonical();
    if let Some(inm) = inm(&headers) {
        let idx = server_index(&st, scope.tenant(), key).await?;
        if let Some(tag) = idx.etag(&p.version)
            && if_none_match(inm, tag)
        {
            return Ok(not_modified(tag, &[]));
        }
    }
    let stored = load(&st, scope.tenant(), key, &p.version).await?;
    let reviews = st
        .store
        .reviews(scope.tenant(), key, &stored.meta.version)
        .await
        .map_err(store_error)?;
    let tag = record_etag(&stored.meta);
    let mut resp = Json(record(&stored, reviews)?).into_response();
    resp.headers_mut().insert(header::ETAG, etag_value(&tag));
    Ok(resp)
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
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(if exact {
            "public, max-age=31536000, immutable"
        } else {
            "no-cache"
        }),
    );
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
            if exact {
                r.headers_mut().insert(
                    header::CACHE_CONTROL,
                    HeaderValue::from_static("public, max-age=31536000, immutable"),
                );
            }
            return Ok(r);
        }
    }
    let stored = load(st, scope.tenant(), key, &p.version).await?;
    Ok(document_response(&stored, exact, extra))
}

/// The immutable published document alone (any role in the tenant).
///
/// The body is the RFC 8785 canonical form: its SHA-256 is the digest. An
/// exact version is cacheable forever (`immutable`).
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
    let tools = signet_core::ops::reduce_document(&doc).map_err(|e| {
        tracing::error!(error = %e, "stored document no longer validates");
        ApiError::internal()
    })?;
    let mut resp = Json(tools).into_response();
    resp.headers_mut().insert(header::ETAG, etag_value(&tag));
    Ok(resp)
}

// ---------------------------------------------------------------- review

/// Body of a review.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"decision": "approve", "note": "Checked the diff against 1.2.0"}))]
pub struct ReviewBody {
    /// `approve` or `reject`.
    pub decision: Decision,
    /// Why (at most 2,000 characters).
    #[serde(default)]
    pub note: Option<String>,
}

/// A review decision.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Trust this version.
    Approve,
    /// Refuse it.
    Reject,
}

/// Body of a lifecycle change.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"status": "revoked", "reason": "Leaked credentials in the remote URL"}))]
pub struct StatusBody {
    /// `deprecated` or `revoked`.
    pub status: Lifecycle,
    /// Why (required, at most 2,000 characters).
    pub reason: String,
}

/// A lifecycle target.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Lifecycle {
    /// No longer offered as `latest`.
    Deprecated,
    /// Withdrawn for good.
    Revoked,
}

fn check_note(pointer: &str, note: Option<&str>, required: bool) -> Result<(), ApiError> {
    let bad = |message: &str| {
        ApiError::validation(vec![FieldError {
            pointer: pointer.into(),
            code: "invalid_value".into(),
            message: message.into(),
        }])
    };
    match note {
        None if required => Err(bad("required")),
        Some(n) if required && n.trim().is_empty() => Err(bad("must not be empty")),
        Some(n) if n.chars().count() > 2000 => Err(bad("at most 2,000 characters")),
        _ => Ok(()),
    }
}

async fn transition(
    st: &RegistryState,
    scope: &TenantScope,
    p: &VersionPath,
    action: Action,
    note: Option<&str>,
) -> Result<Response, ApiError> {
    let name = server_key(&p.server)?;
    let key = name.canonical();
    if p.version == "latest" {
        return Err(ApiError::validation(vec![FieldError {
            pointer: "?version".into(),
            code: "exact_version_required".into(),
            message: "reviews and status changes name an exact version, not `latest`".into(),
        }]));
    }
    let stored = load(st, scope.tenant(), key, &p.version).await?;
    if action == Action::Approve && stored.meta.published_by == scope.actor() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "separation_of_duties",
            "Cannot approve your own version",
        )
        .detail("the publisher of a version cannot approve it; ask another reviewer"));
    }
    let from = stored.meta.status.status;
    let Some(to) = action.apply(from) else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "invalid_transition",
            "Status change not allowed",
        )
        .detail(format!(
            "a {} version cannot be {}",
            from.as_str(),
            action.event_kind().trim_start_matches("version.")
        ))
        .with("current_status", from.as_str()));
    };
    let change = StatusChange {
        server_key: key,
        version: &stored.meta.version,
        expected_revision: stored.meta.status.revision,
        action,
        from,
        to,
        note,
        actor: scope.actor(),
        at: now(),
    };
    let result = st.store.change_status(scope.tenant(), &change).await;
    st.index.evict(scope.tenant(), key);
    result.map_err(store_error)?;
    let stored = load(st, scope.tenant(), key, &stored.meta.version).await?;
    let reviews = st
        .store
        .reviews(scope.tenant(), key, &stored.meta.version)
        .await
        .map_err(store_error)?;
    let tag = record_etag(&stored.meta);
    let mut resp = Json(record(&stored, reviews)?).into_response();
    resp.headers_mut().insert(header::ETAG, etag_value(&tag));
    Ok(resp)
}

/// Approve or reject a version (roles `reviewer`, `admin`).
///
/// The publisher of a version cannot approve it (`403 separation_of_duties`).
#[utoipa::path(
    post,
    path = "/v1/tenants/{tenant}/servers/{server}/versions/{version}/review",
    tag = "registry",
    operation_id = "review_version",
    params(VersionPath),
    request_body = ReviewBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The updated record", body = VersionRecord),
        (status = 403, description = "Role missing, or approving your own version", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such version", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "Not allowed from the current status", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Invalid body", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn review_version(
    State(st): State<RegistryState>,
    scope: TenantScope,
    Path(p): Path<VersionPath>,
    StrictJson(body): StrictJson<ReviewBody>,
) -> Result<Response, ApiError> {
    scope.require_any(&[Role::Reviewer, Role::Admin])?;
    check_note("/note", body.note.as_deref(), false)?;
    let action = match body.decision {
        Decision::Approve => Action::Approve,
        Decision::Reject => Action::Reject,
    };
    transition(&st, &scope, &p, action, body.note.as_deref()).await
}

/// Deprecate or revoke a version (roles `admin`, `reviewer`).
#[utoipa::path(
    post,
    path = "/v1/tenants/{tenant}/servers/{server}/versions/{version}/status",
    tag = "registry",
    operation_id = "set_version_status",
    params(VersionPath),
    request_body = StatusBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The updated record", body = VersionRecord),
        (status = 403, description = "Role missing", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such version", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "Not allowed from the current status", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Invalid body", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn set_version_status(
    State(st): State<RegistryState>,
    scope: TenantScope,
    Path(p): Path<VersionPath>,
    StrictJson(body): StrictJson<StatusBody>,
) -> Result<Response, ApiError> {
    scope.require_any(&[Role::Admin, Role::Reviewer])?;
    check_note("/reason", Some(&body.reason), true)?;
    let action = match body.status {
        Lifecycle::Deprecated => Action::Deprecate,
        Lifecycle::Revoked => Action::Revoke,
    };
    transition(&st, &scope, &p, action, Some(&body.reason)).await
}

// ---------------------------------------------------------------- diff, verify

/// `?from=&to=`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct DiffQuery {
    /// The older version (or `latest`).
    pub from: String,
    /// The newer version (or `latest`).
    pub to: String,
}

/// The capability diff between two versions (any role in the tenant).
///
/// Every change is classified `escalation` (something less safe became
/// possible), `reduction` or `neutral`; `classification` is the most serious.
#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/servers/{server}/diff",
    tag = "registry",
    operation_id = "diff_versions",
    params(ServerPath, DiffQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "`{from, to, classification, changes}`", content_type = "application/json", body = Object),
        (status = 400, description = "Missing from/to", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such version", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn diff_versions(
    State(st): State<RegistryState>,
    scope: TenantScope,
    Path(p): Path<ServerPath>,
    Query(q): Query<DiffQuery>,
) -> Result<Json<Value>, ApiError> {
    scope.require_member()?;
    let name = server_key(&p.server)?;
    let key = name.canonical();
    let a = load(&st, scope.tenant(), key, &q.from).await?;
    let b = load(&st, scope.tenant(), key, &q.to).await?;
    let parse = |s: &StoredVersion| {
        serde_json::from_str::<Value>(&s.document).map_err(|_| ApiError::internal())
    };
    let diff = signet_core::ops::diff(&parse(&a)?, &parse(&b)?).map_err(|e| {
        tracing::error!(error = %e, "stored document no longer validates");
        ApiError::internal()
    })?;
    let mut out = serde_json::to_value(&diff).map_err(|_| ApiError::internal())?;
    out["from"] = json!({"version": a.meta.version, "digest": a.meta.digest});
    out["to"] = json!({"version": b.meta.version, "digest": b.meta.digest});
    Ok(Json(out))
}

/// `?mode=`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ModeQuery {
    /// `strict`, `permissive` or `advisory`; default: the server's policy.
    pub mode: Option<String>,
}

fn parse_mode(s: &str, pointer: &str) -> Result<Mode, ApiError> {
    s.parse().map_err(|_| {
        ApiError::validation(vec![FieldError {
            pointer: pointer.into(),
            code: "invalid_value".into(),
            message: "mode is strict, permissive or advisory".into(),
        }])
    })
}

/// Check what a client observed against a version (any role in the tenant).
///
/// Body: any of `tools`, `prompts`, `resources`, `resourceTemplates` as a
/// client received them (or a whole `tools/list` result), optional `mode`.
/// The mode defaults to the server's override, else the tenant's.
#[utoipa::path(
    post,
    path = "/v1/tenants/{tenant}/servers/{server}/versions/{version}/verify",
    tag = "registry",
    operation_id = "verify_version",
    params(VersionPath, ModeQuery),
    request_body(content = Object, example = json!({"tools": [{"name": "read_file", "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": true}}], "mode": "strict"})),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "`{conformant, blocking, mode, violations, notices}`", content_type = "application/json", body = Object),
        (status = 404, description = "No such version", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Malformed observation", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn verify_version(
    State(st): State<RegistryState>,
    scope: TenantScope,
    Path(p): Path<VersionPath>,
    Query(q): Query<ModeQuery>,
    req: Request,
) -> Result<Json<Value>, ApiError> {
    scope.require_member()?;
    let mut observed = read_value(req, &()).await?;
    let body_mode = match observed.as_object_mut().and_then(|m| m.remove("mode")) {
        None => None,
        Some(Value::String(s)) => Some(parse_mode(&s, "/mode")?),
        Some(_) => return Err(parse_mode("", "/mode").unwrap_err()),
    };
    let name = server_key(&p.server)?;
    let key = name.canonical();
    let mode = match (q.mode.as_deref(), body_mode) {
        (Some(m), _) => parse_mode(m, "?mode")?,
        (None, Some(m)) => m,
        (None, None) => {
            st.policies
                .registry_policy(scope.tenant(), key)
                .await
                .map_err(store_error)?
                .ok_or_else(tenant_not_found)?
                .mode
        }
    };
    let stored = load(&st, scope.tenant(), key, &p.version).await?;
    let doc: Value = serde_json::from_str(&stored.document).map_err(|_| ApiError::internal())?;
    let card = ServerCard::from_value(&doc, &Limits::default()).map_err(|e| {
        tracing::error!(error = %e, "stored document no longer validates");
        ApiError::internal()
    })?;
    let report = signet_core::ops::verify_card(&card, &observed, mode).map_err(validation_error)?;
    let mut out = serde_json::to_value(&report).map_err(|_| ApiError::internal())?;
    out["version"] = json!(stored.meta.version);
    out["digest"] = json!(stored.meta.digest);
    Ok(Json(out))
}

// ---------------------------------------------------------------- attestations

/// The tenant's attestation key, created (and sealed) if it does not exist
/// yet. Called when a tenant is created, and again on first use as a
/// fallback.
pub async fn tenant_key(
    st: &RegistryState,
    tenant: &TenantId,
) -> Result<crate::model::StoredKey, ApiError> {
    if let Some(k) = st.store.tenant_key(tenant).await.map_err(store_error)? {
        return Ok(k);
    }
    let fresh = st.keyring.generate_tenant_key(tenant, now()).map_err(|e| {
        tracing::error!(error = %e, "attestation key generation failed");
        ApiError::internal()
    })?;
    st.store
        .insert_tenant_key(tenant, &fresh)
        .await
        .map_err(store_error)
}

/// A signed attestation of a version (any role in the tenant).
///
/// A compact JWS (EdDSA) by the tenant's key over `{iss, tenant, server,
/// version, digest, status, approved_by, approved_at, iat}`; verify it
/// offline with the tenant's `jwks.json`.
#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/servers/{server}/versions/{version}/attestation",
    tag = "registry",
    operation_id = "get_attestation",
    params(VersionPath),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Compact JWS", content_type = "application/jwt", body = String),
        (status = 404, description = "No such version", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn get_attestation(
    State(st): State<RegistryState>,
    scope: TenantScope,
    Path(p): Path<VersionPath>,
) -> Result<Response, ApiError> {
    scope.require_member()?;
    let name = server_key(&p.server)?;
    let stored = load(&st, scope.tenant(), name.canonical(), &p.version).await?;
    let key = tenant_key(&st, scope.tenant()).await?;
    let claims = AttestationClaims {
        iss: format!("signet:tenant:{}", scope.tenant()),
        tenant: scope.tenant().to_string(),
        server: stored.server.clone(),
        version: stored.meta.version.clone(),
        digest: stored.meta.digest.clone(),
        status: stored.meta.status.status.as_str().to_owned(),
        approved_by: stored.meta.status.approved_by.clone(),
        approved_at: stored.meta.status.approved_at.map(|t| t.seconds()),
        iat: now().seconds(),
    };
    let jws = sign_attestation(&st.keyring, scope.tenant(), &key, &claims).map_err(|e| {
        tracing::error!(error = %e, "attestation signing failed");
        ApiError::internal()
    })?;
    let mut resp = jws.into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/jwt"),
    );
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(resp)
}

/// The tenant's attestation verification keys (any role in the tenant).
#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/jwks.json",
    tag = "registry",
    operation_id = "get_jwks",
    params(("tenant" = String, Path, description = "Tenant id")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "JWKS", content_type = "application/json", body = Object),
        (status = 404, description = "No such tenant", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn get_jwks(
    State(st): State<RegistryState>,
    scope: TenantScope,
) -> Result<Response, ApiError> {
    scope.require_member()?;
    st.policies
        .registry_policy(scope.tenant(), "")
        .await
        .map_err(store_error)?
        .ok_or_else(tenant_not_found)?;
    let key = tenant_key(&st, scope.tenant()).await?;
    let mut resp = Json(jwks(&key)).into_response();
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=300"),
    );
    Ok(resp)
}
