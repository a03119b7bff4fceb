//! OAuth 2.0 towards a provider's authorization server, with the `oauth2`
//! crate over the server's egress path (`pinfold-egress`): metadata discovery (RFC 8414, then
//! OpenID Connect discovery), the authorization request with PKCE S256
//! (RFC 7636) and an RFC 8707 `resource`, and the code exchange.
//!
//! The egress path follows no redirect: a token endpoint answering `302`
//! is an error, never a hop to wherever it points (the code, the verifier
//! and the client secret would travel with it).

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use oauth2::basic::{
    BasicErrorResponse, BasicRevocationErrorResponse, BasicTokenIntrospectionResponse,
    BasicTokenType,
};
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointNotSet, EndpointSet,
    ExtraTokenFields, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RequestTokenError, Scope,
    StandardRevocableToken, StandardTokenResponse, TokenResponse as _, TokenUrl,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

use pinfold_egress::EgressError;

use crate::model::EndpointSource;

/// One tenant's way out to authorization servers: the server's egress
/// path under the tenant's rules (public addresses, its `egress_allow`,
/// loopback only when the operator allows it), with the scope service's
/// timeout and answer size.
#[derive(Clone)]
pub struct Outbound {
    /// The server's egress path.
    pub egress: Arc<pinfold_egress::Egress>,
    /// The tenant's rules.
    pub rules: pinfold_egress::Rules,
    /// Timeout of one request.
    pub timeout: Duration,
    /// Largest metadata or token response read.
    pub max: usize,
}

/// Checks a URL Pinfold will send a provider's credentials to (issuer,
/// authorization and token endpoints), when a profile is written, after
/// discovery and again before a grant: an absolute `http(s)` URL without
/// user info; plain `http://` only to a host the tenant's `egress_allow`
/// names (or loopback, when the operator allows it), since the client
/// secret and the code travel to it. Which addresses it may reach is judged
/// when a request is made, and a refusal then reads as "unreachable", like
/// a closed port: a profile write must not tell a caller which internal
/// addresses answer.
pub fn provider_url(out: &Outbound, raw: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(raw.trim()).map_err(|e| format!("{raw:?} is not a URL ({e})"))?;
    out.egress
        .admit_form(&out.rules, &url, true)
        .map_err(|e| match e {
            EgressError::InvalidUrl => format!(
                "{raw:?} must be an http:// or https:// URL with a host and without credentials"
            ),
            EgressError::PlainCredentials => format!(
                "{raw:?} must be https (plain http only to a host the tenant's egress_allow names)"
            ),
            other => format!("{raw:?}: {other}"),
        })?;
    Ok(url)
}

/// Why talking to an authorization server failed.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// It answered with a redirect, which is not followed.
    #[error(
        "answered HTTP {0} (a redirect); Pinfold follows no redirect from an authorization server"
    )]
    Redirect(u16),
    /// It could not be reached (or the egress policy refused it: the two
    /// read the same), or the exchange broke off.
    #[error("{0}")]
    Transport(EgressError),
    /// It answered more than the configured limit.
    #[error("answered more than {0} bytes")]
    TooLarge(usize),
}

impl From<EgressError> for HttpError {
    fn from(e: EgressError) -> Self {
        match e {
            EgressError::Redirect(s) => HttpError::Redirect(s),
            EgressError::TooLarge(n) => HttpError::TooLarge(n),
            // "not allowed" and "unreachable" read the same to the caller:
            // a refused address must not be told from a closed port.
            EgressError::NotAllowed | EgressError::PlainCredentials => {
                HttpError::Transport(EgressError::Unreachable)
            }
            other => HttpError::Transport(other),
        }
    }
}

/// Sends one request (the `oauth2` crate's, or discovery's) through the
/// egress path: no redirect followed, the answer read up to the limit.
async fn send(
    out: Outbound,
    credentials: bool,
    req: oauth2::HttpRequest,
) -> Result<oauth2::HttpResponse, HttpError> {
    let (parts, body) = req.into_parts();
    let url = url::Url::parse(&parts.uri.to_string()).map_err(|_| EgressError::InvalidUrl)?;
    let builder = out
        .egress
        .request(&out.rules, parts.method, url, credentials)?
        .headers(parts.headers)
        .body(body)
        .timeout(out.timeout);
    let mut resp = out.egress.send(builder).await?;
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = pinfold_egress::read_body(&mut resp, out.max).await?;
    let mut answer = http::Response::new(bytes);
    *answer.status_mut() = status;
    *answer.headers_mut() = headers;
    Ok(answer)
}

