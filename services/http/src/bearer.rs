//! The bearer-token pre-parser: the steps [`crate::auth::Authenticator`]
//! takes on an `Authorization` header before any key or cache is touched.
//!
//! - [`split_authorization`] finds the scheme (RFC 6750 §2.1: `Bearer`,
//!   compared case-insensitively as RFC 9110 §11.1 says of auth schemes) and
//!   the credentials after the first space, with surrounding ASCII white
//!   space removed;
//! - [`jwt_segments`] splits a compact JWS (RFC 7515 §7.1) into exactly
//!   three segments;
//! - [`payload_claims`] decodes the payload segment (base64url without
//!   padding, RFC 7515 §2) into a JSON object, and [`issuer`] reads its
//!   `iss`, which picks the configured issuer.
//!
//! Everything here is a pure function of its input, with no dependency
//! beyond `base64` and `serde_json`, so that the fuzz target `bearer`
//! (`fuzz/`) can build this file on its own. It must therefore use nothing
//! of this crate (no `crate::` paths).

use base64::Engine as _;
use serde_json::{Map, Value};

/// What an `Authorization` header value says, before verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credentials<'a> {
    /// The `Bearer` scheme, with the token bytes (trimmed; possibly empty).
    Bearer(&'a [u8]),
    /// Any other scheme (or none): not a bearer token.
    OtherScheme,
}

/// Splits a header value into scheme and credentials at the first space.
pub fn split_authorization(value: &[u8]) -> Credentials<'_> {
    let (scheme, token) = match value.iter().position(|b| *b == b' ') {
        Some(i) => (&value[..i], &value[i + 1..]),
        None => (value, &b""[..]),
    };
    if scheme.eq_ignore_ascii_case(b"bearer") {
        Credentials::Bearer(token.trim_ascii())
    } else {
        Credentials::OtherScheme
    }
}

/// The three dot-separated segments of a compact JWS, or why not.
pub fn jwt_segments(token: &str) -> Result<[&str; 3], &'static str> {
    let mut it = token.split('.');
    match (it.next(), it.next(), it.next(), it.next()) {
        (Some(h), Some(p), Some(s), None) => Ok([h, p, s]),
        _ => Err("a JWT has exactly three segments"),
    }
}

/// Decodes a JWT payload segment into its claims object.
pub fn payload_claims(segment: &str) -> Result<Map<String, Value>, &'static str> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(segment)
        .map_err(|_| "token payload is not base64url")?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(claims)) => Ok(claims),
        Ok(_) => Err("token payload is not a JSON object"),
        Err(_) => Err("token payload is not JSON"),
    }
}

/// The `iss` claim, which must be present and a string.
pub fn issuer(claims: &Map<String, Value>) -> Result<&str, &'static str> {
    claims
        .get("iss")
        .ok_or("missing required claim iss")?
        .as_str()
        .ok_or("claim iss must be a string")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_and_trimming() {
        assert_eq!(
            split_authorization(b"Bearer  a.b.c \t"),
            Credentials::Bearer(b"a.b.c")
        );
        assert_eq!(split_authorization(b"bEaReR"), Credentials::Bearer(b""));
        assert_eq!(split_authorization(b"Basic abc"), Credentials::OtherScheme);
        assert_eq!(split_authorization(b"Bearerx y"), Credentials::OtherScheme);
        assert_eq!(split_authorization(b""), Credentials::OtherScheme);
    }

    #[test]
    fn segments_and_claims() {
        assert_eq!(jwt_segments("a.b.c"), Ok(["a", "b", "c"]));
        assert!(jwt_segments("a.b").is_err());
        assert!(jwt_segments("a.b.c.d").is_err());
        // {"iss":"x"} in base64url without padding.
        let claims = payload_claims("eyJpc3MiOiJ4In0").unwrap();
        assert_eq!(issuer(&claims), Ok("x"));
        assert_eq!(
            payload_claims("eyJpc3MiOiJ4In0="),
            Err("token payload is not base64url")
        );
        // "[]"
        assert_eq!(
            payload_claims("W10"),
            Err("token payload is not a JSON object")
        );
        let claims = payload_claims("e30").unwrap(); // {}
        assert_eq!(issuer(&claims), Err("missing required claim iss"));
    }
}
