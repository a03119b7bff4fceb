//! Which URLs the operator may configure: the shape of an `http(s)` URL
//! ([`http_url`]: what `public_url` and the OTLP endpoints must be, and
//! what an issuer must be to be named as an authorization server), and the
//! check of a configured JWKS URL ([`trusted_fetch_url`]): `https://` to
//! any host, plain `http://` only to loopback, never credentials in the
//! URL.
//!
//! These are checks of configuration as written. Where a request may
//! actually go is the egress path's to decide (`pinfold-egress`, wired in
//! [`crate::egress_wiring`]): every outbound request, JWKS fetches
//! included, is judged there by the addresses it connects to.
//!
//! URLs are parsed (WHATWG rules, the same parser the HTTP client uses), never
//! compared as strings: `http://localhost.evil.com` is a host under
//! `evil.com`, and `http://localhost@evil.com` is `evil.com` with a user name.
//! The host the client would connect to is the host we judge.

use std::net::Ipv6Addr;

use url::{Host, Url};

/// Parses an absolute `http://` or `https://` URL with a host and no
/// credentials (`user:password@` would end up in logs and error messages).
pub fn http_url(raw: &str) -> Result<Url, String> {
    let url = Url::parse(raw.trim()).map_err(|e| format!("{raw:?} is not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("{raw:?} must be an http:// or https:// URL"));
    }
    if url.host().is_none() {
        return Err(format!("{raw:?} has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "{raw:?} must not carry credentials (user:password@)"
        ));
    }
    Ok(url)
}

/// Whether `host` is this machine: `localhost`, `127.0.0.0/8`, `::1` (also
/// written as the IPv4-mapped `::ffff:127.x.y.z`). Subdomains of `localhost`
/// and names that merely start with it are not: they go through DNS.
pub fn is_loopback(host: &Host<&str>) -> bool {
    match host {
        Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
        Host::Ipv4(ip) => ip.is_loopback(),
        Host::Ipv6(ip) => ipv6_is_loopback(ip),
    }
}

fn ipv6_is_loopback(ip: &Ipv6Addr) -> bool {
    ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
}

/// A configured JWKS URL: `https://` anywhere, plain `http://` only to
/// this machine ([`is_loopback`]: a local identity provider in
/// development), never with credentials.
pub fn trusted_fetch_url(raw: &str) -> Result<Url, String> {
    let url = http_url(raw)?;
    let local = url.host().is_some_and(|h| is_loopback(&h));
    if url.scheme() == "https" || local {
        Ok(url)
    } else {
        Err(format!(
            "{raw:?} must be https (plain http only to localhost, 127.0.0.0/8 or [::1])"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host_of(raw: &str) -> String {
        Url::parse(raw).unwrap().host_str().unwrap().to_owned()
    }

    #[test]
    fn hosts_are_judged_as_the_client_sees_them() {
        // The parser, not a prefix, decides where a request goes.
        assert_eq!(host_of("http://localhost.evil.com/x"), "localhost.evil.com");
        assert_eq!(host_of("http://user@evil.com@localhost/x"), "localhost");
        assert_eq!(host_of("http://127.1/x"), "127.0.0.1");
        assert_eq!(host_of("http://0x7f000001/x"), "127.0.0.1");
        for (raw, local) in [
            ("http://localhost/", true),
            ("http://127.0.0.1/", true),
            ("http://127.1/", true),
            ("http://0x7f000001/", true),
            ("http://[::1]/", true),
            ("http://[::ffff:127.0.0.1]/", true),
            ("http://localhost.evil.com/", false),
            ("http://127.0.0.1.nip.io/", false),
            ("http://foo.localhost/", false),
            ("http://[::2]/", false),
            ("http://128.0.0.1/", false),
        ] {
            let url = Url::parse(raw).unwrap();
            assert_eq!(is_loopback(&url.host().unwrap()), local, "{raw}");
        }
    }

    #[test]
    fn fetch_urls_refuse_credentials_other_schemes_and_remote_plain_http() {
        assert!(trusted_fetch_url("https://idp.example/jwks").is_ok());
        assert!(trusted_fetch_url("http://127.0.0.1:1234/jwks").is_ok());
        for bad in [
            "http://idp.example/jwks",
            "http://localhost@evil.com/",
            "http://user@evil.com@localhost/",
            "https://u:p@idp.example/jwks",
            "file:///etc/passwd",
            "data:text/plain,x",
            "not a url",
        ] {
            assert!(trusted_fetch_url(bad).is_err(), "{bad}");
        }
    }
}
