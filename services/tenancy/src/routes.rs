//! `/v1/tenants` routes: create and read tenants, read and replace policies,
//! read the audit log.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pinfold_core::ids::{TenantId, Timestamp};
use pinfold_http::auth::{Auth, Role};
use pinfold_http::pagination::{PageQuery, finish_page};
use pinfold_http::problem::{ApiError, FieldError, ProblemBody};
use pinfold_http::tenant::tenant_not_found;
use pinfold_http::{StrictJson, TenantScope};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::model::{AuditEvent, AuditFilter, Policy, PolicyRecord, TenantRecord};
use crate::store::{StoreError, TenantStore};

/// What the tenancy routes need.
#[derive(Clone)]
pub struct TenancyState {
    /// The store.
    pub store: Arc<dyn TenantStore>,
    /// What else happens when a tenant is created.
    pub hooks: Arc<dyn TenantHooks>,
}

/// Work other services do for a new tenant (the registry creates the
/// tenant's attestation key). Declared here, implemented by the server over
/// the other services, so tenancy depends on none of them.
#[async_trait::async_trait]
pub trait TenantHooks: Send + Sync + 'static {
    /// Called after the tenant is committed. A failure is logged, not
    /// returned: the tenant exists, and every hook must also cope with
    /// doing its work lazily later.
    async fn tenant_created(&self, tenant: &TenantId) -> Result<(), String>;
}

/// Hooks that do nothing.
pub struct NoHooks;

#[async_trait::async_trait]
impl TenantHooks for NoHooks {
    async fn tenant_created(&self, _tenant: &TenantId) -> Result<(), String> {
        Ok(())
    }
}

/// The tenancy routes, with their OpenAPI description.
pub fn router() -> OpenApiRouter<TenancyState> {
    OpenApiRouter::new()
        .routes(routes!(create_tenant))
        .routes(routes!(get_tenant))
        .routes(routes!(get_policy, put_policy))
        .routes(routes!(list_audit))
}

/// Current time.
pub fn now() -> Timestamp {
    Timestamp::from_millis(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0),
    )
}

/// Maps a store error to the HTTP edge, logging what the client must not see.
pub fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::Conflict(what) => {
            ApiError::new(StatusCode::CONFLICT, "conflict", "Conflict").detail(what)
        }
        StoreError::PreconditionFailed { current } => ApiError::new(
            StatusCode::PRECONDITION_FAILED,
            "precondition_failed",
            "Precondition failed",
        )
        .detail("the resource changed since you read it; read it again and retry")
        .with("current_revision", current),
        StoreError::NotFound => ApiError::not_found("resource"),
        StoreError::Unavailable(cause) => {
            tracing::error!(error = %cause, "database unavailable");
            ApiError::database_unavailable()
        }
        StoreError::Other(cause) => {
            tracing::error!(error = %cause, "database error");
            ApiError::internal()
        }
    }
}

/// Body of `POST /v1/tenants`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"id": "acme", "name": "Acme Corp"}))]
pub struct CreateTenant {
    /// `[a-z0-9][a-z0-9-]{1,62}`.
    #[schema(pattern = "^[a-z0-9][a-z0-9-]{1,62}$")]
    pub id: String,
    /// Display name: 1 to 200 characters, not only white space (kept
    /// without surrounding white space).
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = r"[^\t\n\u000b\u000c\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
    )]
    pub name: String,
    /// Initial policy (default: permissive, approval required).
    #[serde(default)]
    pub policy: Option<Policy>,
}

/// A tenant with its policy.
#[derive(Debug, Serialize, ToSchema)]
pub struct TenantView {
    /// The tenant.
    #[serde(flatten)]
    pub tenant: TenantRecord,
    /// Its policy.
    pub policy: PolicyRecord,
}

fn validate_policy(policy: &Policy) -> Result<(), ApiError> {
    let mut errors = Vec::new();
    for (server, o) in &policy.overrides.servers {
        let escaped = server.replace('~', "~0").replace('/', "~1");
        if !valid_server_name(server) {
            errors.push(FieldError {
                pointer: format!("/overrides/servers/{escaped}"),
                code: "invalid_server_name".into(),
                message: "server names are reverse-DNS with one '/' (io.github.acme/files)".into(),
            });
        }
        for tool in o.tools.keys() {
            let ok = (1..=128).contains(&tool.len())
                && tool
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
            if !ok {
                errors.push(FieldError {
                    pointer: format!(
                        "/overrides/servers/{escaped}/tools/{}",
                        tool.replace('~', "~0").replace('/', "~1")
                    ),
                    code: "invalid_tool_name".into(),
                    message: "tool names are 1-128 characters of [A-Za-z0-9_.-]".into(),
                });
            }
        }
    }
    for (index, entry) in policy.egress_allow.iter().enumerate() {
        if let Err(e) = pinfold_egress::AllowList::parse([entry.as_str()]) {
            errors.push(FieldError {
                pointer: format!("/egress_allow/{index}"),
                code: "invalid_egress_entry".into(),
                message: match e {
                    pinfold_egress::AllowListError::TooMany => e.to_string(),
                    _ => "a host name, a *.suffix pattern, an IP address or a CIDR block".into(),
                },
            });
        }
    }
    if policy.egress_allow.len() > pinfold_egress::policy::MAX_ENTRIES {
        errors.push(FieldError {
            pointer: "/egress_allow".into(),
            code: "too_many".into(),
            message: format!("at most {} entries", pinfold_egress::policy::MAX_ENTRIES),
        });
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::validation(errors))
    }
}

