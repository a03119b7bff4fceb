//! `POST /v1/tenants/{tenant}/scopes/plan`: a least-privilege plan.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use pinfold_core::ids::TenantId;
use pinfold_http::problem::{ApiError, FieldError, ProblemBody};
use pinfold_http::{StrictJson, TenantScope};

use serde_json::{Map, Value};

use crate::planning::{PlanBody, PlanResponse, check_body, plan_session, plan_version};
use crate::providers::ProviderView;
use crate::state::ScopeState;

/// Plans the least privilege for calls (any role): one alternative per
/// call so that the closure of requested ∪ granted scopes under the
/// provider's hierarchy is smallest (`docs/SEMANTICS.md`, section 8), the
/// scopes still to request, and the `insufficient_scope` challenge as an
/// HTTP `WWW-Authenticate` value (MCP authorization) and as
/// `_meta["mcp/www_authenticate"]` for a tool result.
///
/// With `session` instead of `server`/`version`, every call is first
/// resolved through that resolve session (its cache, else its upstream),
/// so `securitySchemes` a resolution narrows for the call's arguments are
/// the ones planned over (SEP-1862, "Dynamic Security Schemes"); the
/// server and version are the session's pinned ones. The session must be
/// the caller's own (another caller's or an unknown one is 404, an expired
/// one 410), and the resolve service must run in the same process (else
/// 422 `session_plans_unavailable`).
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
        (status = 404, description = "No such server, version, provider or session (for this caller)", body = ProblemBody, content_type = "application/problem+json"),
        (status = 410, description = "The session expired, or its version was revoked", body = ProblemBody, content_type = "application/problem+json"),
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
    if let Some(session) = &body.session {
        let Some(sessions) = &st.sessions else {
            return Err(ApiError::validation(vec![FieldError {
                pointer: "/session".into(),
                code: "session_plans_unavailable".into(),
                message: "the resolve service does not run in this process, so plans through a \
                    session are unavailable here; give `server` and `version`, or send the \
                    request to a process serving both the scope and resolve services"
                    .into(),
            }]));
        };
        let calls: Vec<(String, Value)> = body
            .calls
            .iter()
            .map(|c| {
                (
                    c.name.clone(),
                    c.arguments
                        .clone()
                        .unwrap_or_else(|| Value::Object(Map::new())),
                )
            })
            .collect();
        let resolved = sessions.resolve(&scope, session, &calls).await?;
        let provider =
            provider_for(&st, tenant, body.provider.as_deref(), &resolved.server).await?;
        let plan =
            pinfold_http::cpu::offload(move || plan_session(&provider, &resolved, &body)).await??;
        return Ok(Json(plan));
    }
    let server = body.server.as_deref().unwrap_or_default();
    let version = body.version.as_deref().unwrap_or("latest");
    let v = st.signatures.tools(tenant, server, version).await?;
    let provider = provider_for(&st, tenant, body.provider.as_deref(), &v.server).await?;
    let plan = pinfold_http::cpu::offload(move || {
        plan_version(&provider, &v.server, &v.version, &v.tools, &body)
    })
    .await??;
    Ok(Json(plan))
}

/// The provider named in the body, else the only one listing `server` in
/// its `resources`.
async fn provider_for(
    st: &ScopeState,
    tenant: &TenantId,
    named: Option<&str>,
    server: &str,
) -> Result<ProviderView, ApiError> {
    let name = match named {
        Some(p) => p.to_owned(),
        None => {
            let mut names = st.providers.providers_for_server(tenant, server).await?;
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
                        server
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
                        server
                    )));
                }
            }
        }
    };
    st.providers.provider(tenant, &name).await
}
