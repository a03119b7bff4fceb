//! The `insufficient_scope` challenge: the `WWW-Authenticate` value that
//! names the scopes an operation needs, and the one scope it never names.

/// The scope a challenge never names (MCP authorization: a refresh token is
/// the client's business, not an operation's requirement).
pub const OFFLINE_ACCESS: &str = "offline_access";

/// Renders an `insufficient_scope` Bearer challenge (RFC 6750 §3; RFC 9728
/// §5.1 `resource_metadata`). Scope tokens are NQCHAR, so they need no
/// escaping; the URL is written as an RFC 9110 quoted-string.
pub fn www_authenticate(scopes: &[String], resource_metadata: Option<&str>) -> String {
    let mut s = String::from("Bearer error=\"insufficient_scope\", scope=\"");
    let mut first = true;
    for sc in scopes.iter().filter(|s| s.as_str() != OFFLINE_ACCESS) {
        if !first {
            s.push(' ');
        }
        first = false;
        s.push_str(sc);
    }
    s.push('"');
    if let Some(url) = resource_metadata {
        s.push_str(", resource_metadata=\"");
        for c in url.chars() {
            if c == '"' || c == '\\' {
                s.push('\\');
            }
            s.push(c);
        }
        s.push('"');
    }
    s
}
