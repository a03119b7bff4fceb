//! A client for a Pinfold server's `/v1` API, shared by the commands that talk
//! to one (`publish`, `verify`).
//!
//! The bearer token never appears in an error, a `Debug` rendering or a log
//! line: [`Token`] redacts itself.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap};
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use url::Url;

/// A bearer token. Its `Debug` and `Display` say `<redacted>`.
#[derive(Clone)]
pub struct Token(String);

impl Token {
    /// Wraps a token (surrounding whitespace is dropped: a token read from a
    /// file or an environment variable often ends with a newline).
    pub fn new(raw: &str) -> Option<Token> {
        let t = raw.trim();
        (!t.is_empty()).then(|| Token(t.to_owned()))
    }

    /// Reads a token from the environment variable `var`.
    pub fn from_env(var: &str) -> Result<Token, RemoteError> {
        match std::env::var(var) {
            Ok(v) => Token::new(&v).ok_or_else(|| RemoteError::NoToken(var.to_owned())),
            Err(_) => Err(RemoteError::NoToken(var.to_owned())),
        }
    }

    /// The token itself, for an `Authorization` header (never for output).
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// Why a request to Pinfold did not produce an HTTP response.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The server URL is not an absolute http(s) URL (shown without any
    /// `user:password@`).
    #[error("server URL {0:?} is not an absolute http:// or https:// URL")]
    BadUrl(String),
    /// A plain `http://` URL to a host that is not this machine: the token
    /// would cross the network in clear.
    #[error(
        "server URL {0:?} is plain http:// to a host other than this machine: the token would cross the network unencrypted; use https://, or pass --insecure-http if you really mean it"
    )]
    InsecureHttp(String),
    /// The environment variable that should hold the token is unset or empty.
    #[error("no token: environment variable {0} is unset or empty")]
    NoToken(String),
    /// Connecting, sending or reading failed (DNS, refused, TLS, timeout).
    #[error("{url} is unreachable: {reason}")]
    Unreachable {
        /// The URL (without query) that was requested.
        url: String,
        /// What failed, in one line.
        reason: String,
    },
}

/// An HTTP response from Pinfold.
#[derive(Debug)]
pub struct Reply {
    /// Status code.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// The body as received.
    pub body: Bytes,
}

/// The fields of an `application/problem+json` body the CLI reports.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Problem {
    /// Stable machine code (`digest_conflict`, `invalid_document`, ...).
    #[serde(default)]
    pub code: String,
    /// Short title.
    #[serde(default)]
    pub title: String,
    /// Human-readable detail.
    #[serde(default)]
    pub detail: Option<String>,
    /// Every other member (errors with pointers, digests, ...).
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl Reply {
    /// The problem+json body, when the body is one.
    pub fn problem(&self) -> Option<Problem> {
        serde_json::from_slice(&self.body).ok()
    }

    /// The body parsed as JSON.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

/// One Pinfold server, one tenant, one token.
#[derive(Debug, Clone)]
pub struct Remote {
    http: reqwest::Client,
    base: Url,
    tenant: String,
    token: Option<Token>,
}

impl Remote {
    /// A client for `base` (e.g. `https://pinfold.example`) acting in
    /// `tenant`. Redirects are not followed (a redirect would carry the
    /// token elsewhere); every request is bounded by `timeout`. Plain
    /// `http://` is accepted only to a loopback host (`localhost`,
    /// `127.0.0.0/8`, `::1`) unless `insecure_http` is set.
    pub fn new(
        base: &str,
        tenant: &str,
        token: Option<Token>,
        timeout: Duration,
        insecure_http: bool,
    ) -> Result<Remote, RemoteError> {
        let mut url =
            Url::parse(base).map_err(|_| RemoteError::BadUrl(without_credentials(base)))?;
        if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() {
            return Err(RemoteError::BadUrl(without_credentials(base)));
        }
        if url.scheme() == "http" && !insecure_http && !is_loopback(&url) {
            return Err(RemoteError::InsecureHttp(without_credentials(base)));
        }
        if !url.path().ends_with('/') {
            let p = format!("{}/", url.path());
            url.set_path(&p);
        }
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(5).min(timeout))
            .timeout(timeout)
            .user_agent(concat!("pinfold-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| RemoteError::Unreachable {
                url: without_credentials(base),
                reason: one_line(&e.without_url()),
            })?;
        Ok(Remote {
            http,
            base: url,
            tenant: tenant.to_owned(),
            token,
        })
    }

    /// The tenant this client acts in.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// `{base}/v1/tenants/{tenant}/{segments...}`, each segment
    /// percent-encoded (a server name like `io.github.acme/files` stays one
    /// segment).
    pub fn tenant_url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        {
            let mut path = url
                .path_segments_mut()
                .expect("checked in new: the base URL can be a base");
            path.pop_if_empty().extend(["v1", "tenants", &self.tenant]);
            path.extend(segments);
        }
        url
    }

    /// Sends one request; a JSON body is sent as `application/json`. Any HTTP
    /// status is a [`Reply`]; only transport failures are errors.
    pub async fn send(
        &self,
        method: Method,
        url: Url,
        json_body: Option<Vec<u8>>,
        headers: HeaderMap,
    ) -> Result<Reply, RemoteError> {
        let mut req = self
            .http
            .request(method, url.clone())
            .headers(headers)
            .header(ACCEPT, "application/json, application/problem+json");
        if let Some(t) = &self.token {
            req = req.header(AUTHORIZATION, format!("Bearer {}", t.expose()));
        }
        if let Some(b) = json_body {
            req = req.header(CONTENT_TYPE, "application/json").body(b);
        }
        let unreachable = |e: reqwest::Error| {
            let mut shown = url.clone();
            shown.set_query(None);
            let _ = shown.set_username("");
            let _ = shown.set_password(None);
            RemoteError::Unreachable {
                url: shown.to_string(),
                reason: one_line(&e.without_url()),
            }
        };
        let resp = req.send().await.map_err(unreachable)?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = resp.bytes().await.map_err(unreachable)?;
        Ok(Reply {
            status,
            headers,
            body,
        })
    }
}

