//! The guard's MCP endpoint: `/t/{tenant}/mcp/{server}`, Streamable HTTP.
//!
//! A client connects here instead of to the server. The guard forwards what
//! it may to the route's upstream (with the route's headers, never the
//! client's token) and answers itself what the signature decides:
//!
//! - `tools/list` is answered from the review of the upstream's list
//!   ([`live`]): the reviewed view, never the upstream's own answer;
//! - `tools/call` of a tool not shown is refused before the upstream
//!   (JSON-RPC `-32010`, `pinfold_core::guard::REFUSED`); arguments are
//!   checked against the signature's `inputSchema` (a violation is a tool
//!   execution error, SEP-1303); the route's `calls` policy is decided on
//!   the call's annotations (for a tool that resolves them per call, on the
//!   upstream's resolution checked against the signature, SEP-1862);
//! - prompts and resources lists are cut to the signature, and under
//!   `strict` `prompts/get` and `resources/read` of undeclared items are
//!   refused;
//! - everything else passes both ways, with Pinfold's reserved `_meta` keys
//!   removed from what the upstream sends.
//!
//! Protocol revisions: on 2025-11-25 the client's `initialize` is
//! forwarded and the session id it receives is a sealed value
//! ([`session`]) that any replica opens; on 2026-07-28 (sessionless)
//! `server/discover` is forwarded when the upstream offers that revision
//! and answered "method not found" otherwise, so the client falls back to
//! `initialize`; the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name`
//! headers are checked against the body.

// A handler's early answer is a whole `Response`: carrying it in the `Err`
// of the helpers that decide it is the point, not an accident of size.
#![allow(clippy::result_large_err)]

pub mod live;
pub mod rpc;
pub mod session;
pub mod source;
pub mod upstream;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::StreamExt as _;
use pinfold_core::annotations::Annotations;
use pinfold_core::audit::NewAuditEvent;
use pinfold_core::card::{Limits, ServerCard};
use pinfold_core::guard::{
    self, CallsPolicy, NOT_READY, Standing, ToolsReview, UPSTREAM_UNAVAILABLE,
};
use pinfold_core::ids::{TenantId, Timestamp};
use pinfold_http::auth::{Auth, Principal, Role};
use pinfold_http::egress::TenantEgress;
use pinfold_http::problem::ApiError;
use pinfold_resolve_check::PreparedSignature;
use reqwest::Method;
use serde_json::{Value, json};

use crate::model::{GuardRoute, headers_context};
use crate::state::Sealer;
use crate::store::GuardStore;
use live::{Fingerprint, LiveRoute, ReviewState, TaskConfig};
use rpc::{error, error_object, json_response, result, strip_reserved_meta, transport_error};
use session::ClientSession;
use source::Approved;
use upstream::{
    Exchange, LAST_EVENT_ID, METHOD_HEADER, NAME_HEADER, Outbound, PROTOCOL_HEADER, SESSION_HEADER,
    Target, UpstreamError, event_message,
};

/// The endpoint's path template.
pub const PATH: &str = "/t/{tenant}/mcp/{*server}";

/// Limits and timings of the endpoint.
#[derive(Debug, Clone)]
pub struct GuardConfig {
    /// How long an upstream request may take (a stream: its head).
    pub upstream_timeout: Duration,
    /// The largest upstream body or event read.
    pub max_response_bytes: usize,
    /// How long a request waits for a pending review.
    pub review_wait: Duration,
    /// How often a route's row and pin are compared with the store.
    pub route_check: Duration,
    /// How long the `server/discover` probe waits.
    pub probe_budget: Duration,
    /// How often an upstream without a list change channel is reviewed.
    pub review_interval: Duration,
    /// Limits under which signatures and lists are read.
    pub limits: Limits,
    /// The URL clients reach Pinfold at, for the `resource_metadata` of a
    /// `401` (else the request's `Host`).
    pub public_url: Option<String>,
}

impl Default for GuardConfig {
    fn default() -> Self {
        GuardConfig {
            upstream_timeout: Duration::from_secs(30),
            max_response_bytes: 4 << 20,
            review_wait: Duration::from_secs(10),
            route_check: Duration::from_secs(2),
            probe_budget: Duration::from_secs(5),
            review_interval: Duration::from_secs(30),
            limits: Limits::default(),
            public_url: None,
        }
    }
}

/// Counters of the endpoint (rendered by the server's `/metrics`).
#[derive(Debug, Default)]
pub struct GuardStats {
    /// Calls refused before the upstream (not shown, or the calls policy).
    pub refused: AtomicU64,
    /// Distinct drifts recorded.
    pub drifts: AtomicU64,
    /// Requests forwarded to upstreams.
    pub forwarded: AtomicU64,
}

/// What the endpoint's handlers share.
#[derive(Clone)]
pub struct EndpointState(Arc<Inner>);

struct Inner {
    store: Arc<dyn GuardStore>,
    approved: Arc<dyn Approved>,
    sealer: Arc<dyn Sealer>,
    egress: TenantEgress,
    config: GuardConfig,
    stats: Arc<GuardStats>,
    routes: moka::sync::Cache<(TenantId, String), Arc<LiveRoute>>,
}

