//! Why a capture failed, in words fit for the terminal: the handshake's
//! errors without rmcp's wrappers, each error's chain of causes, and every
//! text about an HTTP endpoint with its URL's credentials left out.

use pinfold_mcp_client::{Negotiation, OpenError};
use rmcp::service::ClientInitializeError;
use rmcp::transport::streamable_http_client::StreamableHttpError;
use url::Url;

use super::target::redact;

/// Why a capture failed (exit code 3).
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The server (or the program) could not be reached or started.
    #[error("{0}")]
    Unreachable(String),
    /// It answered, but not as an MCP server should.
    #[error("{0}")]
    Protocol(String),
    /// It refused the request for its credentials (HTTP 401 or 403).
    #[error("{0}")]
    Refused(String),
}

pub(super) fn init_error(label: &str, e: &ClientInitializeError) -> CaptureError {
    match e {
        ClientInitializeError::LegacyFallbackFailed { fallback, .. } => init_error(label, fallback),
        // The transport's own error, without rmcp's wrapper naming types.
        ClientInitializeError::TransportError { error, .. } => {
            let inner = error.error.as_ref();
            match inner.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
                Some(h) => match refusal(h) {
                    Some(status) => CaptureError::Refused(format!(
                        "the MCP server at {label} refused the request: {status}; \
                         pass its credentials with --header 'Authorization: Bearer ...'"
                    )),
                    None => {
                        let why = match h {
                            StreamableHttpError::Client(r) => error_chain(r),
                            other => error_chain(other),
                        };
                        CaptureError::Unreachable(format!(
                            "cannot reach the MCP server at {label}: {why}"
                        ))
                    }
                },
                None => CaptureError::Unreachable(format!(
                    "cannot reach the MCP server at {label}: {}",
                    error_chain(inner)
                )),
            }
        }
        ClientInitializeError::ConnectionClosed(why) => CaptureError::Unreachable(format!(
            "the MCP server at {label} closed the connection during the handshake: {why}"
        )),
        other => CaptureError::Protocol(format!(
            "the MCP handshake with {label} failed: {}",
            error_chain(other)
        )),
    }
}

/// "HTTP 401 Unauthorized" when the server refused the request for its
/// credentials (401, or 403), with or without a challenge.
fn refusal(e: &StreamableHttpError<reqwest::Error>) -> Option<String> {
    let code = match e {
        StreamableHttpError::AuthRequired(_) => 401,
        StreamableHttpError::InsufficientScope(_) => 403,
        StreamableHttpError::HttpStatus(s) if matches!(s.status, 401 | 403) => s.status,
        StreamableHttpError::UnexpectedServerResponse(text) => {
            match text.strip_prefix("HTTP ").and_then(|t| t.get(..3)) {
                Some("401") => 401,
                Some("403") => 403,
                _ => return None,
            }
        }
        _ => return None,
    };
    Some(match code {
        401 => "HTTP 401 Unauthorized".to_owned(),
        _ => "HTTP 403 Forbidden".to_owned(),
    })
}

/// A handshake that failed, with how the protocol was being chosen and
/// (for a stdio server) the tail of its stderr.
pub(super) fn open_error(label: &str, e: &OpenError, tail: &str) -> CaptureError {
    let after = match &e.negotiation {
        Negotiation::Fallback(why) => format!(" (initialize, after {why})"),
        _ => String::new(),
    };
    match init_error(label, &e.error) {
        CaptureError::Unreachable(s) => CaptureError::Unreachable(format!("{s}{after}{tail}")),
        CaptureError::Protocol(s) => CaptureError::Protocol(format!("{s}{after}{tail}")),
        CaptureError::Refused(s) => CaptureError::Refused(format!("{s}{tail}")),
    }
}

pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let next = c.to_string();
        if !s.contains(&next) {
            s.push_str(": ");
            s.push_str(&next);
        }
        cur = c.source();
    }
    s
}

pub(super) fn redacted(e: CaptureError, url: &Url) -> CaptureError {
    match e {
        CaptureError::Unreachable(s) => CaptureError::Unreachable(redact(&s, url)),
        CaptureError::Protocol(s) => CaptureError::Protocol(redact(&s, url)),
        CaptureError::Refused(s) => CaptureError::Refused(redact(&s, url)),
    }
}
