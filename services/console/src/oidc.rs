//! The console as an OAuth client of the identity provider: the
//! configuration of its client (the provider's issuer, which must be one
//! the API trusts for bearer tokens, its client id and secret, the
//! redirect URI, the scopes and the RFC 8707 resource it asks for), the
//! provider's endpoints (OpenID discovery, once), the authorization URL
//! with PKCE S256, and the code exchange. Every request goes out through
//! the server's egress path under the rules of the server's own requests
//! (as JWKS documents do), and follows no redirect.

use aws_lc_rs::digest;
use base64::Engine as _;
use pinfold_http::auth::JwksFetch;
use serde::Deserialize;
use tokio::sync::OnceCell;

/// The largest discovery document or token response read.
const MAX_BYTES: usize = 64 * 1024;

/// The provider's endpoints the console uses.
#[derive(Debug, Clone, Deserialize)]
pub struct Endpoints {
    /// The issuer the document names (must equal the configured one).
    pub issuer: String,
    /// Where the browser is sent.
    pub authorization_endpoint: String,
    /// Where the code is exchanged.
    pub token_endpoint: String,
}

/// Why a sign-in with the provider failed (said to the user without the
/// provider's details, logged with them).
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    /// The provider could not be reached or answered something unusable.
    #[error("the identity provider is unavailable: {0}")]
    Provider(String),
    /// The provider refused the code.
    #[error("the identity provider refused the sign-in: {0}")]
    Refused(String),
}

/// The console's client at the identity provider.
pub struct OidcClient {
    /// What the sign-in button says ("Sign in with …").
    pub name: String,
    /// The provider's issuer: one of `[auth] issuers`, whose access tokens
    /// the console verifies exactly as the API does.
    pub issuer: String,
    /// The client id.
    pub client_id: String,
    /// The client secret (`None`: a public client, PKCE only).
    pub client_secret: Option<String>,
    /// The console's public base URL (`https://pinfold.example`): the
    /// redirect URI is `‹base›/console/callback`.
    pub public_url: String,
    /// The scopes asked for.
    pub scopes: Vec<String>,
    /// The RFC 8707 resource asked for (the audience the API expects),
    /// when the provider needs one to issue a JWT access token.
    pub resource: Option<String>,
    /// The egress path and the rules of the server's own requests.
    pub outbound: JwksFetch,
    /// The endpoints, discovered once.
    pub endpoints: OnceCell<Endpoints>,
}

impl std::fmt::Debug for OidcClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcClient")
            .field("name", &self.name)
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "‹redacted›"),
            )
            .field("public_url", &self.public_url)
            .field("scopes", &self.scopes)
            .field("resource", &self.resource)
            .finish()
    }
}

/// The PKCE S256 challenge of a verifier (RFC 7636).
pub fn challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(digest::digest(&digest::SHA256, verifier.as_bytes()))
}

impl OidcClient {
    /// The redirect URI registered at the provider.
    pub fn redirect_uri(&self) -> String {
        format!("{}/console/callback", self.public_url.trim_end_matches('/'))
    }