impl EndpointState {
    /// The endpoint over its store, the registry, the keyring and the
    /// egress path.
    pub fn new(
        store: Arc<dyn GuardStore>,
        approved: Arc<dyn Approved>,
        sealer: Arc<dyn Sealer>,
        egress: TenantEgress,
        config: GuardConfig,
    ) -> Self {
        EndpointState(Arc::new(Inner {
            store,
            approved,
            sealer,
            egress,
            config,
            stats: Arc::new(GuardStats::default()),
            routes: moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_idle(Duration::from_secs(600))
                .build(),
        }))
    }

    /// The endpoint's counters.
    pub fn stats(&self) -> &GuardStats {
        &self.0.stats
    }

    /// Forgets what this replica holds of a tenant's route (after a write
    /// to it): the next request builds it anew.
    pub fn forget(&self, tenant: &TenantId, server: &str) {
        self.0
            .routes
            .invalidate(&(tenant.clone(), server.to_ascii_lowercase()));
    }
}

/// The endpoint's router (not part of the REST API's OpenAPI document: it
/// speaks MCP).
pub fn router() -> Router<EndpointState> {
    Router::new().route(PATH, post(post_mcp).get(get_mcp).delete(delete_mcp))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `401` with the challenge naming this endpoint's RFC 9728 metadata.
fn unauthorized(st: &EndpointState, headers: &HeaderMap, tenant: &str, server: &str) -> Response {
    let base =
        match &st.0.config.public_url {
            Some(u) => u.trim_end_matches('/').to_owned(),
            None => format!(
                "http://{}",
                headers
                    .get(header::HOST)
                    .and_then(|h| h.to_str().ok())
                    .filter(|h| h.bytes().all(|b| b.is_ascii_alphanumeric()
                        || matches!(b, b'.' | b'-' | b':' | b'[' | b']')))
                    .unwrap_or("localhost")
            ),
        };
    let url = format!("{base}/.well-known/oauth-protected-resource/t/{tenant}/mcp/{server}");
    let mut err = ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "Unauthorized")
        .detail("a bearer token of the tenant is required");
    if let Ok(v) = HeaderValue::from_str(&format!(
        "Bearer error=\"invalid_token\", resource_metadata=\"{url}\""
    )) {
        err = err.header(header::WWW_AUTHENTICATE, v);
    }
    err.into_response()
}

/// Whether a browser's `Origin` may reach the endpoint. Without one the
/// caller is not a browser and nothing is decided here. With one, it must
/// be `public_url`'s origin when Pinfold has one; without, a loopback origin
/// naming the host the request was sent to. A page that rebinds its own
/// name to Pinfold's address sends its own origin, so it is refused: the
/// transport asks servers to check this (DNS rebinding).
fn origin_allowed(st: &EndpointState, headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let Some(origin) = origin
        .to_str()
        .ok()
        .and_then(|o| reqwest::Url::parse(o).ok())
    else {
        return false;
    };
    if let Some(public) =
        st.0.config
            .public_url
            .as_deref()
            .and_then(|u| reqwest::Url::parse(u).ok())
    {
        return origin.origin() == public.origin();
    }
    let loopback = match origin.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    let authority = match (origin.host_str(), origin.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_owned(),
        _ => return false,
    };
    loopback
        && headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .is_some_and(|h| h.eq_ignore_ascii_case(&authority))
}

/// The caller, admitted to `tenant` with `client` or `admin`, from an
/// origin that may reach the endpoint.
fn admit(
    st: &EndpointState,
    headers: &HeaderMap,
    auth: Result<Auth, ApiError>,
    tenant: &str,
    server: &str,
) -> Result<(TenantId, Arc<Principal>), Response> {
    if !origin_allowed(st, headers) {
        return Err(transport_error(
            StatusCode::FORBIDDEN,
            -32600,
            "Forbidden: the request's Origin is not this server's",
        ));
    }
    let principal = match auth {
        Ok(Auth(p)) => p,
        Err(e) => {
            let resp = e.into_response();
            if resp.status() == StatusCode::UNAUTHORIZED {
                return Err(unauthorized(st, headers, tenant, server));
            }
            return Err(resp);
        }
    };
    let not_found = || pinfold_http::tenant::tenant_not_found().into_response();
    let tenant = TenantId::parse(tenant).map_err(|_| not_found())?;
    if principal.tenant.as_ref() != Some(&tenant) {
        return Err(not_found());
    }
    if !(principal.has(Role::Client) || principal.has(Role::Admin)) {
        return Err(ApiError::forbidden_role(&["client", "admin"]).into_response());
    }
    Ok((tenant, principal))
}

fn route_not_found() -> Response {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "guard_route_not_found",
        "Guard route not found",
    )
    .detail("no guard route is configured for this server")
    .into_response()
}

