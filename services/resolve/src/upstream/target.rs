//! Where a session's upstream lives: its URL and the headers sent to it,
//! checked before a session is opened (an absolute `http(s)` URL; header
//! names and values HTTP allows, none the MCP transport sets itself), and
//! the egress rules its requests go out under.

use std::collections::HashMap;
use std::fmt;
use std::sync::LazyLock;

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
pub const RESERVED_HEADERS: &[&str] = &[
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

/// The most headers a session may configure for its upstream.
pub const MAX_UPSTREAM_HEADERS: usize = 32;
/// The longest upstream header name, in characters (ASCII: bytes).
pub const MAX_HEADER_NAME_CHARS: usize = 128;
/// The longest upstream header value, in characters.
pub const MAX_HEADER_VALUE_CHARS: usize = 4096;
/// The longest upstream URL, in characters (ASCII: bytes).
pub const MAX_URL_CHARS: usize = 2048;

/// An upstream header name: an RFC 9110 §5.1 field name (a `token`, §5.6.2),
/// as a JSON Schema `pattern`.
pub const HEADER_NAME_PATTERN: &str = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$";

/// An upstream header value, as a JSON Schema `pattern`: no control
/// character but the horizontal tab (RFC 9110 §5.5 leaves out CR, LF and
/// NUL; the `http` crate also refuses the other controls and DEL).
pub const HEADER_VALUE_PATTERN: &str = r"^[^\u0000-\u0008\u000A-\u001F\u007F]*$";

/// The reserved header names as one JSON Schema `pattern`, any case (a
/// schema says "not this" with `not`; JSON Schema regular expressions have
/// no case-insensitive flag, so each letter is a class of both cases).
pub fn reserved_headers_pattern() -> String {
    let names: Vec<String> = RESERVED_HEADERS
        .iter()
        .map(|n| {
            n.chars()
                .map(|c| {
                    if c.is_ascii_alphabetic() {
                        format!("[{}{}]", c.to_ascii_uppercase(), c.to_ascii_lowercase())
                    } else {
                        c.to_string()
                    }
                })
                .collect()
        })
        .collect();
    format!("^(?:{})$", names.join("|"))
}

/// What an upstream URL must look like, as a JSON Schema `pattern` (also
/// what the server checks, so the two cannot disagree): an absolute
/// `http` or `https` URI (RFC 3986 §4.3) with a host and no user info and
/// no fragment, its characters those RFC 3986 allows (anything else
/// percent-encoded).
///
/// The host is an IPv4 address (no leading zeros), an IPv6 literal in
/// brackets (RFC 3986 §3.2.2, without a zone), or a name of dot-separated
/// labels of letters, digits and `_` joined by single hyphens (so no
/// `xn--` label, whose Punycode may not decode), the last starting with a
/// letter or `_` (so that the WHATWG URL parser Pinfold connects with
/// never reads it as an IPv4 number). A port is 1 to 65535.
pub fn upstream_url_pattern() -> &'static str {
    &UPSTREAM_URL_PATTERN
}

static UPSTREAM_URL_PATTERN: LazyLock<String> = LazyLock::new(|| {
    let octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
    let ipv4 = format!(r"(?:{octet}\.){{3}}{octet}");
    let h16 = "[0-9A-Fa-f]{1,4}";
    let ls32 = format!("(?:{h16}:{h16}|{ipv4})");
    let ipv6 = [
        format!("(?:{h16}:){{6}}{ls32}"),
        format!("::(?:{h16}:){{5}}{ls32}"),
        format!("(?:{h16})?::(?:{h16}:){{4}}{ls32}"),
        format!("(?:(?:{h16}:){{0,1}}{h16})?::(?:{h16}:){{3}}{ls32}"),
        format!("(?:(?:{h16}:){{0,2}}{h16})?::(?:{h16}:){{2}}{ls32}"),
        format!("(?:(?:{h16}:){{0,3}}{h16})?::{h16}:{ls32}"),
        format!("(?:(?:{h16}:){{0,4}}{h16})?::{ls32}"),
        format!("(?:(?:{h16}:){{0,5}}{h16})?::{h16}"),
        format!("(?:(?:{h16}:){{0,6}}{h16})?::"),
    ]
    .join("|");
    let label = "[A-Za-z0-9_]+(?:-[A-Za-z0-9_]+)*";
    let last = "[A-Za-z_][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*";
    let port = "(?::(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}))?";
    let rest = "(?:[/?](?:[A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2})*)?";
    format!(r"^[Hh][Tt][Tt][Pp][Ss]?://(?:(?:{label}\.)*{last}|{ipv4}|\[(?:{ipv6})\]){port}{rest}$")
});

static UPSTREAM_URL: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(&UPSTREAM_URL_PATTERN).expect("the upstream URL pattern compiles")
});

/// Whether `url` is an upstream URL a session accepts: it matches
/// [`upstream_url_pattern`], is at most [`MAX_URL_CHARS`] long, and the
/// URL parser Pinfold connects with reads it as an `http(s)` URL with a
/// host (which every URL the pattern admits is; checked anyway).
pub fn is_upstream_url(url: &str) -> bool {
    url.len() <= MAX_URL_CHARS && UPSTREAM_URL.is_match(url) && origin(url).is_some()
}

/// Whether `name` is an upstream header name a session may configure:
/// [`HEADER_NAME_PATTERN`], at most [`MAX_HEADER_NAME_CHARS`], not reserved.
pub fn is_upstream_header_name(name: &str) -> bool {
    (1..=MAX_HEADER_NAME_CHARS).contains(&name.len())
        && name.bytes().all(is_tchar)
        && !is_reserved_header(name)
}

/// Whether `value` is an upstream header value a session may configure:
/// [`HEADER_VALUE_PATTERN`], at most [`MAX_HEADER_VALUE_CHARS`] characters.
pub fn is_upstream_header_value(value: &str) -> bool {
    value.chars().count() <= MAX_HEADER_VALUE_CHARS
        && value
            .chars()
            .all(|c| c == '\t' || !(c < ' ' || c == '\u{7f}'))
}

/// An RFC 9110 §5.6.2 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

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
