//! Grants: the authorization request (PKCE S256, single-use `state`,
//! RFC 8707 `resource`), the code exchange, and the ledger. The request
//! body and its schema are in `body`, how a grant finds its resource in
//! `resource`.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pinfold_core::ids::Timestamp;
use pinfold_http::auth::Role;
use pinfold_http::pagination::{PageQuery, finish_page};
use pinfold_http::problem::{ApiError, ProblemBody};
use pinfold_http::{StrictJson, TenantScope};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::{IntoParams, ToSchema};

use crate::error::{grant_not_found, store_error};
use crate::model::{
    GrantRow, GrantStatus, GrantView, ProviderRow, StateRow, check_scopes, field, is_grant_id,
    is_provider_name, new_grant_id, normalise,
};
use crate::oauth::{self, ClientConfig, ExchangeError};
use crate::state::{ScopeState, now, secret_context, verifier_context};
use crate::store::{AuditNote, GrantOutcome};
use pinfold_core::scope::Hierarchy;

mod body;
mod resource;

pub use body::{MAX_REQUESTED, NewGrantBody, PlanInput};
use resource::grant_resource;

/// A new grant.
#[derive(Debug, Serialize, ToSchema)]
pub struct NewGrantView {
    /// Grant id.
    pub id: String,
    /// Send the user here.
    pub authorization_url: String,
    /// Requested scopes.
    pub requested: Vec<String>,
    /// Needed scopes.
    pub needed: Vec<String>,
    /// The RFC 8707 resource requested, in the authorization URL and again
    /// in the token request.
    pub resource: String,
    /// When the `state` in the URL stops being accepted.
    #[schema(value_type = String, format = DateTime)]
    pub state_expires_at: Timestamp,
}

/// Body of `POST .../grants/{id}/exchange`: what the redirect brought back.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"code": "SplxlOBeZQQYbYS6WxSbIA", "state": "the state from the redirect"}))]
pub struct ExchangeBody {
    /// The authorization code.
    #[schema(min_length = 1, max_length = 4096)]
    pub code: String,
    /// The `state` the redirect carried.
    #[schema(min_length = 1, max_length = 512)]
    pub state: String,
}

/// Path of a grant.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct GrantPath {
    /// Tenant id.
    pub tenant: String,
    /// Grant id.
    pub grant: String,
}

/// A page of the grant ledger.
#[derive(Debug, Serialize, ToSchema)]
pub struct GrantPage {
    /// Grants, oldest first.
    pub items: Vec<GrantView>,
    /// Pass as `cursor` for the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

fn provider_not_ready(what: &str) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "provider_not_ready",
        "Provider cannot grant",
    )
    .detail(format!(
        "the provider profile has no {what}; complete it first"
    ))
}

/// The client configuration of `row` for `redirect_uri`.
fn client_config<'a>(
    st: &ScopeState,
    out: &oauth::Outbound,
    tenant: &pinfold_core::ids::TenantId,
    row: &'a ProviderRow,
    redirect_uri: &'a str,
) -> Result<ClientConfig<'a>, ApiError> {
    let p = &row.profile;
    let client_id = p
        .client_id
        .as_deref()
        .ok_or_else(|| provider_not_ready("client_id"))?;
    let (Some(auth), Some(token)) = (&p.authorization_endpoint, &p.token_endpoint) else {
        return Err(provider_not_ready("endpoints"));
    };
    // The policy may have tightened since the profile was written.
    for u in [auth, token] {
        oauth::provider_url(out, u).map_err(|e| {
            ApiError::new(
                StatusCode::CONFLICT,
                "provider_url_refused",
                "Provider URL refused",
            )
            .detail(e)
        })?;
    }
    let client_secret = match &row.client_secret_sealed {
        None => None,
        Some(sealed) => {
            let plain = st
                .sealer
                .open(tenant, &secret_context(&row.name), sealed)
                .map_err(|e| {
                    tracing::error!(error = %e, provider = %row.name, "a sealed client secret does not open");
                    ApiError::internal()
                })?;
            Some(String::from_utf8(plain).map_err(|_| ApiError::internal())?)
        }
    };
    Ok(ClientConfig {
        client_id,
        client_secret,
        authorization_endpoint: auth,
        token_endpoint: token,
        redirect_uri,
    })
}