/// The route as this replica serves it, built or refreshed from the store.
async fn live(
    st: &EndpointState,
    tenant: &TenantId,
    server: &str,
) -> Result<Arc<LiveRoute>, Response> {
    let key = (tenant.clone(), server.to_ascii_lowercase());
    let cached = st.0.routes.get(&key);
    if let Some(l) = &cached
        && l.checked
            .lock()
            .map(|c| c.elapsed() < st.0.config.route_check)
            .unwrap_or(false)
    {
        return Ok(l.clone());
    }
    let route =
        st.0.store
            .route(tenant, server)
            .await
            .map_err(|e| store_error(&e))?
            .ok_or_else(route_not_found)?;
    let approved = st
        .0
        .approved
        .approved(tenant, &route.server, &route.version)
        .await
        .map_err(IntoResponse::into_response)?
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::CONFLICT,
                "no_approved_version",
                "No approved version",
            )
            .detail(format!(
                "the route pins {}, and no approved version of the server matches it: the guard serves nothing until one is approved",
                route.version.as_str()
            ))
            .into_response()
        })?;
    let mode = match route.mode {
        Some(m) => m,
        None => {
            st.0.approved
                .mode(tenant, &route.server)
                .await
                .map_err(IntoResponse::into_response)?
        }
    };
    let fingerprint = Fingerprint {
        revision: route.revision,
        digest: approved.digest.clone(),
        mode,
        calls: route.calls,
    };
    if let Some(l) = cached
        && l.fingerprint == fingerprint
    {
        if let Ok(mut c) = l.checked.lock() {
            *c = Instant::now();
        }
        return Ok(l);
    }
    let limits = &st.0.config.limits;
    let card = ServerCard::from_value(&approved.card, limits).map_err(|_| {
        tracing::error!(server = %route.server, "the approved card does not read");
        ApiError::internal().into_response()
    })?;
    let target = target(st, tenant, &route, &card).await?;
    let prepared = PreparedSignature::new(&approved.card, limits)
        .ok()
        .map(Arc::new);
    let on_drift = drift_hook(st, tenant, &route, &approved.version, &approved.digest);
    let l = LiveRoute::start(
        tenant.clone(),
        fingerprint,
        target,
        approved,
        card.signature,
        prepared,
        TaskConfig {
            outbound: outbound(st),
            limits: limits.clone(),
            probe_budget: st.0.config.probe_budget,
            review_interval: st.0.config.review_interval,
        },
        on_drift,
    );
    st.0.routes.insert(key, l.clone());
    Ok(l)
}

fn outbound(st: &EndpointState) -> Outbound {
    Outbound {
        egress: st.0.egress.egress.clone(),
        max_bytes: st.0.config.max_response_bytes,
        timeout: st.0.config.upstream_timeout,
    }
}

fn store_error(e: &crate::store::StoreError) -> Response {
    match e {
        crate::store::StoreError::Unavailable(m) => {
            tracing::error!(error = %m, "database unavailable");
            ApiError::database_unavailable().into_response()
        }
        other => {
            tracing::error!(error = %other, "database error");
            ApiError::internal().into_response()
        }
    }
}

/// The upstream of a route: its URL (else the card's one `streamable-http`
/// remote), its headers opened, the tenant's egress rules.
async fn target(
    st: &EndpointState,
    tenant: &TenantId,
    route: &GuardRoute,
    card: &ServerCard,
) -> Result<Target, Response> {
    let url = match &route.upstream_url {
        Some(u) => u.clone(),
        None => {
            let remotes: Vec<&str> = card
                .remotes
                .iter()
                .filter(|r| r.get("type").and_then(Value::as_str) == Some("streamable-http"))
                .filter_map(|r| r.get("url").and_then(Value::as_str))
                .collect();
            match remotes.as_slice() {
                [one] => (*one).to_owned(),
                _ => {
                    return Err(ApiError::new(
                        StatusCode::CONFLICT,
                        "guard_upstream_unknown",
                        "Upstream unknown",
                    )
                    .detail("the route names no upstream URL and the approved card does not list exactly one streamable-http remote")
                    .into_response());
                }
            }
        }
    };
    let url = reqwest::Url::parse(&url).map_err(|_| ApiError::internal().into_response())?;
    let mut headers = HeaderMap::new();
    if let Some(sealed) = &route.headers_sealed {
        let plain =
            st.0.sealer
                .open(tenant, &headers_context(&route.server), sealed)
                .map_err(|e| {
                    tracing::error!(error = %e, "sealed guard route headers do not open");
                    ApiError::internal().into_response()
                })?;
        let pairs: Vec<(String, String)> = serde_json::from_slice(&plain).map_err(|_| {
            tracing::error!("sealed guard route headers are not JSON");
            ApiError::internal().into_response()
        })?;
        for (k, v) in pairs {
            if let (Ok(k), Ok(v)) = (
                axum::http::HeaderName::from_bytes(k.as_bytes()),
                HeaderValue::from_str(&v),
            ) {
                headers.insert(k, v);
            }
        }
    }
    let rules =
        st.0.egress
            .rules(tenant)
            .await
            .map_err(IntoResponse::into_response)?;
    Ok(Target {
        url,
        headers,
        rules,
    })
}

