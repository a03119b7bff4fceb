//! `GET .../servers/{server}/versions/{version}/scopes`: the envelope.

use axum::Json;
use axum::extract::{Path, State};
use pinfold_http::TenantScope;
use pinfold_http::problem::{ApiError, ProblemBody};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::planning::{EnvelopeResponse, envelope};
use crate::state::ScopeState;

/// Path of a version.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ScopesPath {
    /// Tenant id.
    pub tenant: String,
    /// Server name, URL-encoded (`io.github.acme%2Ffiles`).
    pub server: String,
    /// Exact semantic version, or `latest` (highest approved).
    pub version: String,
}

/// The scope envelope of a version (any role): per tool, the alternatives
/// it declares (SEP-1488 `securitySchemes`, or its `_meta` copy) and every
/// scope any of them needs; in total, every scope any tool could require.
/// A ceiling for reviewers, not a plan.
#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/servers/{server}/versions/{version}/scopes",
    tag = "scope",
    operation_id = "get_scopes",
    params(ScopesPath),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The envelope", body = EnvelopeResponse),
        (status = 404, description = "No such version", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn get_scopes(
    State(st): State<ScopeState>,
    scope: TenantScope,
    Path(p): Path<ScopesPath>,
) -> Result<Json<EnvelopeResponse>, ApiError> {
    scope.require_member()?;
    let v = st
        .signatures
        .tools(scope.tenant(), &p.server, &p.version)
        .await?;
    Ok(Json(envelope(&v.server, &v.version, &v.tools)))
}
