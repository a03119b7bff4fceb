//! Sessions: open, read, list, close.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use pinfold_core::Mode;
use pinfold_core::ids::{TenantId, Timestamp};
use pinfold_egress::EgressError;
use pinfold_http::auth::Role;
use pinfold_http::pagination::{PageQuery, finish_page};
use pinfold_http::problem::{ApiError, FieldError, ProblemBody};
use pinfold_http::upstream::{check_headers, check_url, headers_schema, url_schema};
use pinfold_http::{StrictJson, TenantScope};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::{IntoParams, ToSchema};

use crate::engine::Invalidation;
use crate::error::*;
use crate::session::{AuditNote, CachePolicy, SessionRow, is_session_id, new_session_id};
use crate::state::{LiveSession, ResolveState, Standing, headers_context, now};

/// The upstream MCP server a session talks to.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamBody {
    /// Its Streamable HTTP endpoint.
    #[schema(schema_with = url_schema)]
    pub url: String,
    /// Headers sent with every upstream request.
    #[serde(default)]
    #[schema(schema_with = headers_schema)]
    pub headers: BTreeMap<String, String>,
}

/// Body of a new session.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"server": "io.github.acme/files", "upstream": {"url": "https://files.example.com/mcp"}, "ttl_seconds": 3600}))]
pub struct NewSessionBody {
    /// Server name.
    #[schema(min_length = 1, max_length = 200)]
    pub server: String,
    /// Exact version, or `latest` (the default): the highest approved
    /// version, resolved now and pinned for the session's life.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 100)]
    pub version: Option<String>,
    /// The upstream MCP server.
    pub upstream: UpstreamBody,
    /// Lifetime in seconds (default 3,600; at most the configured maximum,
    /// 86,400 unless the deployment changed it).
    #[serde(default, deserialize_with = "pinfold_http::body::opt_integer")]
    #[schema(minimum = 1, maximum = 86400)]
    pub ttl_seconds: Option<u64>,
}

/// A session as clients see it (never its upstream headers).
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionView {
    /// Session id.
    pub id: String,
    /// Server name (canonical).
    pub server: String,
    /// The pinned version.
    pub version: String,
    /// Digest of the pinned version's document.
    pub digest: String,
    /// Enforcement mode, fixed when the session opened.
    #[schema(value_type = String, example = "permissive")]
    pub mode: Mode,
    /// Cache policy, fixed when the session opened.
    pub resolve_cache: CachePolicy,
    /// Upstream endpoint.
    pub upstream_url: String,
    /// Who opened it (token `sub`).
    pub principal: String,
    /// When it opened.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
    /// When it ends.
    #[schema(value_type = String, format = DateTime)]
    pub expires_at: Timestamp,
    /// The mode its resolves run under now: the stricter of `mode` and the
    /// tenant's current policy (a tightened policy reaches open sessions;
    /// a loosened one waits for new sessions). On a session's read only.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, example = "strict")]
    pub effective_mode: Option<Mode>,
    /// The cache policy its resolves run under now (`none` as soon as the
    /// tenant's policy says so). On a session's read only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective_resolve_cache: Option<CachePolicy>,
    /// How its cached answers are invalidated, once this replica has heard
    /// from the upstream. On a session's read only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_invalidation: Option<CacheInvalidation>,
}

/// How a session's cached answers learn they are out of date.
#[derive(Debug, Serialize, ToSchema)]
pub struct CacheInvalidation {
    /// `list_changed`: the upstream announces tool list changes, and
    /// answers live until one (or the session's end). `entry_ttl`: it
    /// cannot (no `tools.listChanged` capability, or no
    /// `subscriptions/listen` stream), so answers live at most
    /// `entry_ttl_secs`.
    #[schema(example = "entry_ttl")]
    pub by: &'static str,
    /// The longest life of an answer under `entry_ttl`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry_ttl_secs: Option<u64>,
}

impl From<Invalidation> for CacheInvalidation {
    fn from(i: Invalidation) -> Self {
        match i {
            Invalidation::ListChanged => CacheInvalidation {
                by: "list_changed",
                entry_ttl_secs: None,
            },
            Invalidation::EntryTtl(d) => CacheInvalidation {
                by: "entry_ttl",
                entry_ttl_secs: Some(d.as_secs()),
            },
        }
    }
}