/// Records each distinct drift once (across replicas) as an audit event.
fn drift_hook(
    st: &EndpointState,
    tenant: &TenantId,
    route: &GuardRoute,
    version: &str,
    digest: &str,
) -> live::DriftHook {
    let store = st.0.store.clone();
    let stats = st.0.stats.clone();
    let tenant = tenant.clone();
    let server = route.server.clone();
    let version = version.to_owned();
    let digest = digest.to_owned();
    Arc::new(move |review: Arc<ToolsReview>| {
        let drifts: Vec<Value> = review
            .drifts()
            .iter()
            .map(|d| {
                json!({
                    "tool": d.tool,
                    "standing": d.standing,
                    "class": d.class.as_str(),
                    "changes": d.changes.iter().map(|c| c.kind).collect::<Vec<_>>(),
                    "withheld": d.withheld,
                })
            })
            .collect();
        let event = NewAuditEvent::new(
            "guard.drift",
            "pinfold-guard",
            Timestamp::from_millis(now_ms()),
            json!({
                "route": server,
                "mode": review.mode().as_str(),
                "pinned_digest": digest,
                "upstream_digest": review.upstream_digest(),
                "drifts": drifts,
            }),
        )
        .about(&server, &version);
        for d in review.drifts() {
            tracing::warn!(server = %server, tool = %d.tool, class = d.class.as_str(),
                withheld = d.withheld, "guard: the upstream drifted from the signature");
        }
        let (store, stats, tenant, server, digest) = (
            store.clone(),
            stats.clone(),
            tenant.clone(),
            server.clone(),
            digest.clone(),
        );
        let upstream = review.upstream_digest().to_owned();
        tokio::spawn(async move {
            match store
                .record_drift(&tenant, &server, &digest, &upstream, &event)
                .await
            {
                Ok(true) => {
                    stats.drifts.fetch_add(1, Ordering::Relaxed);
                }
                Ok(false) => {}
                Err(e) => tracing::error!(error = %e, "recording a guard drift failed"),
            }
        });
    })
}

/// Headers passed from the client to the upstream: the protocol version,
/// W3C trace context, `Last-Event-ID`, and the 2026-07-28 method headers.
fn passed(headers: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for name in [
        PROTOCOL_HEADER,
        LAST_EVENT_ID,
        METHOD_HEADER,
        NAME_HEADER,
        axum::http::HeaderName::from_static("traceparent"),
        axum::http::HeaderName::from_static("tracestate"),
    ] {
        if let Some(v) = headers.get(&name) {
            out.insert(name, v.clone());
        }
    }
    out
}

fn header_str<'a>(headers: &'a HeaderMap, name: &axum::http::HeaderName) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The 2026-07-28 request headers must say what the body says.
fn check_modern_headers(headers: &HeaderMap, msg: &Value) -> Result<(), String> {
    let method = msg.get("method").and_then(Value::as_str);
    if let (Some(h), Some(m)) = (header_str(headers, &METHOD_HEADER), method)
        && h != m
    {
        return Err(format!(
            "Mcp-Method {h:?} does not match the body's method {m:?}"
        ));
    }
    if let Some(h) = header_str(headers, &NAME_HEADER) {
        let name = msg
            .pointer("/params/name")
            .or_else(|| msg.pointer("/params/uri"))
            .and_then(Value::as_str);
        if name != Some(h) {
            return Err(format!("Mcp-Name {h:?} does not match the body"));
        }
    }
    if let (Some(h), Some(v)) = (
        header_str(headers, &PROTOCOL_HEADER),
        msg.pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion")
            .and_then(Value::as_str),
    ) && h != v
    {
        return Err(format!(
            "MCP-Protocol-Version {h:?} does not match the request's _meta protocol version {v:?}"
        ));
    }
    Ok(())
}

/// Whether a request is a 2026-07-28 one (its `_meta` names the version).
fn is_modern(msg: &Value) -> bool {
    msg.pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion")
        .and_then(Value::as_str)
        == Some(live::MODERN_VERSION)
}

fn advertises_extension(caps: Option<&Value>) -> bool {
    caps.and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(guard::TOOL_RESOLUTION))
        .is_some()
}

fn unavailable(id: &Value, state: &ReviewState) -> Value {
    match state {
        ReviewState::Failed(why) => error(
            id,
            json!({"code": UPSTREAM_UNAVAILABLE, "message": format!("Pinfold guard: {why}"),
                "data": {"reason": "upstream_unavailable"}}),
        ),
        _ => error(
            id,
            json!({"code": NOT_READY, "message": "Pinfold guard: the upstream's tools are still being reviewed",
                "data": {"reason": "not_ready"}}),
        ),
    }
}

fn upstream_failed(id: &Value, e: &UpstreamError) -> Value {
    error(
        id,
        json!({"code": UPSTREAM_UNAVAILABLE, "message": format!("Pinfold guard: {e}"),
            "data": {"reason": "upstream_unavailable"}}),
    )
}

/// What a request from a client is, once admitted.
struct Call {
    tenant: TenantId,
    /// The client's message as it was sent (forwarded unchanged).
    body: Option<Bytes>,
    live: Arc<LiveRoute>,
    /// The upstream's session (2025-11-25), from the client's sealed id.
    upstream_session: Option<String>,
    extension: bool,
    modern: bool,
    pass: HeaderMap,
}

