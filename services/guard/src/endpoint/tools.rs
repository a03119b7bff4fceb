//! The tools a client is shown and may call: the served `tools/list`,
//! `tools/call` (refused, answered with a tool execution error, or
//! forwarded) and a client's own `tools/resolve`.

use std::sync::atomic::Ordering;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use pinfold_core::annotations::Annotations;
use pinfold_core::guard::{self, CallsPolicy, Standing};
use serde_json::{Value, json};

use super::rpc::{
    error, error_object, json_response, result, strip_reserved_meta, transport_error,
};
use super::upstream::{Exchange, UpstreamError};

use super::context::{Call, EndpointState};
use super::forward::forward;
use super::live::LiveRoute;
use super::lookup::outbound;
use super::protocol::{unavailable, upstream_failed};
use super::source::CallToResolve;

/// `tools/list`: the reviewed view, never the upstream's own answer. The
/// result is rendered once per review and view; only the envelope with
/// this request's id (as the client wrote it) is written here.
pub(super) async fn served_list(
    st: &EndpointState,
    live: &LiveRoute,
    extension: bool,
    modern: bool,
    id: &str,
) -> Response {
    match live.review(st.0.config.review_wait).await {
        Ok(review) => list_response(&live.list_bytes(&review, extension, modern), id),
        Err(state) => {
            let id: Value = serde_json::from_str(id).unwrap_or(Value::Null);
            json_response(StatusCode::OK, &unavailable(&id, &state))
        }
    }
}

/// The served list's answer: `rendered` in an envelope carrying the
/// request's id exactly as the client wrote it.
pub(super) fn list_response(rendered: &[u8], id: &str) -> Response {
    let id = id.as_bytes();
    let mut out = Vec::with_capacity(rendered.len() + id.len() + 40);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id);
    out.extend_from_slice(b",\"result\":");
    out.extend_from_slice(rendered);
    out.push(b'}');
    // Always a 200: nothing for the edge to take for a problem.
    let mut resp = Response::new(axum::body::Body::from(out));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

pub(super) fn refuse(st: &EndpointState, id: &Value, err: Value) -> Response {
    st.0.stats.refused.fetch_add(1, Ordering::Relaxed);
    json_response(StatusCode::OK, &error(id, err))
}

/// `tools/call`: refused, answered with a tool execution error, or
/// forwarded.
pub(super) async fn tools_call(
    st: &EndpointState,
    call: &Call,
    id: &Value,
    msg: &Value,
) -> Response {
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
        && p.kind().method().is_some()
        && let Some(signature) = &call.live.prepared
    {
        resolved = resolve_annotations(st, call, signature, name, msg).await;
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
pub(super) async fn resolve_for_client(
    st: &EndpointState,
    call: &Call,
    id: &Value,
    msg: &Value,
) -> Response {
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

/// One call's resolution (SEP-1862), through the server's resolve engine
/// and its cache, when it is within the signature; `None` (the worst case)
/// otherwise. The cache scope is the route's upstream identity: the
/// upstream receives the route's headers whoever the client is, so the
/// answers of one upstream session (or, sessionless, of the route) are
/// the same for every client of it.
async fn resolve_annotations(
    st: &EndpointState,
    call: &Call,
    signature: &std::sync::Arc<pinfold_resolve_check::PreparedSignature>,
    name: &str,
    msg: &Value,
) -> Option<Annotations> {
    let empty = json!({});
    let arguments = msg.pointer("/params/arguments").unwrap_or(&empty);
    let live = &call.live;
    let scope = format!(
        "guard:{}:{}:{}:{}",
        live.approved.server,
        live.fingerprint.revision,
        live.approved.digest,
        call.upstream_session.as_deref().unwrap_or("-")
    );
    st.0.resolver
        .annotations(CallToResolve {
            tenant: &call.tenant,
            server: &live.approved.server,
            version: &live.approved.version,
            scope: &scope,
            signature,
            mode: live.fingerprint.mode,
            target: &live.target,
            name,
            arguments,
        })
        .await
}