impl From<&SessionRow> for SessionView {
    fn from(r: &SessionRow) -> Self {
        SessionView {
            id: r.id.clone(),
            server: r.server.clone(),
            version: r.version.clone(),
            digest: r.digest.clone(),
            mode: r.mode,
            resolve_cache: r.cache_policy,
            upstream_url: r.upstream_url.clone(),
            principal: r.principal.clone(),
            created_at: r.created_at,
            expires_at: r.expires_at,
            effective_mode: None,
            effective_resolve_cache: None,
            cache_invalidation: None,
        }
    }
}

/// Path of a session.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct SessionPath {
    /// Tenant id.
    pub tenant: String,
    /// Session id.
    pub id: String,
}

/// A page of sessions.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionPage {
    /// Sessions ordered by id.
    pub items: Vec<SessionView>,
    /// Pass as `cursor` for the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

fn field(pointer: String, code: &str, message: impl Into<String>) -> FieldError {
    FieldError {
        pointer,
        code: code.into(),
        message: message.into(),
    }
}

/// Checks the upstream URL and headers, exactly what the body's schema
/// states; every problem is reported.
fn check_upstream(up: &UpstreamBody, errors: &mut Vec<FieldError>) {
    check_url(&up.url, "/upstream/url", errors);
    check_headers(&up.headers, "/upstream/headers", errors);
}

/// Loads a session for its owner: 404 when absent or someone else's, 410
/// when expired or its version was revoked (which also drops what this
/// replica cached for it).
pub async fn owned_session(
    st: &ResolveState,
    scope: &TenantScope,
    id: &str,
) -> Result<Arc<LiveSession>, ApiError> {
    if !is_session_id(id) {
        return Err(session_not_found());
    }
    let tenant = scope.tenant();
    let live = match st.live.get(tenant, id) {
        Some(l) => l,
        None => {
            let row = st
                .store
                .session(tenant, id)
                .await
                .map_err(store_error)?
                .ok_or_else(session_not_found)?;
            let headers = open_headers(st, tenant, &row)?;
            let live = Arc::new(LiveSession::new(tenant.clone(), row, headers));
            st.live.put(tenant, live.clone());
            live
        }
    };
    let p = scope.principal();
    if !live.row.owned_by(&p.issuer, &p.sub) {
        return Err(session_not_found());
    }
    if now() >= live.row.expires_at {
        st.end_session(tenant, id);
        return Err(session_expired());
    }
    match st
        .signatures
        .standing(tenant, &live.row.server, &live.row.version)
        .await?
    {
        Standing::Revoked => {
            st.end_session(tenant, id);
            Err(version_revoked())
        }
        _ => Ok(live),
    }
}

fn open_headers(
    st: &ResolveState,
    tenant: &TenantId,
    row: &SessionRow,
) -> Result<Vec<(String, String)>, ApiError> {
    let Some(sealed) = &row.upstream_sealed else {
        return Ok(Vec::new());
    };
    let plain = st
        .sealer
        .open(tenant, headers_context(&row.id), sealed)
        .map_err(|e| {
            tracing::error!(error = %e, session = %row.id, "sealed upstream headers do not open");
            ApiError::internal()
        })?;
    serde_json::from_slice::<Vec<(String, String)>>(&plain).map_err(|e| {
        tracing::error!(error = %e, session = %row.id, "sealed upstream headers are not JSON");
        ApiError::internal()
    })
}