/// `POST`: one JSON-RPC message from the client.
async fn post_mcp(
    State(st): State<EndpointState>,
    Path((tenant, server)): Path<(String, String)>,
    headers: HeaderMap,
    auth: Result<Auth, ApiError>,
    body: Bytes,
) -> Response {
    let (tenant, principal) = match admit(&st, &headers, auth, &tenant, &server) {
        Ok(a) => a,
        Err(r) => return r,
    };
    let msg: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(_) => {
            return transport_error(
                StatusCode::BAD_REQUEST,
                -32700,
                "Parse error: the body is not JSON",
            );
        }
    };
    if msg.is_array() {
        return transport_error(
            StatusCode::BAD_REQUEST,
            -32600,
            "Invalid Request: batches are not part of this protocol revision; send one message per request",
        );
    }
    if !msg.is_object() {
        return transport_error(
            StatusCode::BAD_REQUEST,
            -32600,
            "Invalid Request: not a JSON-RPC message",
        );
    }
    let live = match live(&st, &tenant, &server).await {
        Ok(l) => l,
        Err(r) => return r,
    };
    let method = msg.get("method").and_then(Value::as_str).map(str::to_owned);
    let id = msg.get("id").cloned();
    let pass = passed(&headers);
    let modern = is_modern(&msg);
    if modern && let Err(why) = check_modern_headers(&headers, &msg) {
        return transport_error(
            StatusCode::BAD_REQUEST,
            -32600,
            &format!("Invalid Request: {why}"),
        );
    }
    if method.as_deref() == Some("initialize") {
        return initialize(&st, &tenant, &principal, &live, msg, pass).await;
    }
    if method.as_deref() == Some("server/discover") {
        return discover(&st, &live, msg, pass).await;
    }
    let session_id = header_str(&headers, &SESSION_HEADER);
    let (upstream_session, extension) = match session_id {
        Some(sid) => match ClientSession::open(&*st.0.sealer, &tenant, &server, sid, now_ms()) {
            Some(s) if s.sub == principal.sub && s.digest == live.approved.digest => {
                (s.upstream, s.extension)
            }
            _ => {
                return transport_error(
                    StatusCode::NOT_FOUND,
                    -32001,
                    "Session not found: start a new session with initialize",
                );
            }
        },
        None if modern => (
            None,
            advertises_extension(
                msg.pointer("/params/_meta/io.modelcontextprotocol~1clientCapabilities"),
            ),
        ),
        None => {
            return transport_error(
                StatusCode::BAD_REQUEST,
                -32600,
                "Bad Request: Mcp-Session-Id is required after initialize",
            );
        }
    };
    let call = Call {
        tenant,
        body: Some(body),
        live,
        upstream_session,
        extension,
        modern,
        pass,
    };
    let (Some(method), Some(id)) = (method, id) else {
        // A notification, or the client's answer to a request of the
        // upstream's: it goes on as it is.
        return forward(&st, &call, &msg, None).await;
    };
    match method.as_str() {
        "tools/list" => match call.live.review(st.0.config.review_wait).await {
            Ok(review) => {
                let rendered = call.live.list_bytes(&review, call.extension, call.modern);
                // The result is rendered once per review and view; only
                // the envelope with this request's id is written here.
                let id = serde_json::to_vec(&id).unwrap_or_else(|_| b"null".to_vec());
                let mut out = Vec::with_capacity(rendered.len() + id.len() + 40);
                out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
                out.extend_from_slice(&id);
                out.extend_from_slice(b",\"result\":");
                out.extend_from_slice(&rendered);
                out.push(b'}');
                let mut resp = (
                    [(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    )],
                    out,
                )
                    .into_response();
                resp.extensions_mut()
                    .insert(pinfold_http::problem::NotAProblem);
                resp
            }
            Err(state) => json_response(StatusCode::OK, &unavailable(&id, &state)),
        },
        "tools/call" => tools_call(&st, &call, &id, &msg).await,
        "tools/resolve" | "tools/annotations" => resolve_for_client(&st, &call, &id, &msg).await,
        "prompts/get" => {
            let name = msg
                .pointer("/params/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            match guard::prompt_get(&call.live.signature, name, call.live.fingerprint.mode) {
                Ok(()) => forward(&st, &call, &msg, None).await,
                Err(r) => refuse(&st, &id, r.to_error()),
            }
        }
        "resources/read" => {
            let uri = msg
                .pointer("/params/uri")
                .and_then(Value::as_str)
                .unwrap_or("");
            match guard::resource_read(&call.live.signature, uri, call.live.fingerprint.mode) {
                Ok(()) => forward(&st, &call, &msg, None).await,
                Err(r) => refuse(&st, &id, r.to_error()),
            }
        }
        "prompts/list" => forward(&st, &call, &msg, Some("prompts")).await,
        "resources/list" => forward(&st, &call, &msg, Some("resources")).await,
        "resources/templates/list" => forward(&st, &call, &msg, Some("resourceTemplates")).await,
        _ => forward(&st, &call, &msg, None).await,
    }
}

fn refuse(st: &EndpointState, id: &Value, err: Value) -> Response {
    st.0.stats.refused.fetch_add(1, Ordering::Relaxed);
    json_response(StatusCode::OK, &error(id, err))
}

/// `initialize`: forwarded; the client's session id seals the upstream's.
async fn initialize(
    st: &EndpointState,
    tenant: &TenantId,
    principal: &Principal,
    live: &LiveRoute,
    msg: Value,
    mut pass: HeaderMap,
) -> Response {
    let id = msg.get("id").cloned().unwrap_or(Value::Null);
    pass.remove(PROTOCOL_HEADER);
    let ex = Exchange {
        session: None,
        pass,
    };
    let answered = match outbound(st).call(&live.target, &msg, &ex).await {
        Ok(a) => a,
        Err(e) => return json_response(StatusCode::OK, &upstream_failed(&id, &e)),
    };
    let Some(mut resp) = answered.response else {
        return json_response(
            StatusCode::OK,
            &upstream_failed(
                &id,
                &UpstreamError::Protocol("no answer to initialize".into()),
            ),
        );
    };
    strip_reserved_meta(&mut resp);
    let mut response = json_response(StatusCode::OK, &resp);
    if resp.get("result").is_some() {
        let session = ClientSession {
            sub: principal.sub.clone(),
            upstream: answered.session,
            digest: live.approved.digest.clone(),
            extension: advertises_extension(msg.pointer("/params/capabilities")),
            issued_ms: now_ms(),
        };
        match session
            .seal(&*st.0.sealer, tenant, &live.approved.server)
            .and_then(|s| HeaderValue::from_str(&s).ok())
        {
            Some(v) => {
                response.headers_mut().insert(SESSION_HEADER, v);
            }
            None => return ApiError::internal().into_response(),
        }
    }
    response
}

