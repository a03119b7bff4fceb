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

pub use pinfold_http::upstream::{
    HEADER_NAME_PATTERN, HEADER_VALUE_PATTERN, MAX_HEADER_NAME_CHARS, MAX_HEADER_VALUE_CHARS,
    MAX_UPSTREAM_HEADERS, MAX_URL_CHARS, RESERVED_HEADERS, is_reserved_header,
    is_upstream_header_name, is_upstream_header_value, is_upstream_url, reserved_headers_pattern,
    upstream_url_pattern,
};

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
    fn upstream_urls_are_what_the_pattern_says() {
        for ok in [
            "http://127.0.0.1:8090/mcp",
            "https://files.example.com/mcp",
            "HTTP://EXAMPLE.COM",
            "http://localhost:1/",
            "http://x:65535",
            "http://[::1]:8080/mcp",
            "http://[2001:db8::ffff:1.2.3.4]/",
            "https://a_b.internal/x?y=1&z=%20",
            "https://3com.files-1.example/a/../b;c=d@e:f?g/h?i",
        ] {
            assert!(is_upstream_url(ok), "{ok} refused");
        }
        let long = format!("http://x/{}", "a".repeat(MAX_URL_CHARS - 9));
        assert!(is_upstream_url(&long));
        for bad in [
            "",
            "ftp://x/",
            "/relative",
            "http://u:p@x/",
            "http://x/#f",
            "http://x:0/",
            "http://x:65536/",
            "http://x:/",
            "http://x:08/",
            "http:///x",
            "http://1.2.3.256/",
            "http://01.2.3.4/",
            "http://a.123/",
            "http://a.0x1f/",
            "http://xn--a.example/",
            "http://-a.example/",
            "http://[::1%25eth0]/",
            "http://[1:2]/",
            " http://x/",
            "http://x/a b",
            "http://x/\u{e9}",
            "http://x/%zz",
            "http://x/\n",
            "http://x/a\\b",
        ] {
            assert!(!is_upstream_url(bad), "{bad:?} accepted");
        }
        assert!(!is_upstream_url(&format!("{long}a")));
    }

    proptest::proptest! {
        /// Every URL the schema's pattern admits is one the URL parser
        /// Pinfold connects with reads as an http(s) URL with a host, without
        /// user info or fragment: the pattern never promises what the
        /// server then refuses.
        #[test]
        fn every_url_the_pattern_admits_parses(
            url in proptest::string::string_regex(
                upstream_url_pattern().trim_start_matches('^').trim_end_matches('$')
            ).unwrap()
        ) {
            let u = url::Url::parse(&url).unwrap();
            proptest::prop_assert!(matches!(u.scheme(), "http" | "https"));
            proptest::prop_assert!(u.host_str().is_some_and(|h| !h.is_empty()));
            proptest::prop_assert!(u.username().is_empty() && u.password().is_none());
            proptest::prop_assert!(u.fragment().is_none());
            proptest::prop_assert!(url.len() > MAX_URL_CHARS || is_upstream_url(&url));
        }
    }

    #[test]
    fn header_rules_match_their_patterns() {
        let name = regex::Regex::new(HEADER_NAME_PATTERN).unwrap();
        let reserved = regex::Regex::new(&reserved_headers_pattern()).unwrap();
        for n in [
            "Authorization",
            "x-api-key",
            "A!#$%&'*+.^_`|~9",
            "CONTENT-TYPE",
            "Host",
            "a b",
            "",
            "é",
            "x:y",
        ] {
            assert_eq!(
                is_upstream_header_name(n),
                name.is_match(n) && !reserved.is_match(n),
                "{n:?}"
            );
        }
        assert!(reserved.is_match("MCP-Session-ID") && !reserved.is_match("mcp-session-idx"));
        assert!(!is_upstream_header_name(
            &"a".repeat(MAX_HEADER_NAME_CHARS + 1)
        ));
        for (v, ok) in [
            ("Bearer x", true),
            ("tab\tok", true),
            ("caf\u{e9}", true),
            ("", true),
            ("a\nb", false),
            ("a\rb", false),
            ("a\u{0}b", false),
            ("a\u{7f}b", false),
        ] {
            assert_eq!(is_upstream_header_value(v), ok, "{v:?}");
        }
        assert!(is_upstream_header_value(
            &"\u{e9}".repeat(MAX_HEADER_VALUE_CHARS)
        ));
        assert!(!is_upstream_header_value(
            &"a".repeat(MAX_HEADER_VALUE_CHARS + 1)
        ));
    }

    #[test]
    fn origins() {
        assert_eq!(
            origin("http://a.b:81/x?y").as_deref(),
            Some("http://a.b:81")
        );
    }
}
