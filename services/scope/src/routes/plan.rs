//! `POST /v1/tenants/{tenant}/scopes/plan`: a least-privilege plan.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use signet_http::problem::{ApiError, ProblemBody};
use signet_http::{StrictJson, TenantScope};

use crate::planning::{PlanBody, PlanResponse, check_body, plan_version};
use crate::state::ScopeState;

/// Plans the least privilege for calls (any role): one alternative per
/// call so that the closure of requested ∪ granted scopes under the
/// provider's hierarchy is smallest (`docs/SEMANTICS.md`, section 8), the
/// scopes still to request, and the `insufficient_scope` challenge as an
/// HTTP `WWW-Authenticate` value (MCP authorization) and as
/// `_meta["mcp/www_authenticate"]` for a tool result.
#[utoipa::path(
    post,
    path = "/v1/tenants/{tenant}/scopes/plan",
    tag = "scope",
    operation_id = "plan_scopes",
    params(("tenant" = String, Path, description = "Tenant id")),
    request_body = PlanBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The plan", body = PlanResponse),
        (status = 404, description = "No such server, version or provider", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Unknown tool, bad scope, no provider for the server", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn plan_scopes(
    State(st): State<ScopeState>,
    scope: TenantScope,
    StrictJson(body): StrictJson<PlanBody>,
) -> Result<Json<PlanResponse>, ApiError> {
    scope.require_member()?;
    check_body(&body)?;
    let tenant = scope.tenant();
    let server = body.server.as_deref().unwrap_or_default();
    let version = body.version.as_deref().unwrap_or("latest");
    let v = st.signatures.tools(tenant, server, version).await?;
    let name = match &body.provider {
        Some(p) => p.clone(),
        None => {
            let mut names = st.providers.providers_for_server(tenant, &v.server).await?;
            match names.len() {
                1 => names.remove(0),
                0 => {
                    return Err(ApiError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "provider_required",
                        "No provider for this server",
                    )
                    .detail(format!(
                        "no provider lists {} in its resources; name one with `provider`",
                        v.server
                    )));
                }
                _ => {
                    return Err(ApiError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "provider_required",
                        "Several providers for this server",
                    )
                    .detail(format!(
                        "providers {} list {}; name one with `provider`",
                        names.join(", "),
                        v.server
                    )));
                }
            }
        }
    };
    let provider = st.providers.provider(tenant, &name).await?;
    let plan = signet_http::cpu::offload(move || {
        plan_version(&provider, &v.server, &v.version, &v.tools, &body)
    })
    .await??;
    Ok(Json(plan))
}