/// `server/discover`: forwarded when the upstream offers 2026-07-28, else
/// "method not found", which makes the client fall back to `initialize`.
async fn discover(st: &EndpointState, live: &LiveRoute, msg: Value, pass: HeaderMap) -> Response {
    let id = msg.get("id").cloned().unwrap_or(Value::Null);
    if live.modern().is_none() {
        let _ = live.review(st.0.config.review_wait).await;
    }
    if live.modern() != Some(true) {
        return json_response(
            StatusCode::OK,
            &error(
                &id,
                error_object(-32601, "Method not found: server/discover"),
            ),
        );
    }
    let ex = Exchange {
        session: None,
        pass,
    };
    match outbound(st).call(&live.target, &msg, &ex).await {
        Ok(Answered {
            response: Some(mut r),
            ..
        }) => {
            strip_reserved_meta(&mut r);
            json_response(StatusCode::OK, &r)
        }
        Ok(_) => json_response(
            StatusCode::OK,
            &upstream_failed(&id, &UpstreamError::Protocol("no answer".into())),
        ),
        Err(e) => json_response(StatusCode::OK, &upstream_failed(&id, &e)),
    }
}

use upstream::Answered;

/// `tools/call`: refused, answered with a tool execution error, or
/// forwarded.
async fn tools_call(st: &EndpointState, call: &Call, id: &Value, msg: &Value) -> Response {
    let review = match call.live.review(st.0.config.review_wait).await {
        Ok(r) => r,
        Err(state) => return json_response(StatusCode::OK, &unavailable(id, &state)),
    };
    let Some(name) = msg.pointer("/params/name").and_then(Value::as_str) else {
        return json_response(
            StatusCode::OK,
            &error(
                id,
                error_object(-32602, "Invalid params: tools/call needs a tool name"),
            ),
        );
    };
    let tool = match review.call(name) {
        Ok(t) => t,
        Err(refusal) => {
            tracing::info!(tenant = %call.tenant, tool = name, reason = refusal.reason.as_str(),
                "guard: refused a call");
            return refuse(st, id, refusal.to_error());
        }
    };
    let prepared = call.live.prepared.as_ref().and_then(|p| p.tool(name));
    if tool.standing() != Standing::Undeclared
        && let Some(p) = prepared
    {
        let empty = json!({});
        let arguments = msg.pointer("/params/arguments").unwrap_or(&empty);
        if let Err(e) = p.validate(arguments) {
            return json_response(
                StatusCode::OK,
                &result(id, guard::invalid_arguments(name, &e)),
            );
        }
    }
    let calls = call.live.fingerprint.calls;
    let mut resolved: Option<Annotations> = None;
    if calls != CallsPolicy::All
        && tool.standing() != Standing::Undeclared
        && let Some(p) = prepared
        && let Some(method) = p.kind().method()
    {
        resolved = resolve_annotations(st, call, p, method, name, msg).await;
    }
    if let Err(res) = tool.check_policy(calls, resolved.as_ref()) {
        tracing::info!(tenant = %call.tenant, tool = name, calls = calls.as_str(),
            "guard: refused a call under the route's calls policy");
        st.0.stats.refused.fetch_add(1, Ordering::Relaxed);
        return json_response(StatusCode::OK, &result(id, res));
    }
    forward(st, call, msg, None).await
}

/// A client's own `tools/resolve` (SEP-1862) or `tools/annotations`: for a
/// tool not shown, refused like a call; else forwarded, and the answer
/// checked against the signature. An answer outside it is replaced by the
/// worst case in the answer's own shape (`{tool}`, or the extension's
/// `{resultType, name, annotations}`), as the resolve service serves it.
async fn resolve_for_client(st: &EndpointState, call: &Call, id: &Value, msg: &Value) -> Response {
    let review = match call.live.review(st.0.config.review_wait).await {
        Ok(r) => r,
        Err(state) => return json_response(StatusCode::OK, &unavailable(id, &state)),
    };
    let name = msg
        .pointer("/params/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if let Err(refusal) = review.call(name) {
        return refuse(st, id, refusal.to_error());
    }
    let ex = Exchange {
        session: call.upstream_session.clone(),
        pass: call.pass.clone(),
    };
    st.0.stats.forwarded.fetch_add(1, Ordering::Relaxed);
    let answered = match outbound(st).call(&call.live.target, msg, &ex).await {
        Ok(a) => a,
        Err(UpstreamError::SessionGone) => {
            return transport_error(
                StatusCode::NOT_FOUND,
                -32001,
                "Session not found: the upstream ended the session; start a new one with initialize",
            );
        }
        Err(e) => return json_response(StatusCode::OK, &upstream_failed(id, &e)),
    };
    let Some(mut resp) = answered.response else {
        return json_response(
            StatusCode::OK,
            &upstream_failed(id, &UpstreamError::Protocol("no answer".into())),
        );
    };
    strip_reserved_meta(&mut resp);
    let prepared = call.live.prepared.as_ref().and_then(|p| p.tool(name));
    if let (Some(result), Some(p)) = (resp.get_mut("result"), prepared) {
        let within = p
            .check(result, &st.0.config.limits)
            .is_ok_and(|r| r.conformant);
        if !within {
            tracing::info!(tenant = %call.tenant, tool = name,
                "guard: an upstream resolution outside the signature is served as the worst case");
            let worst = p.worst_case();
            if result.get("tool").is_some() {
                *result = json!({ "tool": worst });
            } else {
                result["annotations"] = worst.get("annotations").cloned().unwrap_or(json!({}));
            }
        }
    }
    json_response(StatusCode::OK, &resp)
}