/// The official registry's server-name rule: `^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$`, 3-200 chars.
fn valid_server_name(s: &str) -> bool {
    let Some((ns, name)) = s.split_once('/') else {
        return false;
    };
    (3..=200).contains(&s.len())
        && !ns.is_empty()
        && !name.is_empty()
        && ns
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'))
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn policy_etag(rev: i64) -> HeaderValue {
    HeaderValue::from_str(&format!("\"r{rev}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("\"r0\""))
}

/// Create a tenant (role `platform`).
///
/// The platform route: a token's own tenant, if it has one, plays no part.
#[utoipa::path(
    post,
    path = "/v1/tenants",
    tag = "tenants",
    operation_id = "create_tenant",
    request_body = CreateTenant,
    security(("bearer" = [])),
    responses(
        (status = 201, description = "Created", body = TenantView),
        (status = 400, description = "Malformed JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "Missing or invalid token", body = ProblemBody, content_type = "application/problem+json"),
        (status = 403, description = "Not a platform token", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "Tenant id taken", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Invalid body", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn create_tenant(
    State(st): State<TenancyState>,
    Auth(principal): Auth,
    StrictJson(body): StrictJson<CreateTenant>,
) -> Result<Response, ApiError> {
    principal.require_any(&[Role::Platform])?;
    let mut errors = Vec::new();
    let id = match TenantId::parse(&body.id) {
        Ok(id) => Some(id),
        Err(e) => {
            errors.push(FieldError {
                pointer: "/id".into(),
                code: "invalid_tenant_id".into(),
                message: e.to_string(),
            });
            None
        }
    };
    let name = body.name.trim();
    if name.is_empty() || body.name.chars().count() > 200 {
        errors.push(FieldError {
            pointer: "/name".into(),
            code: "invalid_name".into(),
            message: "name must be 1 to 200 characters".into(),
        });
    }
    let policy = body.policy.unwrap_or_default();
    if let Err(e) = validate_policy(&policy) {
        errors.extend(e.into_errors().into_iter().map(|mut f| {
            f.pointer = format!("/policy{}", f.pointer);
            f
        }));
    }
    let Some(id) = id.filter(|_| errors.is_empty()) else {
        return Err(ApiError::validation(errors));
    };
    let at = now();
    let tenant = match st
        .store
        .create_tenant(&id, name, &policy, &principal.sub, at)
        .await
    {
        Ok(t) => t,
        Err(StoreError::Conflict(_)) => {
            return Err(
                ApiError::new(StatusCode::CONFLICT, "tenant_exists", "Tenant exists")
                    .detail(format!("tenant id {id} is taken")),
            );
        }
        Err(e) => return Err(store_error(e)),
    };
    if let Err(e) = st.hooks.tenant_created(&id).await {
        tracing::warn!(tenant.id = %id, error = %e, "tenant created, but a creation hook failed; it will be retried lazily");
    }
    let view = TenantView {
        policy: PolicyRecord {
            policy,
            revision: 1,
            updated_at: at,
            updated_by: principal.sub.clone(),
        },
        tenant,
    };
    let location = HeaderValue::from_str(&format!("/v1/tenants/{id}"))
        .unwrap_or_else(|_| HeaderValue::from_static("/v1/tenants"));
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(view),
    )
        .into_response())
}

async fn load_tenant(st: &TenancyState, tenant: &TenantId) -> Result<TenantRecord, ApiError> {
    st.store
        .tenant(tenant)
        .await
        .map_err(store_error)?
        .ok_or_else(tenant_not_found)
}

async fn load_policy(st: &TenancyState, tenant: &TenantId) -> Result<PolicyRecord, ApiError> {
    st.store
        .policy(tenant)
        .await
        .map_err(store_error)?
        .ok_or_else(tenant_not_found)
}

/// Read a tenant and its policy (any role of the tenant).
///
/// `platform` holds no role inside a tenant: it is read with a token of
/// the tenant.
#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}",
    tag = "tenants",
    operation_id = "get_tenant",
    params(("tenant" = String, Path, description = "Tenant id")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The tenant", body = TenantView),
        (status = 401, description = "Missing or invalid token", body = ProblemBody, content_type = "application/problem+json"),
        (status = 403, description = "No role in this tenant", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such tenant (or not yours)", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn get_tenant(
    State(st): State<TenancyState>,
    scope: TenantScope,
) -> Result<Json<TenantView>, ApiError> {
    scope.require_member()?;
    let tenant = load_tenant(&st, scope.tenant()).await?;
    let policy = load_policy(&st, scope.tenant()).await?;
    Ok(Json(TenantView { tenant, policy }))
}

/// Read a tenant's policy (any role of the tenant).
///
/// The `ETag` is its revision; send it in `If-Match` when replacing it.
#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/policy",
    tag = "tenants",
    operation_id = "get_policy",
    params(("tenant" = String, Path, description = "Tenant id")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The policy", body = PolicyRecord, headers(("ETag" = String, description = "Policy revision"))),
        (status = 401, description = "Missing or invalid token", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such tenant (or not yours)", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn get_policy(
    State(st): State<TenancyState>,
    scope: TenantScope,
) -> Result<Response, ApiError> {
    scope.require_member()?;
    let policy = load_policy(&st, scope.tenant()).await?;
    Ok(([(header::ETAG, policy_etag(policy.revision))], Json(policy)).into_response())
}

fn parse_if_match(headers: &HeaderMap) -> Result<Option<i64>, ApiError> {
    let Some(v) = headers.get(header::IF_MATCH) else {
        return Ok(None);
    };
    let bad = || {
        ApiError::new(
            StatusCode::PRECONDITION_FAILED,
            "precondition_failed",
            "Precondition failed",
        )
        .detail("If-Match must be the policy's ETag, for example \"r3\"")
    };
    let s = v.to_str().map_err(|_| bad())?.trim();
    if s == "*" {
        return Ok(None);
    }
    s.strip_prefix("\"r")
        .and_then(|r| r.strip_suffix('"'))
        .and_then(|n| n.parse::<i64>().ok())
        .map(Some)
        .ok_or_else(bad)
}

/// Replace a tenant's policy (role `admin`). With `If-Match`, the write only
/// happens if nobody changed the policy since it was read (else `412`).
#[utoipa::path(
    put,
    path = "/v1/tenants/{tenant}/policy",
    tag = "tenants",
    operation_id = "put_policy",
    params(
        ("tenant" = String, Path, description = "Tenant id"),
        ("If-Match" = Option<String>, Header, description = "The ETag of the policy you read"),
    ),
    request_body = Policy,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The new policy", body = PolicyRecord, headers(("ETag" = String, description = "Policy revision"))),
        (status = 400, description = "Malformed JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "Missing or invalid token", body = ProblemBody, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such tenant (or not yours)", body = ProblemBody, content_type = "application/problem+json"),
        (status = 412, description = "Changed since read", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Invalid policy", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn put_policy(
    State(st): State<TenancyState>,
    scope: TenantScope,
    headers: HeaderMap,
    StrictJson(policy): StrictJson<Policy>,
) -> Result<Response, ApiError> {
    scope.require_any(&[Role::Admin])?;
    validate_policy(&policy)?;
    let expected = parse_if_match(&headers)?;
    let rec = match st
        .store
        .put_policy(scope.tenant(), &policy, expected, scope.actor(), now())
        .await
    {
        Ok(r) => r,
        Err(StoreError::NotFound) => return Err(tenant_not_found()),
        Err(e) => return Err(store_error(e)),
    };
    Ok(([(header::ETAG, policy_etag(rec.revision))], Json(rec)).into_response())
}

/// Audit log filters.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// Page size, 1 to 100 (default 30).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    /// The `next_cursor` of the previous page.
    #[param(min_length = 1, max_length = 1024, pattern = "^[A-Za-z0-9_-]+$")]
    pub cursor: Option<String>,
    /// Only events about this server.
    pub server: Option<String>,
    /// Only events of this kind (`tenant.created`, `policy.updated`, ...).
    pub kind: Option<String>,
}

/// A page of audit events.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditPage {
    /// Events, oldest first.
    pub items: Vec<AuditEvent>,
    /// Pass as `cursor` for the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

/// Read the append-only audit log (roles `admin`, `reviewer`), oldest first.
#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/audit",
    tag = "tenants",
    operation_id = "list_audit",
    params(("tenant" = String, Path, description = "Tenant id"), AuditQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "A page of events", body = AuditPage),
        (status = 401, description = "Missing or invalid token", body = ProblemBody, content_type = "application/problem+json"),
        (status = 403, description = "Role missing", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such tenant (or not yours)", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Bad query", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn list_audit(
    State(st): State<TenancyState>,
    scope: TenantScope,
    Query(q): Query<AuditQuery>,
) -> Result<Json<AuditPage>, ApiError> {
    scope.require_any(&[Role::Admin, Role::Reviewer])?;
    load_tenant(&st, scope.tenant()).await?;
    let page = PageQuery {
        limit: q.limit,
        cursor: q.cursor,
    };
    let limit = page.limit()?;
    let after = page.cursor_as(|key| key.parse::<i64>().ok())?;
    let filter = AuditFilter {
        server: q.server,
        kind: q.kind,
        ..AuditFilter::default()
    };
    let mut items = st
        .store
        .audit(scope.tenant(), &filter, after, limit + 1)
        .await
        .map_err(store_error)?;
    let next_cursor = finish_page(&mut items, limit, |e| e.id.to_string());
    Ok(Json(AuditPage { items, next_cursor }))
}