    async fn get_json<T: for<'de> Deserialize<'de>>(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<(reqwest::StatusCode, Result<T, String>), OidcError> {
        let mut resp = self
            .outbound
            .egress
            .send(req)
            .await
            .map_err(|e| OidcError::Provider(e.to_string()))?;
        let status = resp.status();
        let bytes = pinfold_egress::read_body(&mut resp, MAX_BYTES)
            .await
            .map_err(|e| OidcError::Provider(e.to_string()))?;
        Ok((
            status,
            serde_json::from_slice(&bytes)
                .map_err(|_| String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned()),
        ))
    }

    /// The provider's endpoints, from its OpenID configuration (fetched
    /// once; a failed fetch is tried again next time).
    pub async fn endpoints(&self) -> Result<&Endpoints, OidcError> {
        self.endpoints
            .get_or_try_init(|| async {
                let url = format!(
                    "{}/.well-known/openid-configuration",
                    self.issuer.trim_end_matches('/')
                );
                let url = url::Url::parse(&url).map_err(|e| OidcError::Provider(e.to_string()))?;
                let req = self
                    .outbound
                    .egress
                    .request(&self.outbound.rules, reqwest::Method::GET, url, false)
                    .map_err(|e| OidcError::Provider(e.to_string()))?;
                let (status, doc) = self.get_json::<Endpoints>(req).await?;
                let doc =
                    doc.map_err(|_| OidcError::Provider(format!("discovery answered {status}")))?;
                if doc.issuer != self.issuer {
                    return Err(OidcError::Provider(format!(
                        "discovery names issuer {:?}, not {:?}",
                        doc.issuer, self.issuer
                    )));
                }
                Ok(doc)
            })
            .await
    }

    /// The origin of the provider's authorization endpoint (the sign-in
    /// form's redirect goes there), or of its issuer while discovery fails.
    pub async fn authorization_origin(&self) -> String {
        let url = match self.endpoints().await {
            Ok(ep) => ep.authorization_endpoint.clone(),
            Err(_) => self.issuer.clone(),
        };
        url::Url::parse(&url)
            .map(|u| u.origin().ascii_serialization())
            .unwrap_or_default()
    }

    /// The authorization URL for `state`, the PKCE `verifier` and `nonce`.
    pub async fn authorization_url(
        &self,
        state: &str,
        verifier: &str,
        nonce: &str,
    ) -> Result<String, OidcError> {
        let ep = self.endpoints().await?;
        let mut url = url::Url::parse(&ep.authorization_endpoint)
            .map_err(|e| OidcError::Provider(e.to_string()))?;
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("response_type", "code")
                .append_pair("client_id", &self.client_id)
                .append_pair("redirect_uri", &self.redirect_uri())
                .append_pair("scope", &self.scopes.join(" "))
                .append_pair("state", state)
                .append_pair("nonce", nonce)
                .append_pair("code_challenge", &challenge(verifier))
                .append_pair("code_challenge_method", "S256");
            if let Some(r) = &self.resource {
                q.append_pair("resource", r);
            }
        }
        Ok(url.to_string())
    }

    /// Exchanges `code` (with the PKCE `verifier`) for the access token.
    pub async fn exchange(&self, code: &str, verifier: &str) -> Result<String, OidcError> {
        #[derive(Deserialize)]
        struct TokenResponse {
            access_token: Option<String>,
            error: Option<String>,
        }
        let ep = self.endpoints().await?;
        let url =
            url::Url::parse(&ep.token_endpoint).map_err(|e| OidcError::Provider(e.to_string()))?;
        let body = {
            let mut form = url::form_urlencoded::Serializer::new(String::new());
            form.append_pair("grant_type", "authorization_code")
                .append_pair("code", code)
                .append_pair("redirect_uri", &self.redirect_uri())
                .append_pair("code_verifier", verifier);
            if let Some(r) = &self.resource {
                form.append_pair("resource", r);
            }
            if self.client_secret.is_none() {
                form.append_pair("client_id", &self.client_id);
            }
            form.finish()
        };
        let mut req = self
            .outbound
            .egress
            .request(&self.outbound.rules, reqwest::Method::POST, url, true)
            .map_err(|e| OidcError::Provider(e.to_string()))?
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json");
        if let Some(secret) = &self.client_secret {
            req = req.basic_auth(&self.client_id, Some(secret));
        }
        let (status, body) = self.get_json::<TokenResponse>(req.body(body)).await?;
        match body {
            Ok(TokenResponse {
                access_token: Some(t),
                ..
            }) if status.is_success() => Ok(t),
            Ok(TokenResponse { error, .. }) => Err(OidcError::Refused(
                error.unwrap_or_else(|| format!("status {status}")),
            )),
            Err(_) => Err(OidcError::Refused(format!("status {status}"))),
        }
    }
}