/// The upstream's resolution of one call's annotations (SEP-1862), when it
/// is within the signature; `None` (the worst case) otherwise.
async fn resolve_annotations(
    st: &EndpointState,
    call: &Call,
    p: &pinfold_resolve_check::prepared::PreparedTool,
    method: &str,
    name: &str,
    msg: &Value,
) -> Option<Annotations> {
    let arguments = msg
        .pointer("/params/arguments")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let mut meta = json!({"io.modelcontextprotocol/clientCapabilities":
        {"extensions": {guard::TOOL_RESOLUTION: {}}}});
    if call.modern {
        meta["io.modelcontextprotocol/protocolVersion"] = json!(live::MODERN_VERSION);
    }
    let req = json!({"jsonrpc": "2.0", "id": "pinfold-guard-resolve", "method": method,
        "params": {"name": name, "arguments": arguments, "_meta": meta}});
    let mut pass = call.pass.clone();
    pass.remove(NAME_HEADER);
    if call.modern {
        pass.insert(METHOD_HEADER, HeaderValue::from_static("tools/resolve"));
        if let Ok(v) = HeaderValue::from_str(method) {
            pass.insert(METHOD_HEADER, v);
        }
    } else {
        pass.remove(METHOD_HEADER);
    }
    let ex = Exchange {
        session: call.upstream_session.clone(),
        pass,
    };
    let answered = outbound(st).call(&call.live.target, &req, &ex).await.ok()?;
    let result = answered.response?.get("result")?.clone();
    let report = p.check(&result, &st.0.config.limits).ok()?;
    if !report.conformant {
        return None;
    }
    let served = p.served_tool(result).to_value();
    let mut errors = pinfold_core::error::ValidationErrors::new();
    let a = Annotations::parse(&served["annotations"], "", &mut errors);
    errors.is_empty().then_some(a)
}

/// Rewrites one message the upstream sent to the client: reserved `_meta`
/// removed, a list answer cut to the signature, a list change noted.
fn rewrite(
    live: &LiveRoute,
    mut msg: Value,
    cut: Option<(&Value, &str)>,
    limits: &Limits,
) -> Value {
    strip_reserved_meta(&mut msg);
    if msg.get("method").and_then(Value::as_str) == Some("notifications/tools/list_changed") {
        live.stale();
    }
    if let Some((id, key)) = cut
        && msg.get("method").is_none()
        && msg.get("id") == Some(id)
        && let Some(r) = msg.get("result")
    {
        match guard::review_list(&live.signature, r, key, live.fingerprint.mode, limits) {
            Ok((shown, undeclared)) => {
                if !undeclared.is_empty() {
                    tracing::info!(kind = key, items = ?undeclared, "guard: undeclared items in a list");
                }
                msg["result"] = shown;
            }
            Err(_) => {
                return error(
                    id,
                    error_object(
                        -32603,
                        &format!("the upstream's {key} list cannot be read by the guard"),
                    ),
                );
            }
        }
    }
    msg
}

/// Forwards `msg` upstream and passes the answer back (a JSON body, or an
/// event stream rewritten event by event).
async fn forward(
    st: &EndpointState,
    call: &Call,
    msg: &Value,
    cut: Option<&'static str>,
) -> Response {
    let id = msg.get("id").cloned().unwrap_or(Value::Null);
    // The client's bytes as sent: what was decided on is what goes on.
    let body = match &call.body {
        Some(b) => b.to_vec(),
        None => serde_json::to_vec(msg).unwrap_or_default(),
    };
    let ex = Exchange {
        session: call.upstream_session.clone(),
        pass: call.pass.clone(),
    };
    st.0.stats.forwarded.fetch_add(1, Ordering::Relaxed);
    let resp = match outbound(st)
        .send(&call.live.target, Method::POST, Some(body), &ex, true)
        .await
    {
        Ok(r) => r,
        Err(e) => return json_response(StatusCode::OK, &upstream_failed(&id, &e)),
    };
    pass_back(st, call.live.clone(), resp, cut.map(|k| (id, k))).await
}

