//! What the transport's headers and messages say: the headers passed on,
//! the 2026-07-28 header checks, the revision and extension a request
//! names, and the errors the guard answers in its own name.

use axum::http::HeaderMap;
use pinfold_core::guard::{self, NOT_READY, UPSTREAM_UNAVAILABLE};
use serde_json::{Value, json};

use super::head::Head;
use super::live::ReviewState;
use super::rpc::error;
use super::upstream::{LAST_EVENT_ID, METHOD_HEADER, NAME_HEADER, PROTOCOL_HEADER, UpstreamError};

/// Headers passed from the client to the upstream: the protocol version,
/// W3C trace context, `Last-Event-ID`, and the 2026-07-28 method headers.
pub(super) fn passed(headers: &HeaderMap) -> HeaderMap {
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

pub(super) fn header_str<'a>(
    headers: &'a HeaderMap,
    name: &axum::http::HeaderName,
) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

impl Head<'_> {
    /// Whether the id is one JSON-RPC allows (a string, a number or
    /// `null`; an absent id is a notification).
    pub fn id_is_valid(&self) -> bool {
        self.id.is_none_or(|raw| {
            matches!(
                raw.as_bytes().first(),
                Some(b'"' | b'-' | b'0'..=b'9' | b'n')
            )
        })
    }

    /// Whether the request is a 2026-07-28 one (its `_meta` names the
    /// version).
    pub fn is_modern(&self) -> bool {
        self.protocol_version.as_deref() == Some(super::live::MODERN_VERSION)
    }

    /// The tool or prompt name, else the resource URI, the request names.
    pub fn named(&self) -> Option<&str> {
        self.name.as_deref().or(self.uri.as_deref())
    }
}

/// The 2026-07-28 request headers must say what the body says.
pub(super) fn check_modern_headers(headers: &HeaderMap, head: &Head<'_>) -> Result<(), String> {
    if let (Some(h), Some(m)) = (header_str(headers, &METHOD_HEADER), head.method.as_deref())
        && h != m
    {
        return Err(format!(
            "Mcp-Method {h:?} does not match the body's method {m:?}"
        ));
    }
    if let Some(h) = header_str(headers, &NAME_HEADER)
        && head.named() != Some(h)
    {
        return Err(format!("Mcp-Name {h:?} does not match the body"));
    }
    if let (Some(h), Some(v)) = (
        header_str(headers, &PROTOCOL_HEADER),
        head.protocol_version.as_deref(),
    ) && h != v
    {
        return Err(format!(
            "MCP-Protocol-Version {h:?} does not match the request's _meta protocol version {v:?}"
        ));
    }
    Ok(())
}

pub(super) fn advertises_extension(caps: Option<&Value>) -> bool {
    caps.and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(guard::TOOL_RESOLUTION))
        .is_some()
}

pub(super) fn unavailable(id: &Value, state: &ReviewState) -> Value {
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

pub(super) fn upstream_failed(id: &Value, e: &UpstreamError) -> Value {
    error(
        id,
        json!({"code": UPSTREAM_UNAVAILABLE, "message": format!("Pinfold guard: {e}"),
            "data": {"reason": "upstream_unavailable"}}),
    )
}
