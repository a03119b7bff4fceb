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
//!
//! The handlers here admit a request (`admission`), find the route as
//! this replica serves it (`lookup`), read what the transport says
//! (`protocol`), and then answer the tools themselves (`tools`) or
//! forward and pass the answer back (`forward`). A call's per-call
//! resolution goes through the server's resolve engine
//! ([`source::Resolver`]).

// A handler's early answer is a whole `Response`: carrying it in the `Err`
// of the helpers that decide it is the point, not an accident of size.
#![allow(clippy::result_large_err)]

mod admission;
mod context;
mod forward;
pub mod head;
pub mod live;
mod lookup;
mod protocol;
pub mod rpc;
pub mod session;
pub mod source;
mod tools;
pub mod upstream;

use axum::Extension;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use pinfold_core::guard::{self, UPSTREAM_UNAVAILABLE};
use pinfold_http::auth::Auth;
use pinfold_http::problem::ApiError;
use pinfold_http::ratelimit::Charge;
use reqwest::Method;
use serde_json::Value;

use admission::admit;
use context::{Call, now_ms};
pub use context::{EndpointState, GuardConfig, GuardStats};
use forward::{discover, forward, initialize, pass_back};
use lookup::{live, outbound};
use protocol::{check_modern_headers, header_str, passed};
use rpc::transport_error;
use session::ClientSession;

use tools::{refuse, resolve_for_client, served_list, tools_call};
use upstream::{Exchange, SESSION_HEADER};

/// The endpoint's path template.
pub const PATH: &str = "/t/{tenant}/mcp/{*server}";

/// The endpoint's router (not part of the REST API's OpenAPI document: it
/// speaks MCP).
pub fn router() -> Router<EndpointState> {
    Router::new().route(PATH, post(post_mcp).get(get_mcp).delete(delete_mcp))
}

/// Why a body that is not a message the endpoint can read is refused:
/// not JSON (`-32700`), a batch, or not a JSON-RPC message (`-32600`).
fn unreadable(body: &[u8]) -> Response {
    match serde_json::from_slice::<Value>(body) {
        Err(_) => transport_error(
            StatusCode::BAD_REQUEST,
            -32700,
            "Parse error: the body is not JSON",
        ),
        Ok(v) if v.is_array() => transport_error(
            StatusCode::BAD_REQUEST,
            -32600,
            "Invalid Request: batches are not part of this protocol revision; send one message per request",
        ),
        Ok(v) if v.is_object() => transport_error(
            StatusCode::BAD_REQUEST,
            -32600,
            "Invalid Request: a member of the message has the wrong type",
        ),
        Ok(_) => transport_error(
            StatusCode::BAD_REQUEST,
            -32600,
            "Invalid Request: not a JSON-RPC message",
        ),
    }
}

/// `POST`: one JSON-RPC message from the client, its body read under the
/// server's body limit and handed to [`EndpointState::message`].
async fn post_mcp(
    State(st): State<EndpointState>,
    Path((tenant, server)): Path<(String, String)>,
    auth: Result<Auth, ApiError>,
    req: Request,
) -> Response {
    // The headers are taken, not copied.
    let (mut parts, body) = req.into_parts();
    let headers = std::mem::take(&mut parts.headers);
    let charge = parts.extensions.remove::<Charge>();
    let body = match Bytes::from_request(Request::from_parts(parts, body), &()).await {
        Ok(b) => b,
        Err(rejection) => return rejection.into_response(),
    };
    st.message(&tenant, &server, auth, charge, headers, body)
        .await
}

/// Charges an admitted caller's message to the `guard` rate-limit class
/// (the server hands the endpoint its [`Charge`] when limits are on): over
/// the tenant's or the caller's limit, `429` with `Retry-After`, and the
/// message goes nowhere.
fn charged(
    charge: Option<Charge>,
    tenant: &pinfold_core::ids::TenantId,
    principal: &pinfold_http::auth::Principal,
) -> Result<(), Response> {
    match charge {
        Some(c) => c
            .limiter
            .check(tenant, principal, c.class)
            .map_err(|limited| limited.into_error().into_response()),
        None => Ok(()),
    }
}

