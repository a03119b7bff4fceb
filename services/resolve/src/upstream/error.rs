//! A failed upstream exchange, and how an error of rmcp or reqwest becomes
//! one: its text with the upstream URL cut to its origin, and the
//! `Retry-After` of an HTTP 429 or 5xx found anywhere in its chain.

use std::time::Duration;

use rmcp::service::ClientInitializeError;
use rmcp::transport::DynamicTransportError;
use rmcp::transport::streamable_http_client::{HttpStatusError, StreamableHttpError};

use super::retry_after::parse_retry_after;
use super::target::origin;

/// A failed upstream exchange (never cached).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FetchError {
    /// Unreachable, HTTP error, or a broken transport.
    Transport {
        detail: String,
        retry_after: Option<Duration>,
    },
    /// A JSON-RPC error answer.
    Rpc { code: i32, message: String },
    /// The configured total timeout passed.
    Timeout,
    /// An answer that is not a resolution result.
    Malformed(String),
}

/// Error texts (reqwest's name the URL) with the upstream URL cut to its
/// origin: a path or query may carry a credential.
pub(crate) fn redact(detail: &str, url: &str) -> String {
    let Some(o) = origin(url) else {
        return detail.to_owned();
    };
    let cut = format!("{o}/…");
    let mut out = detail.replace(url, &cut);
    if let Ok(parsed) = reqwest::Url::parse(url) {
        out = out.replace(parsed.as_str(), &cut);
    }
    out
}

/// A `Retry-After` carried by an HTTP 429 or 5xx anywhere in an error's
/// chain: seconds, or an HTTP date.
pub(super) fn retry_after_in(e: &(dyn std::error::Error + 'static)) -> Option<Duration> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(x) = cur {
        let status = x.downcast_ref::<HttpStatusError>().or_else(|| {
            match x.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
                Some(StreamableHttpError::HttpStatus(h)) => Some(h),
                _ => None,
            }
        });
        if let Some(h) = status {
            return h.retry_after.as_deref().and_then(parse_retry_after);
        }
        cur = if let Some(d) = x.downcast_ref::<DynamicTransportError>() {
            Some(d.error.as_ref())
        } else if let Some(i) = x.downcast_ref::<ClientInitializeError>() {
            match i {
                ClientInitializeError::TransportError { error, .. } => Some(error),
                ClientInitializeError::LegacyFallbackFailed { fallback, .. } => {
                    Some(fallback.as_ref())
                }
                _ => None,
            }
        } else {
            x.source()
        };
    }
    None
}