/// An upstream answer passed back to the client.
async fn pass_back(
    st: &EndpointState,
    live: Arc<LiveRoute>,
    mut resp: reqwest::Response,
    cut: Option<(Value, &'static str)>,
) -> Response {
    let status = StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    if status == StatusCode::NOT_FOUND {
        return transport_error(
            StatusCode::NOT_FOUND,
            -32001,
            "Session not found: the upstream ended the session; start a new one with initialize",
        );
    }
    if status == StatusCode::ACCEPTED || status == StatusCode::NO_CONTENT {
        return status.into_response();
    }
    let max = st.0.config.max_response_bytes;
    let limits = st.0.config.limits.clone();
    if upstream::is_type(resp.headers(), "text/event-stream") && status.is_success() {
        let events = upstream::events(resp, max);
        let body = events.map(move |ev| -> Result<Bytes, std::io::Error> {
            let ev = ev.map_err(|e| std::io::Error::other(e.to_string()))?;
            let mut out = String::new();
            if let Some(id) = &ev.id {
                out.push_str("id: ");
                out.push_str(id);
                out.push('\n');
            }
            if let Some(r) = ev.retry {
                out.push_str(&format!("retry: {r}\n"));
            }
            match event_message(&ev) {
                Some(m) => {
                    let m = rewrite(&live, m, cut.as_ref().map(|(i, k)| (i, *k)), &limits);
                    out.push_str("event: message\ndata: ");
                    out.push_str(&serde_json::to_string(&m).unwrap_or_default());
                    out.push('\n');
                }
                None => out.push_str("data: \n"),
            }
            out.push('\n');
            Ok(Bytes::from(out))
        });
        let mut r = Response::new(Body::from_stream(body));
        *r.status_mut() = status;
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        r.extensions_mut()
            .insert(pinfold_http::problem::NotAProblem);
        return r;
    }
    let bytes = match pinfold_egress::body::read_body(&mut resp, max).await {
        Ok(b) => b,
        Err(_) => {
            return json_response(
                StatusCode::OK,
                &upstream_failed(
                    cut.as_ref().map_or(&Value::Null, |(i, _)| i),
                    &UpstreamError::TooLarge(max),
                ),
            );
        }
    };
    // Nothing of ours to remove, no list to cut: the answer goes back as
    // it came, unparsed (a notification would come on a stream, not here).
    if cut.is_none() && !contains(&bytes, guard::PINFOLD_META_PREFIX.as_bytes()) {
        let mut r = (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            Bytes::from(bytes),
        )
            .into_response();
        r.extensions_mut()
            .insert(pinfold_http::problem::NotAProblem);
        return r;
    }
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(v) if v.is_object() => {
            let v = rewrite(&live, v, cut.as_ref().map(|(i, k)| (i, *k)), &limits);
            json_response(status, &v)
        }
        _ => {
            let mut r = (status, Bytes::from(bytes)).into_response();
            r.extensions_mut()
                .insert(pinfold_http::problem::NotAProblem);
            r
        }
    }
}

/// Whether `needle` occurs in `haystack`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// The session a `GET` or `DELETE` names, opened.
async fn session_call(
    st: &EndpointState,
    headers: &HeaderMap,
    auth: Result<Auth, ApiError>,
    tenant: &str,
    server: &str,
) -> Result<Call, Response> {
    let (tenant, principal) = admit(st, headers, auth, tenant, server)?;
    let live = live(st, &tenant, server).await?;
    let Some(sid) = header_str(headers, &SESSION_HEADER) else {
        return Err(transport_error(
            StatusCode::BAD_REQUEST,
            -32600,
            "Bad Request: Mcp-Session-Id is required",
        ));
    };
    match ClientSession::open(&*st.0.sealer, &tenant, server, sid, now_ms()) {
        Some(s) if s.sub == principal.sub && s.digest == live.approved.digest => Ok(Call {
            tenant,
            body: None,
            live,
            upstream_session: s.upstream,
            extension: s.extension,
            modern: false,
            pass: passed(headers),
        }),
        _ => Err(transport_error(
            StatusCode::NOT_FOUND,
            -32001,
            "Session not found: start a new session with initialize",
        )),
    }
}

/// `GET`: the session's stream of the upstream's own messages.
async fn get_mcp(
    State(st): State<EndpointState>,
    Path((tenant, server)): Path<(String, String)>,
    headers: HeaderMap,
    auth: Result<Auth, ApiError>,
) -> Response {
    let call = match session_call(&st, &headers, auth, &tenant, &server).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let ex = Exchange {
        session: call.upstream_session.clone(),
        pass: call.pass.clone(),
    };
    match outbound(&st)
        .send(&call.live.target, Method::GET, None, &ex, true)
        .await
    {
        Ok(resp) => pass_back(&st, call.live.clone(), resp, None).await,
        Err(e) => transport_error(
            StatusCode::BAD_GATEWAY,
            UPSTREAM_UNAVAILABLE,
            &format!("Pinfold guard: {e}"),
        ),
    }
}

/// `DELETE`: ends the session upstream.
async fn delete_mcp(
    State(st): State<EndpointState>,
    Path((tenant, server)): Path<(String, String)>,
    headers: HeaderMap,
    auth: Result<Auth, ApiError>,
) -> Response {
    let call = match session_call(&st, &headers, auth, &tenant, &server).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    if call.upstream_session.is_none() {
        return StatusCode::NO_CONTENT.into_response();
    }
    let ex = Exchange {
        session: call.upstream_session.clone(),
        pass: call.pass.clone(),
    };
    match outbound(&st)
        .send(&call.live.target, Method::DELETE, None, &ex, false)
        .await
    {
        Ok(resp) => StatusCode::from_u16(resp.status().as_u16())
            .unwrap_or(StatusCode::BAD_GATEWAY)
            .into_response(),
        Err(e) => transport_error(
            StatusCode::BAD_GATEWAY,
            UPSTREAM_UNAVAILABLE,
            &format!("Pinfold guard: {e}"),
        ),
    }
}