/// Open a session (role `client`).
///
/// Pins the version (`latest` → the highest approved, now), the tenant's
/// enforcement mode and the server's cache policy for the session's life.
/// The upstream is not contacted until the first resolve; its URL is
/// checked against the egress policy now (its name resolved, every address
/// judged): `422 upstream_not_allowed` when the policy refuses it.
#[utoipa::path(
    post,
    path = "/v1/tenants/{tenant}/sessions",
    tag = "resolve",
    operation_id = "open_session",
    params(("tenant" = String, Path, description = "Tenant id")),
    request_body = NewSessionBody,
    security(("bearer" = [])),
    responses(
        (status = 201, description = "The new session", body = SessionView),
        (status = 403, description = "Role missing", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such tenant, server or version, or no approved version", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "The version is not trusted (pending, rejected or revoked)", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Invalid body; or `upstream_not_allowed`: the egress policy refuses the upstream (a private, loopback or link-local address the tenant's `egress_allow` does not name, or credentials over plain http to a host it does not name)", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn open_session(
    State(st): State<ResolveState>,
    scope: TenantScope,
    StrictJson(body): StrictJson<NewSessionBody>,
) -> Result<Response, ApiError> {
    scope.require_any(&[Role::Client])?;
    let mut errors = Vec::new();
    if body.server.is_empty() || body.server.chars().count() > 200 {
        errors.push(field(
            "/server".into(),
            "invalid_name",
            "a server name of 1 to 200 characters",
        ));
    }
    let version = body.version.as_deref().unwrap_or("latest");
    if version.is_empty() || version.chars().count() > 100 {
        errors.push(field(
            "/version".into(),
            "invalid_version",
            "an exact version or `latest`",
        ));
    }
    let tenant = scope.tenant();
    // The egress policy first: a URL whose host is an address the policy
    // refuses, in any spelling a URL parser reads as one (`127.1`, the
    // decimal `2130706433`), is `upstream_not_allowed` whatever else is
    // wrong with the body. Nothing is resolved or sent for it.
    let rules = st.egress.rules(tenant).await?;
    let parsed = url::Url::parse(&body.upstream.url).ok();
    if let Some(url) = &parsed
        && let Err(e @ EgressError::NotAllowed) = st.egress.egress.admit(&rules, url, false)
    {
        return Err(pinfold_http::egress::not_allowed("/upstream/url", &e));
    }
    check_upstream(&body.upstream, &mut errors);
    let max = st.config.max_ttl.as_secs();
    let ttl = body
        .ttl_seconds
        .unwrap_or_else(|| st.config.default_ttl.as_secs().min(max));
    if !(1..=max).contains(&ttl) {
        errors.push(field(
            "/ttl_seconds".into(),
            "out_of_range",
            format!("ttl_seconds must be between 1 and {max}"),
        ));
    }
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    // Then the name resolved and every address judged, and the rule for
    // credentials over plain http.
    let url = parsed.ok_or_else(|| {
        pinfold_http::egress::not_allowed("/upstream/url", &EgressError::InvalidUrl)
    })?;
    st.egress
        .egress
        .check(&rules, &url, !body.upstream.headers.is_empty())
        .await
        .map_err(|e| pinfold_http::egress::not_allowed("/upstream/url", &e))?;
    let pinned = st.signatures.pin(tenant, &body.server, version).await?;
    match pinned.standing {
        Standing::Trusted => {}
        Standing::NotTrusted(status) => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "version_not_trusted",
                "Version not trusted",
            )
            .detail(format!(
                "version {} is {status}; only approved (or deprecated) versions can back a session",
                pinned.version
            )));
        }
        Standing::Revoked => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "version_not_trusted",
                "Version not trusted",
            )
            .detail(format!("version {} is revoked", pinned.version)));
        }
    }
    let policy = st.signatures.policy(tenant, &pinned.server).await?;
    let id = new_session_id();
    let upstream_sealed = if body.upstream.headers.is_empty() {
        None
    } else {
        let pairs: Vec<(&String, &String)> = body.upstream.headers.iter().collect();
        let plain = serde_json::to_vec(&pairs).map_err(|_| ApiError::internal())?;
        Some(
            st.sealer
                .seal(tenant, headers_context(&id), &plain)
                .map_err(|e| {
                    tracing::error!(error = %e, "sealing upstream headers failed");
                    ApiError::internal()
                })?,
        )
    };
    let created_at = now();
    let row = SessionRow {
        id,
        principal: scope.actor().to_owned(),
        issuer: scope.principal().issuer.clone(),
        server: pinned.server,
        version: pinned.version,
        digest: pinned.digest,
        mode: policy.mode,
        cache_policy: policy.cache,
        upstream_url: body.upstream.url,
        upstream_sealed,
        created_at,
        expires_at: Timestamp::from_millis(created_at.millis() + (ttl as i64) * 1000),
    };
    let audit = AuditNote {
        at: created_at,
        actor: row.principal.clone(),
        kind: "session.opened".into(),
        server: Some(row.server.clone()),
        version: Some(row.version.clone()),
        data: json!({
            "session": row.id,
            "upstream_url": row.upstream_url,
            "upstream_headers": body.upstream.headers.keys().collect::<Vec<_>>(),
            "mode": row.mode.as_str(),
            "resolve_cache": row.cache_policy.as_str(),
            "expires_at": row.expires_at.to_string(),
        }),
    };
    st.store
        .insert_session(tenant, &row, &audit)
        .await
        .map_err(store_error)?;
    let view = SessionView::from(&row);
    let location = format!("/v1/tenants/{tenant}/sessions/{}", row.id);
    let headers = body
        .upstream
        .headers
        .into_iter()
        .collect::<Vec<(String, String)>>();
    st.live.put(
        tenant,
        Arc::new(LiveSession::new(tenant.clone(), row, headers)),
    );
    Ok((
        StatusCode::CREATED,
        [(axum::http::header::LOCATION, location)],
        Json(view),
    )
        .into_response())
}

