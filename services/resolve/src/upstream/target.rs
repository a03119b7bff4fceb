//! Where a session's upstream lives: its URL and the headers sent to it,
//! checked before a session is opened (an absolute `http(s)` URL; header
//! names and values HTTP allows, none the MCP transport sets itself), and
//! the egress rules its requests go out under.

use std::collections::HashMap;
use std::fmt;

use http::{HeaderName, HeaderValue};
use pinfold_egress::Rules;

/// Where a session's upstream lives, the headers to send it, and the
/// egress rules (the tenant's allow-list, the operator's loopback setting)
/// every connection to it is judged by.
#[derive(Clone, PartialEq, Eq)]
pub struct UpstreamTarget {
    /// The MCP endpoint (`http` or `https`).
    pub url: String,
    /// Headers added to every upstream request (credentials: never logged).
    pub headers: Vec<(String, String)>,
    /// What the connection may reach.
    pub rules: Rules,
}

impl fmt::Debug for UpstreamTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("UpstreamTarget")
            .field("url", &pinfold_egress::redact::redact_url(&self.url))
            .field("headers", &format_args!("{names:?} (values redacted)"))
            .field("rules", &self.rules)
            .finish()
    }
}

/// Why an upstream target was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// Not an absolute `http(s)` URL.
    #[error("upstream url must be an absolute http or https URL")]
    InvalidUrl,
    /// A header name or value that HTTP does not allow.
    #[error("upstream header {0:?} is not a valid HTTP header")]
    InvalidHeader(String),
    /// A header the MCP transport sets itself.
    #[error("upstream header {0:?} is set by the MCP transport and cannot be given")]
    ReservedHeader(String),
    /// The same header twice, in different cases (HTTP header names are
    /// case-insensitive: one would silently replace the other).
    #[error("upstream header {0:?} is given more than once (names are case-insensitive)")]
    DuplicateHeader(String),
}

/// Headers the MCP transport or HTTP itself sets (lowercase): a session
/// cannot configure them.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    "content-length",
    "host",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
    "connection",
    "transfer-encoding",
    "te",
    "upgrade",
    "keep-alive",
    "proxy-connection",
];

/// Whether an upstream header name (any case) is one the transport sets
/// itself and a session therefore cannot give.
pub fn is_reserved_header(name: &str) -> bool {
    RESERVED_HEADERS
        .iter()
        .any(|r| r.eq_ignore_ascii_case(name))
}

impl UpstreamTarget {
    /// Checks the URL and headers (what session creation should call).
    pub fn validate(&self) -> Result<(), TargetError> {
        origin(&self.url).ok_or(TargetError::InvalidUrl)?;
        self.header_map().map(|_| ())
    }

    pub(super) fn header_map(&self) -> Result<HashMap<HeaderName, HeaderValue>, TargetError> {
        let mut out = HashMap::new();
        for (n, v) in &self.headers {
            let name = HeaderName::try_from(n.as_str())
                .map_err(|_| TargetError::InvalidHeader(n.clone()))?;
            if is_reserved_header(name.as_str()) {
                return Err(TargetError::ReservedHeader(n.clone()));
            }
            let mut value = HeaderValue::try_from(v.as_str())
                .map_err(|_| TargetError::InvalidHeader(n.clone()))?;
            value.set_sensitive(true);
            if out.insert(name, value).is_some() {
                return Err(TargetError::DuplicateHeader(n.clone()));
            }
        }
        Ok(out)
    }
}

/// `scheme://host[:port]` of an absolute http(s) URL.
fn origin(url: &str) -> Option<String> {
    let u = reqwest::Url::parse(url).ok()?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() {
        return None;
    }
    Some(u.origin().ascii_serialization())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pinfold_egress::AllowList;

    #[test]
    fn targets_are_checked_and_redacted() {
        let rules = Rules::new(AllowList::default(), false);
        let t = UpstreamTarget {
            url: "https://mcp.example/x?key=secret-key".into(),
            headers: vec![("Authorization".into(), "Bearer secret-token".into())],
            rules: rules.clone(),
        };
        assert!(t.validate().is_ok());
        let dbg = format!("{t:?}");
        assert!(!dbg.contains("secret-token") && dbg.contains("Authorization"));
        assert!(!dbg.contains("secret-key"), "{dbg}");
        let bad = |url: &str, h: (&str, &str)| UpstreamTarget {
            url: url.into(),
            headers: vec![(h.0.into(), h.1.into())],
            rules: rules.clone(),
        };
        assert_eq!(
            bad("ftp://x/", ("a", "b")).validate(),
            Err(TargetError::InvalidUrl)
        );
        assert_eq!(
            bad("/relative", ("a", "b")).validate(),
            Err(TargetError::InvalidUrl)
        );
        assert!(matches!(
            bad("http://x/", ("Mcp-Session-Id", "b")).validate(),
            Err(TargetError::ReservedHeader(_))
        ));
        assert!(matches!(
            bad("http://x/", ("a b", "c")).validate(),
            Err(TargetError::InvalidHeader(_))
        ));
        assert!(matches!(
            bad("http://x/", ("a", "c\nd")).validate(),
            Err(TargetError::InvalidHeader(_))
        ));
        let twice = UpstreamTarget {
            url: "https://x/".into(),
            headers: vec![("X-Key".into(), "a".into()), ("x-key".into(), "b".into())],
            rules: rules.clone(),
        };
        assert_eq!(
            twice.validate(),
            Err(TargetError::DuplicateHeader("x-key".into()))
        );
    }

    #[test]
    fn origins() {
        assert_eq!(
            origin("http://a.b:81/x?y").as_deref(),
            Some("http://a.b:81")
        );
    }
}