/// Endpoints found by discovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    /// Authorization endpoint.
    pub authorization_endpoint: String,
    /// Token endpoint.
    pub token_endpoint: String,
    /// Which document named them.
    pub source: EndpointSource,
}

/// Why discovery failed (the message names every attempt).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    /// No metadata document could be read.
    #[error("{0}")]
    NotFound(String),
    /// The metadata does not offer PKCE with S256.
    #[error("{0}")]
    NoS256(String),
    /// The metadata is unusable (wrong issuer, missing or refused endpoint).
    #[error("{0}")]
    Invalid(String),
}

/// The two metadata URLs of `issuer`, in the order tried: RFC 8414 §3.1
/// (the well-known segment goes between the host and the issuer's path),
/// then OpenID Connect Discovery 1.0 §4 (appended to the issuer).
pub fn metadata_urls(issuer: &url::Url) -> Vec<(EndpointSource, String)> {
    let path = issuer.path().trim_end_matches('/');
    let origin = issuer.origin().ascii_serialization();
    vec![
        (
            EndpointSource::Rfc8414,
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
        ),
        (
            EndpointSource::OpenidConfiguration,
            format!("{origin}{path}/.well-known/openid-configuration"),
        ),
    ]
}

#[derive(Debug, Deserialize)]
struct Metadata {
    issuer: Option<String>,
    authorization_endpoint: Option<String>,
    token_endpoint: Option<String>,
    #[serde(default)]
    code_challenge_methods_supported: Option<Vec<String>>,
}

/// Discovers the endpoints of `issuer` (already checked with
/// [`provider_url`]). The metadata's `issuer` must be identical to the one
/// asked for (RFC 8414 §3.3), it must list `S256` in
/// `code_challenge_methods_supported` (metadata without it is refused:
/// Pinfold only sends PKCE S256), and both endpoints must pass
/// [`provider_url`].
///
/// A metadata URL that cannot be fetched is reported as "unreachable",
/// whether no connection could be made or the egress policy refused the
/// address a name resolved to: discovery must not tell a caller which
/// internal ports answer.
pub async fn discover(out: &Outbound, issuer: &str) -> Result<Discovered, DiscoveryError> {
    let parsed = provider_url(out, issuer).map_err(DiscoveryError::Invalid)?;
    let mut tried = Vec::new();
    for (source, url) in metadata_urls(&parsed) {
        let mut req = http::Request::new(Vec::new());
        *req.method_mut() = http::Method::GET;
        let Ok(uri) = url.parse() else {
            tried.push(format!("{url}: not a URL"));
            continue;
        };
        *req.uri_mut() = uri;
        req.headers_mut().insert(
            http::header::ACCEPT,
            http::HeaderValue::from_static("application/json"),
        );
        let resp = match send(out.clone(), false, req).await {
            Ok(r) => r,
            Err(e) => {
                tried.push(format!("{url}: {e}"));
                continue;
            }
        };
        let status = resp.status();
        if !status.is_success() {
            tried.push(format!("{url}: HTTP {}", status.as_u16()));
            continue;
        }
        let bytes = resp.into_body();
        let meta: Metadata = match serde_json::from_slice(&bytes) {
            Ok(m) => m,
            Err(_) => {
                tried.push(format!("{url}: not a JSON metadata object"));
                continue;
            }
        };
        if meta.issuer.as_deref() != Some(issuer) {
            return Err(DiscoveryError::Invalid(format!(
                "{url} names issuer {:?}, not {issuer:?} (RFC 8414 §3.3 requires them identical)",
                meta.issuer.unwrap_or_default()
            )));
        }
        let s256 = meta
            .code_challenge_methods_supported
            .as_ref()
            .is_some_and(|m| m.iter().any(|x| x == "S256"));
        if !s256 {
            return Err(DiscoveryError::NoS256(format!(
                "{url} does not list S256 in code_challenge_methods_supported; Pinfold only uses PKCE with S256"
            )));
        }
        let (Some(auth), Some(token)) = (meta.authorization_endpoint, meta.token_endpoint) else {
            return Err(DiscoveryError::Invalid(format!(
                "{url} lacks authorization_endpoint or token_endpoint"
            )));
        };
        for (name, u) in [
            ("authorization_endpoint", &auth),
            ("token_endpoint", &token),
        ] {
            provider_url(out, u)
                .map_err(|e| DiscoveryError::Invalid(format!("{url}: {name}: {e}")))?;
        }
        return Ok(Discovered {
            authorization_endpoint: auth,
            token_endpoint: token,
            source,
        });
    }
    Err(DiscoveryError::NotFound(format!(
        "no authorization server metadata for {issuer}: {}",
        tried.join("; ")
    )))
}