impl EndpointState {
    /// One JSON-RPC message from a client to `server`'s route in
    /// `tenant` (the path's segments, percent-decoded), its body read:
    /// what a `POST` on the endpoint answers. The server also calls this
    /// before routing, for a caller it authenticated from memory, so the
    /// endpoint's hottest requests skip the router's work.
    ///
    /// The message is read in two steps: its head (method, id, name, the
    /// per-request `_meta` the endpoint decides on) without building a
    /// tree, which is all a `tools/list` needs; the whole message only for
    /// what is forwarded or checked member by member.
    ///
    /// `charge` is the rate limiter's class for the endpoint (`None` when
    /// limits are off): an admitted caller's message is charged to it
    /// before the message is parsed.
    pub async fn message(
        &self,
        tenant: &str,
        server: &str,
        auth: Result<Auth, ApiError>,
        charge: Option<Charge>,
        headers: HeaderMap,
        body: Bytes,
    ) -> Response {
        let st = self;
        let (tenant, principal) = match admit(st, &headers, auth, tenant, server) {
            Ok(a) => a,
            Err(r) => return r,
        };
        if let Err(r) = charged(charge, &tenant, &principal) {
            return r;
        }
        let Ok(head) = head::read(&body) else {
            return unreadable(&body);
        };
        if !head.id_is_valid() {
            return transport_error(
                StatusCode::BAD_REQUEST,
                -32600,
                "Invalid Request: an id is a string, a number or null",
            );
        }
        let live = match live(st, &tenant, server).await {
            Ok(l) => l,
            Err(r) => return r,
        };
        let modern = head.is_modern();
        if modern && let Err(why) = check_modern_headers(&headers, &head) {
            return transport_error(
                StatusCode::BAD_REQUEST,
                -32600,
                &format!("Invalid Request: {why}"),
            );
        }
        let method = head.method.as_deref();
        if matches!(method, Some("initialize" | "server/discover")) {
            let Ok(msg) = serde_json::from_slice::<Value>(&body) else {
                return unreadable(&body);
            };
            let pass = passed(&headers);
            if method == Some("initialize") {
                return initialize(st, &tenant, &principal, &live, msg, pass).await;
            }
            return discover(st, &live, msg, pass).await;
        }
        let session_id = header_str(&headers, &SESSION_HEADER);
        let (upstream_session, extension) = match session_id {
            Some(sid) => match ClientSession::open(&*st.0.sealer, &tenant, server, sid, now_ms()) {
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
            None if modern => (None, head.extension),
            None => {
                return transport_error(
                    StatusCode::BAD_REQUEST,
                    -32600,
                    "Bad Request: Mcp-Session-Id is required after initialize",
                );
            }
        };
        if method == Some("tools/list")
            && let Some(id) = head.id
        {
            return served_list(st, &live, extension, modern, id).await;
        }
        let Ok(msg) = serde_json::from_slice::<Value>(&body) else {
            return unreadable(&body);
        };
        let method = method.map(str::to_owned);
        let id = msg.get("id").cloned();
        let pass = passed(&headers);
        let call = Call {
            tenant,
            body: Some(body),
            live,
            upstream_session,
            pass,
        };
        let (Some(method), Some(id)) = (method, id) else {
            // A notification, or the client's answer to a request of the
            // upstream's: it goes on as it is.
            return forward(st, &call, &msg, None).await;
        };
        match method.as_str() {
            "tools/call" => tools_call(st, &call, &id, &msg).await,
            "tools/resolve" | "tools/annotations" => resolve_for_client(st, &call, &id, &msg).await,
            "prompts/get" => {
                let name = msg
                    .pointer("/params/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                match guard::prompt_get(&call.live.signature, name, call.live.fingerprint.mode) {
                    Ok(()) => forward(st, &call, &msg, None).await,
                    Err(r) => refuse(st, &id, r.to_error()),
                }
            }
            "resources/read" => {
                let uri = msg
                    .pointer("/params/uri")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                match guard::resource_read(&call.live.signature, uri, call.live.fingerprint.mode) {
                    Ok(()) => forward(st, &call, &msg, None).await,
                    Err(r) => refuse(st, &id, r.to_error()),
                }
            }
            "prompts/list" => forward(st, &call, &msg, Some("prompts")).await,
            "resources/list" => forward(st, &call, &msg, Some("resources")).await,
            "resources/templates/list" => forward(st, &call, &msg, Some("resourceTemplates")).await,
            _ => forward(st, &call, &msg, None).await,
        }
    }
}

/// The session a `GET` or `DELETE` names, opened.
async fn session_call(
    st: &EndpointState,
    headers: &HeaderMap,
    auth: Result<Auth, ApiError>,
    charge: Option<Charge>,
    tenant: &str,
    server: &str,
) -> Result<Call, Response> {
    let (tenant, principal) = admit(st, headers, auth, tenant, server)?;
    charged(charge, &tenant, &principal)?;
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
    charge: Option<Extension<Charge>>,
    auth: Result<Auth, ApiError>,
) -> Response {
    let charge = charge.map(|Extension(c)| c);
    let call = match session_call(&st, &headers, auth, charge, &tenant, &server).await {
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
    charge: Option<Extension<Charge>>,
    auth: Result<Auth, ApiError>,
) -> Response {
    let charge = charge.map(|Extension(c)| c);
    let call = match session_call(&st, &headers, auth, charge, &tenant, &server).await {
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