/// Whether `url`'s host is this machine: `localhost` or a loopback address.
fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// `text` for an error message: a URL without its `user:password@` and
/// query; anything else that looks like it carries credentials is cut at
/// the `@`.
pub(crate) fn without_credentials(text: &str) -> String {
    match Url::parse(text) {
        Ok(mut u) if u.has_host() => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        _ => match (text.find("://"), text.rfind('@')) {
            (Some(s), Some(at)) if at > s => format!("{}://{}", &text[..s], &text[at + 1..]),
            _ => text.to_owned(),
        },
    }
}

/// An error and its sources on one line.
pub(crate) fn one_line(e: &dyn std::error::Error) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_urls_encode_each_segment() {
        let r = Remote::new(
            "https://pinfold.example/base",
            "acme",
            None,
            Duration::from_secs(1),
            false,
        )
        .unwrap();
        let u = r.tenant_url(&["servers", "io.github.acme/files", "versions", "1.0.0"]);
        assert_eq!(
            u.as_str(),
            "https://pinfold.example/base/v1/tenants/acme/servers/io.github.acme%2Ffiles/versions/1.0.0"
        );
    }

    #[test]
    fn only_http_urls_are_servers() {
        for bad in ["ftp://x", "not a url", "mailto:a@b", "/relative"] {
            assert!(matches!(
                Remote::new(bad, "t", None, Duration::from_secs(1), true),
                Err(RemoteError::BadUrl(_))
            ));
        }
    }

    #[test]
    fn plain_http_only_to_this_machine_unless_insecure() {
        let new =
            |u: &str, insecure: bool| Remote::new(u, "t", None, Duration::from_secs(1), insecure);
        for ok in [
            "http://127.0.0.1:8080",
            "http://127.1.2.3/",
            "http://localhost:8080",
            "http://LOCALHOST",
            "http://[::1]:8080",
            "https://pinfold.example",
        ] {
            assert!(new(ok, false).is_ok(), "{ok}");
        }
        for remote in [
            "http://pinfold.example",
            "http://10.0.0.5:8080",
            "http://[2001:db8::1]/",
            "http://localhost.evil.example",
        ] {
            let e = new(remote, false).unwrap_err();
            assert!(matches!(e, RemoteError::InsecureHttp(_)), "{remote}: {e}");
            assert!(e.to_string().contains("--insecure-http"), "{e}");
            assert!(new(remote, true).is_ok(), "{remote}");
        }
    }

    #[test]
    fn credentials_in_urls_are_never_shown() {
        let e = Remote::new(
            "http://alice:pw-secret@pinfold.example/?k=q-secret",
            "t",
            None,
            Duration::from_secs(1),
            false,
        )
        .unwrap_err()
        .to_string();
        assert!(
            !e.contains("pw-secret") && !e.contains("alice") && !e.contains("q-secret"),
            "{e}"
        );
        assert!(e.contains("http://pinfold.example/"), "{e}");
        let e = Remote::new(
            "ftp://alice:pw-secret@x/",
            "t",
            None,
            Duration::from_secs(1),
            true,
        )
        .unwrap_err()
        .to_string();
        assert!(!e.contains("pw-secret"), "{e}");
        let e = Remote::new(
            "bad://alice:pw-secret@ x",
            "t",
            None,
            Duration::from_secs(1),
            true,
        )
        .unwrap_err()
        .to_string();
        assert!(!e.contains("pw-secret"), "{e}");
    }

    #[tokio::test]
    async fn unreachable_errors_name_the_url_without_credentials() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let r = Remote::new(
            &format!("http://alice:pw-secret@{closed}/"),
            "t",
            None,
            Duration::from_secs(2),
            false,
        )
        .unwrap();
        let url = r.tenant_url(&["servers"]);
        let e = r
            .send(Method::GET, url, None, HeaderMap::new())
            .await
            .unwrap_err()
            .to_string();
        assert!(!e.contains("pw-secret") && !e.contains("alice"), "{e}");
        assert!(
            e.contains(&format!("http://{closed}/v1/tenants/t/servers")),
            "{e}"
        );
    }

    #[test]
    fn tokens_never_print() {
        let t = Token::new(" secret-value\n").unwrap();
        assert_eq!(t.expose(), "secret-value");
        assert!(!format!("{t:?}").contains("secret"));
        let r = Remote::new(
            "http://127.0.0.1:1",
            "t",
            Some(t),
            Duration::from_secs(1),
            false,
        )
        .unwrap();
        assert!(!format!("{r:?}").contains("secret-value"));
        assert!(Token::new("  \n").is_none());
    }
}
