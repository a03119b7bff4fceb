//! What goes on to the upstream and comes back: `initialize` and
//! `server/discover`, forwarded messages, and the answers (a JSON body or
//! an event stream) rewritten on the way back.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use pinfold_core::card::Limits;
use pinfold_core::guard::{self};
use pinfold_core::ids::TenantId;
use pinfold_http::auth::Principal;
use pinfold_http::problem::ApiError;
use reqwest::Method;
use serde_json::Value;

use super::live::LiveRoute;
use super::rpc::{error, error_object, json_response, strip_reserved_meta, transport_error};
use super::session::ClientSession;
use super::upstream::{Exchange, PROTOCOL_HEADER, SESSION_HEADER, UpstreamError, event_message};

use super::context::{Call, EndpointState, now_ms};
use super::lookup::outbound;
use super::protocol::{advertises_extension, upstream_failed};
use super::upstream;
use super::upstream::Answered;

/// `initialize`: forwarded; the client's session id seals the upstream's.
pub(super) async fn initialize(
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
pub(super) async fn discover(
    st: &EndpointState,
    live: &LiveRoute,
    msg: Value,
    pass: HeaderMap,
) -> Response {
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

/// Rewrites one message the upstream sent to the client: reserved `_meta`
/// removed, a list answer cut to the signature, a list change noted.
pub(super) fn rewrite(
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
pub(super) async fn forward(
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
pub(super) async fn pass_back(
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
    if cut.is_none() && !may_hold_reserved(&bytes) {
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
pub(super) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// Whether an upstream's JSON may name one of Pinfold's reserved `_meta`
/// keys: the prefix as written, or an escape that could spell one of its
/// characters once decoded (`\u0067`, `\/`; the other escapes decode to
/// characters no reserved key holds). Only a body with none of them goes
/// back unparsed; the others are parsed, and the parse decodes escapes
/// before the keys are compared.
pub(super) fn may_hold_reserved(body: &[u8]) -> bool {
    contains(body, guard::PINFOLD_META_PREFIX.as_bytes())
        || body
            .windows(2)
            .any(|w| w[0] == b'\\' && matches!(w[1], b'u' | b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reserved_key_escaped_is_not_passed_unread() {
        let plain =
            br#"{"result":{"content":[{"type":"text","text":"a\nb \"q\""}],"_meta":{"x/y":1}}}"#;
        assert!(!may_hold_reserved(plain));
        for hidden in [
            &br#"{"result":{"_meta":{"io.github.pinfold/guard":{}}}}"#[..],
            br#"{"result":{"_meta":{"io.github.pinfold\/guard":{}}}}"#,
            br#"{"result":{"_meta":{"io.github.pin\u0066old/guard":{}}}}"#,
            br#"{"result":{"_meta":{"\u0069o.github.pinfold/guard":{}}}}"#,
        ] {
            assert!(
                may_hold_reserved(hidden),
                "{}",
                String::from_utf8_lossy(hidden)
            );
            // Parsed, the key is the reserved one and is removed.
            let mut v: Value = serde_json::from_slice(hidden).unwrap();
            super::super::rpc::strip_reserved_meta(&mut v);
            assert_eq!(v["result"]["_meta"], serde_json::json!({}), "{v}");
        }
    }
}
