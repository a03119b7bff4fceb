//! Resolving tools within a session: one call, or a batch.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pinfold_http::auth::Role;
use pinfold_http::problem::{ApiError, FieldError, ProblemBody};
use pinfold_http::{StrictJson, TenantScope};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::ToSchema;

use super::sessions::{SessionPath, owned_session};
use crate::engine::{CachePolicy, ResolveError, ResolveEvent, SessionCtx};
use crate::session::AuditNote;
use crate::state::{LiveSession, ResolveState, ServerPolicy, now};

/// Largest batch.
pub const MAX_BATCH: usize = 100;

/// One call to resolve.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "manage_files", "arguments": {"action": "read", "path": "/notes.txt"}}))]
pub struct ResolveCall {
    /// Tool name, as declared by the session's signature.
    #[schema(min_length = 1, max_length = 128)]
    pub name: String,
    /// The call's arguments (an object; default `{}`).
    #[serde(default = "empty_object")]
    #[schema(value_type = Object)]
    pub arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// A batch of calls.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolveBatch {
    /// At most 100 calls, answered in order.
    #[schema(min_items = 1, max_items = 100)]
    pub calls: Vec<ResolveCall>,
}

/// A resolved tool (the wire form of one answer).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ResolvedTool)]
pub struct ResolvedToolDoc {
    /// Always a complete tool: the upstream's resolution, or the declared
    /// worst case (`static`, `fallback`).
    #[schema(value_type = Object)]
    pub tool: Value,
    /// `cache`, `upstream`, `static` or `fallback`.
    #[schema(example = "cache")]
    pub source: String,
    /// False when the upstream answer lies outside the signature.
    pub conformant: bool,
    /// What lies outside it.
    #[schema(value_type = Vec<pinfold_http::report::ViolationDoc>)]
    pub violations: Vec<Value>,
    /// Informational findings.
    #[schema(value_type = Vec<pinfold_http::report::NoticeDoc>)]
    pub notices: Vec<Value>,
    /// Why the worst case was served (`source: fallback`).
    pub reason: Option<String>,
}

/// The answers of a batch, in the order of the calls: each a resolved tool,
/// or `{"error": problem}` for a call that could not be resolved.
#[derive(Debug, Serialize, ToSchema)]
pub struct BatchAnswer {
    /// One entry per call.
    #[schema(value_type = Vec<Object>)]
    pub results: Vec<Value>,
}

fn field(pointer: String, code: &str, message: impl Into<String>) -> FieldError {
    FieldError {
        pointer,
        code: code.into(),
        message: message.into(),
    }
}

fn check_call(call: &ResolveCall, base: &str, errors: &mut Vec<FieldError>) {
    if call.name.is_empty() || call.name.chars().count() > 128 {
        errors.push(field(
            format!("{base}/name"),
            "invalid_name",
            "a tool name of 1 to 128 characters",
        ));
    }
    if !call.arguments.is_object() {
        errors.push(field(
            format!("{base}/arguments"),
            "invalid_type",
            "arguments must be a JSON object",
        ));
    }
}

/// The engine's view of a session for this call: built once per loaded
/// session (the pinned signature, prepared once per digest, and the
/// upstream), under the policy that applies now. A policy tightened since
/// the session opened applies at once: the mode is the stricter of the
/// session's and the current one, and `resolve_cache: none` stops reads
/// from and writes to the cache. A loosened policy applies to sessions
/// opened after it.
async fn context(st: &ResolveState, live: &Arc<LiveSession>) -> Result<Arc<SessionCtx>, ApiError> {
    let ctx = opened(st, live).await?;
    let now = st.signatures.policy(&live.tenant, &live.row.server).await?;
    Ok(tightened(ctx, now))
}

/// `ctx` under the stricter of its own settings and `now`.
fn tightened(ctx: Arc<SessionCtx>, now: ServerPolicy) -> Arc<SessionCtx> {
    let mode = ctx.mode.stricter(now.mode);
    let cache = match now.cache {
        CachePolicy::None => CachePolicy::None,
        CachePolicy::Session => ctx.cache,
    };
    if mode == ctx.mode && cache == ctx.cache {
        return ctx;
    }
    let mut c = SessionCtx::clone(&ctx);
    c.mode = mode;
    c.cache = cache;
    Arc::new(c)
}