/// Start a grant (role `client` or `admin`): returns the authorization URL
/// to send the user to.
///
/// The URL carries PKCE S256 (RFC 7636: the verifier comes from 32 random
/// bytes and stays sealed in Pinfold), a single-use `state` of 256 bits
/// (only its hash is stored; it expires), the scopes and the RFC 8707
/// `resource` (the MCP authorization specification requires it in both
/// the authorization and the token request, so every grant names one: the
/// body's `resource`, else the plan's server through the provider
/// profile's `resources`, else the one streamable-http remote of that
/// server's approved card; otherwise `422 resource_required`).
#[utoipa::path(
    post,
    path = "/v1/tenants/{tenant}/grants",
    tag = "scope",
    operation_id = "create_grant",
    params(("tenant" = String, Path, description = "Tenant id")),
    request_body = NewGrantBody,
    security(("bearer" = [])),
    responses(
        (status = 201, description = "The grant and its authorization URL", body = NewGrantView),
        (status = 400, description = "Malformed JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "Missing or invalid token", body = ProblemBody, content_type = "application/problem+json"),
        (status = 403, description = "Role missing", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such tenant", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "The provider cannot grant (no client or endpoints)", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Unknown provider, unregistered redirect URI, a `resource` the provider does not list (`validation_failed`), or no resource to be found (`resource_required`, pointer `/resource`)", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn create_grant(
    State(st): State<ScopeState>,
    scope: TenantScope,
    StrictJson(body): StrictJson<NewGrantBody>,
) -> Result<Response, ApiError> {
    scope.require_any(&[Role::Client, Role::Admin])?;
    let mut errors = Vec::new();
    if !is_provider_name(&body.provider) {
        errors.push(field(
            "/provider",
            "invalid_provider_name",
            "not a provider name",
        ));
    }
    let (requested, needed) = match (&body.plan, &body.scopes) {
        (Some(_), Some(_)) | (None, None) => {
            errors.push(field(
                "",
                "plan_or_scopes",
                "give either `plan` or `scopes`",
            ));
            (Vec::new(), Vec::new())
        }
        (Some(plan), None) => {
            check_scopes("/plan/required", &plan.required, &mut errors);
            let request = plan
                .request
                .clone()
                .unwrap_or_else(|| plan.required.clone());
            if let Some(r) = &plan.request {
                check_scopes("/plan/request", r, &mut errors);
            }
            (normalise(&request), normalise(&plan.required))
        }
        (None, Some(scopes)) => {
            check_scopes("/scopes", scopes, &mut errors);
            (normalise(scopes), normalise(scopes))
        }
    };
    if errors.is_empty() && requested.is_empty() {
        errors.push(field(
            if body.plan.is_some() {
                "/plan/request"
            } else {
                "/scopes"
            },
            "nothing_to_request",
            "no scope to request: what the calls need is already granted",
        ));
    }
    if requested.len() > MAX_REQUESTED {
        errors.push(field(
            "",
            "too_many",
            format!("at most {MAX_REQUESTED} scopes"),
        ));
    }
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    let tenant = scope.tenant();
    let row = st
        .store
        .provider(tenant, &body.provider)
        .await
        .map_err(store_error)?
        .ok_or_else(|| {
            ApiError::validation(vec![field(
                "/provider",
                "unknown_provider",
                "no provider profile of this name",
            )])
        })?;
    if !row
        .profile
        .redirect_uris
        .iter()
        .any(|r| r == &body.redirect_uri)
    {
        return Err(ApiError::validation(vec![field(
            "/redirect_uri",
            "redirect_uri_not_registered",
            "not one of the provider's redirect_uris (compared exactly)",
        )]));
    }
    let out = st.outbound(tenant).await?;
    let client = client_config(&st, &out, tenant, &row, &body.redirect_uri)?;
    let resource = grant_resource(&st, tenant, &row, &body).await?;
    let at = now();
    let id = new_grant_id(at);
    let state = oauth::new_state().map_err(|e| {
        tracing::error!(error = %e, "no randomness for a state");
        ApiError::internal()
    })?;
    let (challenge, verifier) = oauth::new_pkce();
    let url = oauth::authorization_url(&client, &state, challenge, &requested, &resource)
        .map_err(|e| {
            tracing::error!(error = %e, provider = %row.name, "building an authorization URL failed");
            ApiError::internal()
        })?;
    let verifier_sealed = st
        .sealer
        .seal(tenant, &verifier_context(&id), verifier.secret().as_bytes())
        .map_err(|e| {
            tracing::error!(error = %e, "sealing a PKCE verifier failed");
            ApiError::internal()
        })?;
    let expires_at = Timestamp::from_millis(at.millis() + st.config.state_ttl.as_millis() as i64);
    let grant = GrantRow {
        id: id.clone(),
        provider: row.name.clone(),
        principal: scope.actor().to_owned(),
        issuer: scope.principal().issuer.clone(),
        redirect_uri: body.redirect_uri.clone(),
        resource: Some(resource.clone()),
        requested: requested.clone(),
        needed: needed.clone(),
        granted: None,
        status: GrantStatus::Pending,
        error: None,
        created_at: at,
        exchanged_at: None,
    };
    let state_row = StateRow {
        grant_id: id.clone(),
        state_hash: oauth::state_hash(&state),
        verifier_sealed,
        expires_at,
    };
    let audit = AuditNote::new(
        "grant.created",
        scope.actor(),
        at,
        json!({"grant": id, "provider": row.name, "requested": requested,
               "needed": needed, "resource": resource}),
    );
    st.store
        .insert_grant(tenant, &grant, &state_row, &audit)
        .await
        .map_err(store_error)?;
    let location = HeaderValue::from_str(&format!("/v1/tenants/{tenant}/grants/{id}"))
        .unwrap_or_else(|_| HeaderValue::from_static("/"));
    Ok((
        StatusCode::CREATED,
        [
            (header::LOCATION, location),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        Json(NewGrantView {
            id,
            authorization_url: url,
            requested,
            needed,
            resource,
            state_expires_at: expires_at,
        }),
    )
        .into_response())
}

fn invalid_state() -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_state", "Invalid state")
        .detail("this state is unknown, belongs to another grant, or was already used; nothing was exchanged")
}

/// Exchange the code of a grant (role `client` or `admin`; only the caller
/// who started it).
///
/// The `state` is checked and consumed first (at most once, even under
/// concurrent requests): a replayed or expired one is `400` and nothing is
/// exchanged. The token response is passed through this once (never
/// stored, `Cache-Control: no-store`); the ledger records the requested,
/// granted (the response's `scope`, or the request when it has none, RFC
/// 6749 §5.1) and needed scopes. The token request follows no redirect.
#[utoipa::path(
    post,
    path = "/v1/tenants/{tenant}/grants/{grant}/exchange",
    tag = "scope",
    operation_id = "exchange_grant",
    params(GrantPath),
    request_body = ExchangeBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The token response, once", content_type = "application/json", body = Object),
        (status = 400, description = "Malformed JSON; a replayed, unknown or expired state (`invalid_state`, `state_expired`); the provider refused the code (`exchange_refused`)", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "Missing or invalid token", body = ProblemBody, content_type = "application/problem+json"),
        (status = 403, description = "Role missing", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such grant for this caller", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "A grant started without a resource (`grant_without_resource`): nothing is exchanged", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Invalid body", body = ProblemBody, content_type = "application/problem+json"),
        (status = 502, description = "The token endpoint failed, redirected or answered nonsense", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn exchange_grant(
    State(st): State<ScopeState>,
    scope: TenantScope,
    Path(p): Path<GrantPath>,
    StrictJson(body): StrictJson<ExchangeBody>,
) -> Result<Response, ApiError> {
    scope.require_any(&[Role::Client, Role::Admin])?;
    if !is_grant_id(&p.grant) {
        return Err(grant_not_found());
    }
    let mut errors = Vec::new();
    if body.code.is_empty() || body.code.chars().count() > 4096 {
        errors.push(field("/code", "invalid_code", "1 to 4,096 characters"));
    }
    if body.state.is_empty() || body.state.chars().count() > 512 {
        errors.push(field("/state", "invalid_state", "1 to 512 characters"));
    }
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    let tenant = scope.tenant();
    let grant = st
        .store
        .grant(tenant, &p.grant)
        .await
        .map_err(store_error)?
        .ok_or_else(grant_not_found)?;
    let pr = scope.principal();
    if grant.issuer != pr.issuer || grant.principal != pr.sub {
        return Err(grant_not_found());
    }
    // Every grant started since resources became required names one; a
    // grant from before cannot make the token request the MCP
    // authorization specification requires (its state lives minutes).
    let Some(resource) = grant.resource.clone() else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "grant_without_resource",
            "Grant has no resource",
        )
        .detail(
            "this grant was started without an RFC 8707 resource, which the token request \
             must carry; nothing was exchanged; start a new grant",
        ));
    };
    let taken = st
        .store
        .take_state(tenant, &p.grant, &oauth::state_hash(&body.state))
        .await
        .map_err(store_error)?
        .ok_or_else(invalid_state)?;
    let at = now();
    let finish = |status: GrantStatus, granted: Option<Vec<String>>, error: Option<String>| {
        let kind = if status == GrantStatus::Exchanged {
            "grant.exchanged"
        } else {
            "grant.failed"
        };
        (
            GrantOutcome {
                status,
                granted: granted.clone(),
                error: error.clone(),
                at,
            },
            AuditNote::new(
                kind,
                scope.actor(),
                at,
                json!({"grant": grant.id, "provider": grant.provider, "granted": granted, "error": error}),
            ),
        )
    };
    if at >= taken.expires_at {
        let (o, a) = finish(GrantStatus::Failed, None, Some("state_expired".into()));
        st.store
            .finish_grant(tenant, &grant.id, &o, &a)
            .await
            .map_err(store_error)?;
        return Err(
            ApiError::new(StatusCode::BAD_REQUEST, "state_expired", "State expired").detail(
                "the state of this grant expired; nothing was exchanged; start a new grant",
            ),
        );
    }
    let verifier = st
        .sealer
        .open(tenant, &verifier_context(&grant.id), &taken.verifier_sealed)
        .ok()
        .and_then(|v| String::from_utf8(v).ok())
        .ok_or_else(|| {
            tracing::error!(grant = %grant.id, "a sealed PKCE verifier does not open");
            ApiError::internal()
        })?;
    let row = st
        .store
        .provider(tenant, &grant.provider)
        .await
        .map_err(store_error)?
        .ok_or_else(|| provider_not_ready("profile (it was removed)"))?;
    let out = st.outbound(tenant).await?;
    let client = client_config(&st, &out, tenant, &row, &grant.redirect_uri)?;
    let result = oauth::exchange(&out, &client, &body.code, verifier, &resource).await;
    match result {
        Ok(token) => {
            let granted = oauth::granted_scopes(&token, &grant.requested);
            let (o, a) = finish(GrantStatus::Exchanged, Some(granted), None);
            st.store
                .finish_grant(tenant, &grant.id, &o, &a)
                .await
                .map_err(store_error)?;
            Ok((
                [
                    (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
                    (header::PRAGMA, HeaderValue::from_static("no-cache")),
                ],
                Json(oauth::token_json(&token)),
            )
                .into_response())
        }
        Err(e) => {
            let (code, err) = match &e {
                ExchangeError::Refused { code, description } => {
                    let mut err = ApiError::new(
                        StatusCode::BAD_REQUEST,
                        "exchange_refused",
                        "The authorization server refused the code",
                    )
                    .detail(format!("the token endpoint answered error={code}"))
                    .with("provider_error", code.clone());
                    if let Some(d) = description {
                        err = err.with("provider_error_description", d.clone());
                    }
                    (code.clone(), err)
                }
                ExchangeError::Http(h) => {
                    let code = match h {
                        oauth::HttpError::Redirect(_) => "token_endpoint_redirect",
                        _ => "token_endpoint_unreachable",
                    };
                    (
                        code.to_owned(),
                        ApiError::new(StatusCode::BAD_GATEWAY, code, "Token endpoint failed")
                            .detail(format!("the token endpoint {h}")),
                    )
                }
                ExchangeError::Invalid(m) => (
                    "invalid_token_response".to_owned(),
                    ApiError::new(
                        StatusCode::BAD_GATEWAY,
                        "invalid_token_response",
                        "Token endpoint failed",
                    )
                    .detail(format!(
                        "the token endpoint's answer is not a token response: {m}"
                    )),
                ),
                ExchangeError::Config(m) => {
                    tracing::error!(error = %m, "an OAuth client does not configure");
                    ("client_config".to_owned(), ApiError::internal())
                }
            };
            tracing::warn!(grant = %grant.id, provider = %grant.provider, error = %code, "code exchange failed");
            let (o, a) = finish(GrantStatus::Failed, None, Some(code));
            st.store
                .finish_grant(tenant, &grant.id, &o, &a)
                .await
                .map_err(store_error)?;
            Err(err)
        }
    }
}

/// Read the grant ledger (roles `admin`, `reviewer`), oldest first: each
/// grant's requested, granted and needed scopes, flagged
/// `over_privileged` when what was granted confers more than the need
/// (under the provider's hierarchy), with the `unneeded` scopes.
#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/grants",
    tag = "scope",
    operation_id = "list_grants",
    params(("tenant" = String, Path, description = "Tenant id"), PageQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "A page of the ledger", body = GrantPage),
        (status = 401, description = "Missing or invalid token", body = ProblemBody, content_type = "application/problem+json"),
        (status = 403, description = "Role missing", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such tenant", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Bad query", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn list_grants(
    State(st): State<ScopeState>,
    scope: TenantScope,
    Query(q): Query<PageQuery>,
) -> Result<Json<GrantPage>, ApiError> {
    scope.require_any(&[Role::Admin, Role::Reviewer])?;
    let limit = q.limit()?;
    let after = q.cursor_as(|k| is_grant_id(k).then(|| k.to_owned()))?;
    let tenant = scope.tenant();
    let mut rows = st
        .store
        .grants(tenant, after.as_deref(), limit + 1)
        .await
        .map_err(store_error)?;
    let next_cursor = finish_page(&mut rows, limit, |r| r.id.clone());
    let mut hierarchies: BTreeMap<String, Hierarchy> = BTreeMap::new();
    let mut items = Vec::with_capacity(rows.len());
    for r in &rows {
        if !hierarchies.contains_key(&r.provider) {
            let h = st
                .store
                .provider(tenant, &r.provider)
                .await
                .map_err(store_error)?
                .and_then(|p| p.profile.hierarchy().ok())
                .unwrap_or_else(Hierarchy::flat);
            hierarchies.insert(r.provider.clone(), h);
        }
        items.push(GrantView::new(r, &hierarchies[&r.provider]));
    }
    Ok(Json(GrantPage { items, next_cursor }))
}