/// Token response members beyond the standard ones (`id_token`, ...), kept
/// so the response passes through whole.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Extra {
    /// The members oauth2 does not model.
    #[serde(flatten)]
    pub members: Map<String, Value>,
}

impl ExtraTokenFields for Extra {}

/// The token response, standard members parsed, the rest kept.
pub type TokenResponse = StandardTokenResponse<Extra, BasicTokenType>;

type Client = oauth2::Client<
    BasicErrorResponse,
    TokenResponse,
    BasicTokenIntrospectionResponse,
    StandardRevocableToken,
    BasicRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointSet,
>;

/// Where and as whom a grant talks to the authorization server.
#[derive(Debug, Clone)]
pub struct ClientConfig<'a> {
    /// Client id.
    pub client_id: &'a str,
    /// Client secret (`client_secret_basic`), if any.
    pub client_secret: Option<String>,
    /// Authorization endpoint.
    pub authorization_endpoint: &'a str,
    /// Token endpoint.
    pub token_endpoint: &'a str,
    /// Redirect URI.
    pub redirect_uri: &'a str,
}

fn client(c: &ClientConfig<'_>) -> Result<Client, String> {
    let mut client = oauth2::Client::new(ClientId::new(c.client_id.to_owned()))
        .set_auth_uri(AuthUrl::new(c.authorization_endpoint.to_owned()).map_err(|e| e.to_string())?)
        .set_token_uri(TokenUrl::new(c.token_endpoint.to_owned()).map_err(|e| e.to_string())?)
        .set_redirect_uri(RedirectUrl::new(c.redirect_uri.to_owned()).map_err(|e| e.to_string())?);
    if let Some(s) = &c.client_secret {
        client = client.set_client_secret(ClientSecret::new(s.clone()));
    }
    Ok(client)
}

/// A new `state`: 32 random bytes (256 bits), base64url.
pub fn new_state() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| "no randomness".to_owned())?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// Lowercase hex SHA-256 of a state (what is stored).
pub fn state_hash(state: &str) -> String {
    hex::encode(Sha256::digest(state.as_bytes()))
}

/// A PKCE pair: the S256 challenge and its verifier, from 32 random bytes
/// (a 43-character verifier; RFC 7636 §4.1 asks for 256 bits of entropy).
pub fn new_pkce() -> (PkceCodeChallenge, PkceCodeVerifier) {
    PkceCodeChallenge::new_random_sha256_len(32)
}

/// The S256 challenge of a verifier (RFC 7636 §4.2).
pub fn s256_challenge(verifier: &str) -> String {
    PkceCodeChallenge::from_code_verifier_sha256(&PkceCodeVerifier::new(verifier.to_owned()))
        .as_str()
        .to_owned()
}

/// The authorization request URL (RFC 6749 §4.1.1 with PKCE S256 and the
/// RFC 8707 `resource`, which the MCP authorization specification requires
/// in both the authorization and the token request).
pub fn authorization_url(
    c: &ClientConfig<'_>,
    state: &str,
    challenge: PkceCodeChallenge,
    scopes: &[String],
    resource: &str,
) -> Result<String, String> {
    let client = client(c)?;
    let state = state.to_owned();
    let req = client
        .authorize_url(move || CsrfToken::new(state.clone()))
        .add_scopes(scopes.iter().cloned().map(Scope::new))
        .set_pkce_challenge(challenge)
        .add_extra_param("resource", resource.to_owned());
    Ok(req.url().0.to_string())
}

/// Why an exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    /// The authorization server refused (its `error` code and description).
    #[error("the token endpoint refused: {code}")]
    Refused {
        /// RFC 6749 §5.2 error code.
        code: String,
        /// Its description, if any.
        description: Option<String>,
    },
    /// The HTTP exchange failed (including a redirect).
    #[error("the token endpoint {0}")]
    Http(HttpError),
    /// The answer is not a token response.
    #[error("the token endpoint's answer is not a token response: {0}")]
    Invalid(String),
    /// The client could not be configured.
    #[error("{0}")]
    Config(String),
}

