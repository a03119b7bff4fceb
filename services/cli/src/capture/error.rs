//! Why a capture failed, in words fit for the terminal: the handshake's
//! errors without rmcp's wrappers, each error's chain of causes, and every
//! text about an HTTP endpoint with its URL's credentials left out.

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
}

pub(super) fn init_error(label: &str, e: &ClientInitializeError) -> CaptureError {
    match e {
        // The transport's own error, without rmcp's wrapper naming types.
        ClientInitializeError::TransportError { error, .. } => {
            let inner = error.error.as_ref();
            let why = match inner.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
                Some(StreamableHttpError::Client(r)) => error_chain(r),
                _ => error_chain(inner),
            };
            CaptureError::Unreachable(format!("cannot reach the MCP server at {label}: {why}"))
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
    }
}

pub(super) fn stdio_error(label: &str, e: &ClientInitializeError, tail: &str) -> CaptureError {
    match init_error(label, e) {
        CaptureError::Unreachable(s) => CaptureError::Unreachable(format!("{s}{tail}")),
        CaptureError::Protocol(s) => CaptureError::Protocol(format!("{s}{tail}")),
    }
}
