//! Attestations of a version and the tenant key set that verifies them.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use pinfold_http::TenantScope;
use pinfold_http::problem::{ApiError, ProblemBody};
use pinfold_http::tenant::tenant_not_found;

use crate::error::{server_key, store_error};
use crate::keys::jwks;
use crate::routes::paths::VersionPath;
use crate::service::{attestation, load, tenant_key};
use crate::state::RegistryState;

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
    let jws = attestation(&st, &scope, &stored).await?;
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