/// Exchanges `code` (RFC 6749 §4.1.3) with the PKCE verifier and the RFC
/// 8707 `resource` (a form parameter of the token request, as the MCP
/// authorization specification requires), through the egress path (which
/// follows no redirect).
pub async fn exchange(
    out: &Outbound,
    c: &ClientConfig<'_>,
    code: &str,
    verifier: String,
    resource: &str,
) -> Result<TokenResponse, ExchangeError> {
    let client = client(c).map_err(ExchangeError::Config)?;
    let sender = |req: oauth2::HttpRequest| send(out.clone(), true, req);
    let req = client
        .exchange_code(AuthorizationCode::new(code.to_owned()))
        .set_pkce_verifier(PkceCodeVerifier::new(verifier))
        .add_extra_param("resource", resource.to_owned());
    req.request_async(&sender).await.map_err(|e| match e {
        RequestTokenError::ServerResponse(r) => ExchangeError::Refused {
            code: r.error().as_ref().to_owned(),
            description: r.error_description().cloned(),
        },
        RequestTokenError::Request(h) => ExchangeError::Http(h),
        RequestTokenError::Parse(e, _) => ExchangeError::Invalid(e.to_string()),
        RequestTokenError::Other(m) => ExchangeError::Invalid(m),
    })
}

/// The scopes a token response grants; RFC 6749 §5.1 lets the server omit
/// `scope` when it is identical to the request, so `requested` stands in.
pub fn granted_scopes(token: &TokenResponse, requested: &[String]) -> Vec<String> {
    match token.scopes() {
        Some(s) => crate::model::normalise(&s.iter().map(|s| s.to_string()).collect::<Vec<_>>()),
        None => requested.to_vec(),
    }
}

/// The token response as JSON, to pass through once.
pub fn token_json(token: &TokenResponse) -> Value {
    serde_json::to_value(token).unwrap_or_else(|_| Value::Object(Map::new()))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// RFC 7636 Appendix B: the verifier of those 32 octets and its S256
    /// challenge.
    #[test]
    fn rfc7636_appendix_b_vector() {
        let octets: [u8; 32] = [
            116, 24, 223, 180, 151, 153, 224, 37, 79, 250, 96, 125, 216, 173, 187, 186, 22, 212,
            37, 77, 105, 214, 191, 240, 91, 88, 5, 88, 83, 132, 141, 121,
        ];
        let verifier = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(octets);
        assert_eq!(verifier, "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk");
        assert_eq!(
            s256_challenge(&verifier),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn fresh_pkce_and_state_are_long_enough() {
        let (challenge, verifier) = new_pkce();
        assert_eq!(verifier.secret().len(), 43);
        assert_eq!(challenge.method().as_str(), "S256");
        assert_eq!(s256_challenge(verifier.secret()), challenge.as_str());
        let a = new_state().unwrap();
        assert_eq!(a.len(), 43);
        assert_ne!(a, new_state().unwrap());
        assert_eq!(state_hash("x").len(), 64);
    }

    #[test]
    fn metadata_urls_follow_rfc8414_and_oidc() {
        let u = url::Url::parse("https://as.example/tenant1").unwrap();
        let urls: Vec<String> = metadata_urls(&u).into_iter().map(|(_, u)| u).collect();
        assert_eq!(
            urls,
            [
                "https://as.example/.well-known/oauth-authorization-server/tenant1",
                "https://as.example/tenant1/.well-known/openid-configuration"
            ]
        );
        let u = url::Url::parse("http://127.0.0.1:9000").unwrap();
        let urls: Vec<String> = metadata_urls(&u).into_iter().map(|(_, u)| u).collect();
        assert_eq!(
            urls,
            [
                "http://127.0.0.1:9000/.well-known/oauth-authorization-server",
                "http://127.0.0.1:9000/.well-known/openid-configuration"
            ]
        );
    }

    #[test]
    fn authorization_urls_carry_pkce_state_scope_and_resource() {
        let c = ClientConfig {
            client_id: "pinfold",
            client_secret: None,
            authorization_endpoint: "https://as.example/authorize",
            token_endpoint: "https://as.example/token",
            redirect_uri: "https://app.example/cb",
        };
        let (challenge, _) = new_pkce();
        let expected = challenge.as_str().to_owned();
        let url = authorization_url(
            &c,
            "st4te",
            challenge,
            &["read".into(), "write".into()],
            "https://mcp.example/mcp",
        )
        .unwrap();
        let u = url::Url::parse(&url).unwrap();
        let q: BTreeMap<String, String> = u.query_pairs().into_owned().collect();
        assert_eq!(q["response_type"], "code");
        assert_eq!(q["client_id"], "pinfold");
        assert_eq!(q["state"], "st4te");
        assert_eq!(q["scope"], "read write");
        assert_eq!(q["code_challenge_method"], "S256");
        assert_eq!(q["code_challenge"], expected);
        assert_eq!(q["redirect_uri"], "https://app.example/cb");
        assert_eq!(q["resource"], "https://mcp.example/mcp");
    }
}