/// The engine's view of a session as it was opened, built once per loaded
/// session.
async fn opened(st: &ResolveState, live: &Arc<LiveSession>) -> Result<Arc<SessionCtx>, ApiError> {
    live.ctx
        .get_or_try_init(|| async {
            let tenant = &live.tenant;
            let row = &live.row;
            let signature = st
                .prepared(tenant, &row.server, &row.version, &row.digest)
                .await?;
            let rules = st.egress.rules(tenant).await?;
            let expires = std::time::UNIX_EPOCH
                + std::time::Duration::from_millis(row.expires_at.millis().max(0) as u64);
            Ok::<_, ApiError>(Arc::new(SessionCtx {
                tenant: tenant.clone(),
                session: row.id.clone(),
                expires_at: expires,
                signature,
                mode: row.mode,
                cache: row.cache_policy,
                upstream: crate::upstream::UpstreamTarget {
                    url: row.upstream_url.clone(),
                    headers: live.headers.clone(),
                    rules,
                },
            }))
        })
        .await
        .cloned()
}

/// Appends what the engine asks to record (strict refusals, determinism
/// violations) to the audit log. A failure to record is logged; the answer
/// is still served, since it is already the safe one.
async fn record(
    st: &ResolveState,
    scope: &TenantScope,
    live: &LiveSession,
    events: &[ResolveEvent],
) {
    for e in events {
        let kind = match e {
            ResolveEvent::StrictRefusal { .. } => "resolve.refused",
            ResolveEvent::DeterminismViolation { .. } => "resolve.nondeterministic",
        };
        let mut data = serde_json::to_value(e).unwrap_or(Value::Null);
        if let Some(o) = data.as_object_mut() {
            o.insert("session".into(), json!(live.row.id));
        }
        let note = AuditNote {
            at: now(),
            actor: scope.actor().to_owned(),
            kind: kind.into(),
            server: Some(live.row.server.clone()),
            version: Some(live.row.version.clone()),
            data,
        };
        if let Err(err) = st.store.record(scope.tenant(), &note).await {
            tracing::error!(error = %err, kind, "could not record a resolve event");
        }
    }
}

fn resolve_error(e: ResolveError) -> ApiError {
    match e {
        ResolveError::ToolNotDeclared(name) => ApiError::new(
            StatusCode::NOT_FOUND,
            "tool_not_declared",
            "Tool not declared",
        )
        .detail(format!(
            "the session's signature declares no tool named {name:?}"
        )),
        ResolveError::InvalidArguments(errors) => ApiError::validation(
            errors
                .errors
                .into_iter()
                .map(|e| FieldError {
                    pointer: format!("/arguments{}", e.pointer),
                    code: e.code.to_owned(),
                    message: e.message,
                })
                .collect(),
        ),
    }
}