/// Read one of your sessions (role `client`).
#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/sessions/{id}",
    tag = "resolve",
    operation_id = "get_session",
    params(SessionPath),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The session", body = SessionView),
        (status = 403, description = "Role missing", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such session for this caller", body = ProblemBody, content_type = "application/problem+json"),
        (status = 410, description = "Expired, or its version was revoked", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn get_session(
    State(st): State<ResolveState>,
    scope: TenantScope,
    Path(p): Path<SessionPath>,
) -> Result<Json<SessionView>, ApiError> {
    scope.require_any(&[Role::Client])?;
    let live = owned_session(&st, &scope, &p.id).await?;
    let now = st.signatures.policy(&live.tenant, &live.row.server).await?;
    let mut view = SessionView::from(&live.row);
    view.effective_mode = Some(live.row.mode.stricter(now.mode));
    view.effective_resolve_cache = Some(match now.cache {
        CachePolicy::None => CachePolicy::None,
        CachePolicy::Session => live.row.cache_policy,
    });
    view.cache_invalidation = st
        .engine
        .invalidation(&live.tenant, &live.row.id)
        .map(CacheInvalidation::from);
    Ok(Json(view))
}

/// Close a session (role `client` for your own; `admin` for any).
///
/// Its cached results are dropped at once, on every replica.
#[utoipa::path(
    delete,
    path = "/v1/tenants/{tenant}/sessions/{id}",
    tag = "resolve",
    operation_id = "close_session",
    params(SessionPath),
    security(("bearer" = [])),
    responses(
        (status = 204, description = "Closed"),
        (status = 403, description = "Role missing", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such session for this caller", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn close_session(
    State(st): State<ResolveState>,
    scope: TenantScope,
    Path(p): Path<SessionPath>,
) -> Result<StatusCode, ApiError> {
    scope.require_any(&[Role::Client, Role::Admin])?;
    if !is_session_id(&p.id) {
        return Err(session_not_found());
    }
    let tenant = scope.tenant();
    let row = st
        .store
        .session(tenant, &p.id)
        .await
        .map_err(store_error)?
        .ok_or_else(session_not_found)?;
    let pr = scope.principal();
    if !row.owned_by(&pr.issuer, &pr.sub) && !pr.has(Role::Admin) {
        return Err(session_not_found());
    }
    let audit = AuditNote {
        at: now(),
        actor: scope.actor().to_owned(),
        kind: "session.closed".into(),
        server: Some(row.server.clone()),
        version: Some(row.version.clone()),
        data: json!({"session": row.id}),
    };
    let deleted = st
        .store
        .delete_session(tenant, &p.id, &audit)
        .await
        .map_err(store_error)?;
    st.end_session(tenant, &p.id);
    if deleted {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(session_not_found())
    }
}

/// List the tenant's sessions (role `admin`), expired ones included until
/// they are purged.
#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/sessions",
    tag = "resolve",
    operation_id = "list_sessions",
    params(("tenant" = String, Path, description = "Tenant id"), PageQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "A page of sessions", body = SessionPage),
        (status = 403, description = "Role missing", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such tenant", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Bad query", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn list_sessions(
    State(st): State<ResolveState>,
    scope: TenantScope,
    Query(q): Query<PageQuery>,
) -> Result<Json<SessionPage>, ApiError> {
    scope.require_any(&[Role::Admin])?;
    let limit = q.limit()?;
    let after = q.cursor_as(|k| is_session_id(k).then(|| k.to_owned()))?;
    let mut rows = st
        .store
        .sessions(scope.tenant(), after.as_deref(), limit + 1)
        .await
        .map_err(store_error)?;
    let next_cursor = finish_page(&mut rows, limit, |r| r.id.clone());
    Ok(Json(SessionPage {
        items: rows.iter().map(SessionView::from).collect(),
        next_cursor,
    }))
}
