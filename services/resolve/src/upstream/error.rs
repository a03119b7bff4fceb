//! A failed upstream exchange, and how an error of rmcp or reqwest becomes
//! one: its text redacted by the egress crate (the upstream URL cut to its
//! origin), the egress policy's refusal named as such, and the
//! `Retry-After` of an HTTP 429 or 5xx found anywhere in its chain.

use std::time::Duration;

use rmcp::service::ClientInitializeError;
use rmcp::transport::DynamicTransportError;
use rmcp::transport::streamable_http_client::{HttpStatusError, StreamableHttpError};

use pinfold_egress::retry_after::parse_retry_after;

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

/// An error text (reqwest's name the URL) as it may be shown: the upstream
/// URL cut to its origin (a path or query may carry a credential), or only
/// "not allowed by the egress policy" when the policy refused the
/// connection (which address was refused is not the caller's to learn).
pub(crate) fn redact(e: &(dyn std::error::Error + 'static), shown: &str, url: &str) -> String {
    if links(e).any(pinfold_egress::refused_by_policy) {
        return pinfold_egress::EgressError::NotAllowed.to_string();
    }
    pinfold_egress::redact::redact_in(shown, url)
}

/// The links of an error chain, through rmcp's wrappers (which do not all
/// name their cause as `source`).
fn links<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(e), |x| {
        if let Some(d) = x.downcast_ref::<DynamicTransportError>() {
            Some(d.error.as_ref())
        } else if let Some(i) = x.downcast_ref::<ClientInitializeError>() {
            match i {
                ClientInitializeError::TransportError { error, .. } => Some(error),
                ClientInitializeError::LegacyFallbackFailed { fallback, .. } => {
                    Some(fallback.as_ref())
                }
                _ => x.source(),
            }
        } else {
            x.source()
        }
    })
}

/// A `Retry-After` carried by an HTTP 429 or 5xx anywhere in an error's
/// chain: seconds, or an HTTP date.
pub(super) fn retry_after_in(e: &(dyn std::error::Error + 'static)) -> Option<Duration> {
    links(e)
        .find_map(|x| {
            let status = x.downcast_ref::<HttpStatusError>().or_else(|| match x
                .downcast_ref::<StreamableHttpError<reqwest::Error>>()
            {
                Some(StreamableHttpError::HttpStatus(h)) => Some(h),
                _ => None,
            })?;
            Some(status.retry_after.as_deref().and_then(parse_retry_after))
        })
        .flatten()
}
