//! What an upstream MCP endpoint given in a request may look like: its URL
//! (the pattern a request schema publishes and the handler checks, so the
//! two cannot disagree) and the headers sent to it (RFC 9110 names none of
//! the MCP transport's own, case-insensitively distinct, values without
//! control characters). Shared by every service that stores an upstream (a
//! resolve session, a guard route), with the schemas of such a body's
//! `url` and `headers` and the checks that report each problem at its JSON
//! pointer.

use std::collections::{BTreeMap, HashSet};
use std::sync::LazyLock;

use pinfold_core::error::pointer_push;
use serde_json::json;
use utoipa::openapi::schema::{Object, ObjectBuilder, SchemaFormat, Type};

use crate::problem::FieldError;
use crate::schema::keywords;

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

/// `scheme://host[:port]` of an absolute http(s) URL.
fn origin(url: &str) -> Option<String> {
    let u = url::Url::parse(url).ok()?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() {
        return None;
    }
    Some(u.origin().ascii_serialization())
}

/// The schema of an upstream's `url`: what [`is_upstream_url`] accepts.
pub fn url_schema() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .format(Some(SchemaFormat::Custom("uri".into())))
        .pattern(Some(upstream_url_pattern()))
        .min_length(Some(1))
        .max_length(Some(MAX_URL_CHARS))
        .description(Some(
            "Its Streamable HTTP endpoint: an absolute `http` or `https` URI (RFC 3986) with a \
             host, without user info (credentials go in `headers`) and without a fragment; \
             characters outside RFC 3986 percent-encoded. The host is a name (letters, digits, \
             `_`, single hyphens; the last label starts with a letter or `_`), an IPv4 address \
             or a bracketed IPv6 address; a port is 1 to 65535.",
        ))
        .examples(["https://files.example.com/mcp"])
        .build()
}

/// The schema of an upstream's `headers`: what [`check_headers`] accepts
/// (but the case-insensitive distinctness of the names, which JSON Schema
/// cannot say of an object's member names).
pub fn headers_schema() -> Object {
    let name = ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(MAX_HEADER_NAME_CHARS))
        .pattern(Some(HEADER_NAME_PATTERN))
        .extensions(keywords([(
            "not",
            json!({"pattern": reserved_headers_pattern()}),
        )]));
    let value = ObjectBuilder::new()
        .schema_type(Type::String)
        .max_length(Some(MAX_HEADER_VALUE_CHARS))
        .pattern(Some(HEADER_VALUE_PATTERN));
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .max_properties(Some(MAX_UPSTREAM_HEADERS))
        .property_names(Some(name))
        .additional_properties(Some(value))
        .description(Some(format!(
            "Headers sent with every upstream request (for example the upstream credential). \
             Sealed at rest, never returned, never logged. At most {MAX_UPSTREAM_HEADERS}; a \
             name is an HTTP field name (RFC 9110 token) of at most {MAX_HEADER_NAME_CHARS} \
             characters, none of those the MCP transport sets itself ({}), in any case; a value \
             at most {MAX_HEADER_VALUE_CHARS} characters without control characters other than \
             tab.",
            RESERVED_HEADERS.join(", ")
        )))
        .examples([json!({"Authorization": "Bearer upstream-token"})])
        .build()
}

fn field(pointer: String, code: &str, message: impl Into<String>) -> FieldError {
    FieldError {
        pointer,
        code: code.into(),
        message: message.into(),
    }
}

/// Checks an upstream URL at `pointer`, exactly what [`url_schema`] states.
pub fn check_url(url: &str, pointer: &str, errors: &mut Vec<FieldError>) {
    if !is_upstream_url(url) {
        errors.push(field(pointer.into(), "invalid_url", url_problem(url)));
    }
}

/// Checks upstream headers at `pointer` (the headers object), exactly what
/// [`headers_schema`] states, and that no name is given twice in different
/// cases (`duplicate_header`); every problem is reported, never a value.
pub fn check_headers(
    headers: &BTreeMap<String, String>,
    pointer: &str,
    errors: &mut Vec<FieldError>,
) {
    if headers.len() > MAX_UPSTREAM_HEADERS {
        errors.push(field(
            pointer.into(),
            "too_many",
            format!("at most {MAX_UPSTREAM_HEADERS} upstream headers"),
        ));
    }
    let mut seen = HashSet::new();
    for (name, value) in headers {
        let p = pointer_push(pointer, name);
        if is_reserved_header(name) {
            errors.push(field(
                p,
                "reserved_header",
                "Pinfold sets this header itself; it cannot be configured",
            ));
            continue;
        }
        if !is_upstream_header_name(name) {
            errors.push(field(
                p,
                "invalid_header",
                format!(
                    "not an HTTP header name (RFC 9110 token) of at most {MAX_HEADER_NAME_CHARS} characters"
                ),
            ));
            continue;
        }
        // Header names are case-insensitive: `X-Key` and `x-key` are one
        // header, and one value would silently replace the other. (JSON
        // Schema cannot say this of an object's member names.)
        if !seen.insert(name.to_ascii_lowercase()) {
            errors.push(field(
                p,
                "duplicate_header",
                "the same header is given twice (names are case-insensitive)",
            ));
            continue;
        }
        // The value is a secret: never echo it in the error.
        if !is_upstream_header_value(value) {
            errors.push(field(
                p,
                "invalid_header",
                format!(
                    "the value must be at most {MAX_HEADER_VALUE_CHARS} characters without control characters other than tab"
                ),
            ));
        }
    }
}

/// Why `url` is not an upstream URL, in one sentence.
pub fn url_problem(url: &str) -> String {
    let parsed = url::Url::parse(url);
    let general = "an absolute http or https URL with a host, without user info or fragment, \
                   characters outside RFC 3986 percent-encoded";
    match parsed {
        Err(e) => format!("not an absolute URL ({e}): give {general}"),
        Ok(u) if !matches!(u.scheme(), "http" | "https") => {
            "the upstream must be an http or https URL".into()
        }
        Ok(u) if !u.username().is_empty() || u.password().is_some() => {
            "put upstream credentials in `headers`, not in the URL".into()
        }
        Ok(u) if u.fragment().is_some() => "the upstream URL must not have a fragment".into(),
        Ok(_) if url.len() > MAX_URL_CHARS => {
            format!("the upstream URL is at most {MAX_URL_CHARS} characters")
        }
        Ok(_) => format!(
            "not {general}; a host name is letters, digits, `_` and single hyphens, its last \
             label starting with a letter or `_`, and a port is 1 to 65535"
        ),
    }
}
