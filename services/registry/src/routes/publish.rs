//! Publishing: a signed server card, or an official-registry `server.json`.

use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pinfold_http::TenantScope;
use pinfold_http::auth::Role;
use pinfold_http::body::{read_json_bytes, read_value};
use pinfold_http::problem::{ApiError, FieldError, ProblemBody};
use serde_json::{Map, Value};

use crate::model::{Review, StoredVersion};
use crate::routes::paths::VersionPath;
use crate::routes::record::{VersionRecord, record_response};
use crate::routes::server_json::ServerJsonImport;
use crate::service::{Published, publish, publish_body};
use crate::state::RegistryState;

/// Publish a version (roles `publisher`, `admin`).
///
/// The body is the server card with its `signature`. Pinfold validates it,
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
    let body = read_json_bytes(req, &()).await?;
    publish_response(
        &scope,
        publish_body(
            &st,
            &scope,
            body,
            Some((&p.server, &p.version)),
            "version.published",
        )
        .await?,
    )
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
    request_body(content = ServerJsonImport, description = "An official-registry server.json"),
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
    let outcome = publish(&st, &scope, Value::Object(map), None, "version.imported").await?;
    publish_response(&scope, outcome)
}

/// `201` (created) or `200` (identical), the record, its `ETag` and its
/// `Location`.
fn publish_response(
    scope: &TenantScope,
    (published, stored, reviews): (Published, StoredVersion, Vec<Review>),
) -> Result<Response, ApiError> {
    let status = match published {
        Published::Created => StatusCode::CREATED,
        Published::Existing => StatusCode::OK,
    };
    let location = format!(
        "/v1/tenants/{}/servers/{}/versions/{}",
        scope.tenant(),
        stored.server.replace('/', "%2F"),
        stored.meta.version
    );
    let mut resp = (status, record_response(&stored, reviews)?).into_response();
    if let Ok(v) = HeaderValue::from_str(&location) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    Ok(resp)
}