/// Resolve one tool call (role `client`).
///
/// A tool that is neither resolvable nor has dynamic annotations answers
/// its declared worst case (`static`) without an upstream call. Otherwise
/// the answer comes from the session's cache or, once for any number of
/// identical concurrent calls, from the upstream (`tools/resolve`, or
/// `tools/annotations`), checked against the signature under the session's
/// enforcement mode.
#[utoipa::path(
    post,
    path = "/v1/tenants/{tenant}/sessions/{id}/resolve",
    tag = "resolve",
    operation_id = "resolve_tool",
    params(SessionPath),
    request_body = ResolveCall,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The resolved tool", body = ResolvedToolDoc),
        (status = 403, description = "Role missing", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such session for this caller, or the tool is not declared", body = ProblemBody, content_type = "application/problem+json"),
        (status = 410, description = "Session expired, or its version was revoked", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Invalid body, or arguments outside the tool's inputSchema", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn resolve_tool(
    State(st): State<ResolveState>,
    scope: TenantScope,
    Path(p): Path<SessionPath>,
    StrictJson(call): StrictJson<ResolveCall>,
) -> Result<Response, ApiError> {
    scope.require_any(&[Role::Client])?;
    let mut errors = Vec::new();
    check_call(&call, "", &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    let live = owned_session(&st, &scope, &p.id).await?;
    let ctx = context(&st, &live).await?;
    let mut res = st
        .engine
        .resolve(&ctx, &call.name, &call.arguments)
        .await
        .map_err(resolve_error)?;
    if !res.events.is_empty() {
        record(&st, &scope, &live, &res.events).await;
    }
    // A cache hit comes with its JSON ready.
    if let Some(body) = res.body.take() {
        return Ok((
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response());
    }
    Ok(Json(res).into_response())
}

/// Resolve up to 100 calls at once (role `client`).
///
/// Answers come back in the order of the calls; misses are fetched
/// concurrently. A call that cannot be resolved (undeclared tool, invalid
/// arguments) answers `{"error": problem}` in its place.
#[utoipa::path(
    post,
    path = "/v1/tenants/{tenant}/sessions/{id}/resolve/batch",
    tag = "resolve",
    operation_id = "resolve_batch",
    params(SessionPath),
    request_body = ResolveBatch,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "One answer per call, in order", body = BatchAnswer),
        (status = 403, description = "Role missing", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such session for this caller", body = ProblemBody, content_type = "application/problem+json"),
        (status = 410, description = "Session expired, or its version was revoked", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Invalid body (more than 100 calls, a call without a name, arguments not an object)", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn resolve_batch(
    State(st): State<ResolveState>,
    scope: TenantScope,
    Path(p): Path<SessionPath>,
    StrictJson(batch): StrictJson<ResolveBatch>,
) -> Result<Json<BatchAnswer>, ApiError> {
    scope.require_any(&[Role::Client])?;
    let mut errors = Vec::new();
    if batch.calls.is_empty() || batch.calls.len() > MAX_BATCH {
        errors.push(field(
            "/calls".into(),
            "out_of_range",
            format!("between 1 and {MAX_BATCH} calls"),
        ));
    }
    for (i, c) in batch.calls.iter().enumerate() {
        check_call(c, &format!("/calls/{i}"), &mut errors);
    }
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    let live = owned_session(&st, &scope, &p.id).await?;
    let ctx = context(&st, &live).await?;
    let calls: Vec<(String, Value)> = batch
        .calls
        .into_iter()
        .map(|c| (c.name, c.arguments))
        .collect();
    let answers = st.engine.resolve_batch(&ctx, &calls).await;
    let mut results = Vec::with_capacity(answers.len());
    let mut events = Vec::new();
    for a in answers {
        match a {
            Ok(mut res) => {
                events.append(&mut res.events);
                results.push(serde_json::to_value(&res).unwrap_or(Value::Null));
            }
            Err(e) => {
                let problem = resolve_error(e).body(None);
                results.push(json!({ "error": problem }));
            }
        }
    }
    if !events.is_empty() {
        record(&st, &scope, &live, &events).await;
    }
    Ok(Json(BatchAnswer { results }))
}

/// What [`resolve_for_plan`] answers: the session's pinned server and
/// version, and per call its served tool or what is wrong with the call.
#[derive(Debug)]
pub struct PlanResolution {
    /// The session's server (canonical name).
    pub server: String,
    /// The session's exact version.
    pub version: String,
    /// Per call, in order: the served tool (the upstream's resolution, or
    /// the declared worst case), or field errors relative to the call
    /// (`/name`, `/arguments/...`).
    pub tools: Vec<Result<Arc<Value>, Vec<FieldError>>>,
}

/// Resolves `calls` within the caller's session `id` exactly as
/// `POST .../resolve/batch` does (same cache, same upstream call
/// coalescing, same audit records), for a scope plan over the resolved
/// tools (SEP-1862, "Dynamic Security Schemes": a resolution may narrow a
/// tool's `securitySchemes` to what the arguments need). Another caller's
/// or an unknown session is 404, an expired or revoked one 410. The
/// caller checks the number of calls.
pub async fn resolve_for_plan(
    st: &ResolveState,
    scope: &TenantScope,
    id: &str,
    calls: &[(String, Value)],
) -> Result<PlanResolution, ApiError> {
    let live = owned_session(st, scope, id).await?;
    let ctx = context(st, &live).await?;
    let mut tools = vec![None; calls.len()];
    let mut todo = Vec::with_capacity(calls.len());
    for (i, (name, arguments)) in calls.iter().enumerate() {
        let mut errors = Vec::new();
        check_call(
            &ResolveCall {
                name: name.clone(),
                arguments: arguments.clone(),
            },
            "",
            &mut errors,
        );
        if errors.is_empty() {
            todo.push(i);
        } else {
            tools[i] = Some(Err(errors));
        }
    }
    let batch: Vec<(String, Value)> = todo.iter().map(|&i| calls[i].clone()).collect();
    let answers = st.engine.resolve_batch(&ctx, &batch).await;
    let mut events = Vec::new();
    for (i, a) in todo.into_iter().zip(answers) {
        tools[i] = Some(match a {
            Ok(mut res) => {
                events.append(&mut res.events);
                Ok(Arc::new(res.tool.to_value()))
            }
            Err(ResolveError::ToolNotDeclared(name)) => Err(vec![field(
                "/name".into(),
                "tool_not_declared",
                format!("the session's signature declares no tool named {name:?}"),
            )]),
            Err(e) => Err(resolve_error(e).into_errors()),
        });
    }
    if !events.is_empty() {
        record(st, scope, &live, &events).await;
    }
    Ok(PlanResolution {
        server: live.row.server.clone(),
        version: live.row.version.clone(),
        tools: tools
            .into_iter()
            .map(|t| t.unwrap_or_else(|| Err(Vec::new())))
            .collect(),
    })
}
