//! [`Authenticator`], what the edge and the extractors call: the value of
//! an `Authorization` header to the principal it names, from the cache of
//! verified tokens when it is there, else verified and cached.

use std::sync::Arc;

use axum::http::HeaderValue;

use super::cache::TokenCache;
use super::error::AuthError;
use super::issuer::{IssuerConfig, JwksFetch};
use super::principal::Principal;
use super::verify::Verifier;
use crate::bearer;

/// Largest `Authorization` header accepted.
pub const MAX_AUTHORIZATION_BYTES: usize = 8 * 1024;
/// Largest leeway the configuration may set.
pub const MAX_LEEWAY_SECS: u64 = 30;

/// Verifies bearer tokens against the configured issuers.
pub struct Authenticator {
    verifier: Verifier,
    cache: TokenCache,
}

impl Authenticator {
    /// Builds an authenticator that fetches JWKS documents through `jwks`.
    /// `leeway_secs` is clamped to 30 seconds.
    pub fn new(issuers: Vec<IssuerConfig>, leeway_secs: u64, jwks: JwksFetch) -> Self {
        let leeway = leeway_secs.min(MAX_LEEWAY_SECS);
        Self {
            verifier: Verifier::new(issuers, leeway, jwks),
            cache: TokenCache::new(leeway),
        }
    }

    /// How many JWKS fetches an issuer has made (for tests and metrics).
    pub async fn jwks_fetches(&self, issuer: &str) -> u64 {
        self.verifier.jwks_fetches(issuer).await
    }

    /// Verifies the value of an `Authorization` header.
    pub async fn verify_header(
        &self,
        value: Option<&HeaderValue>,
    ) -> Result<Arc<Principal>, AuthError> {
        let Some(value) = value else {
            return Err(AuthError::Missing);
        };
        if value.len() > MAX_AUTHORIZATION_BYTES {
            return Err(AuthError::Invalid("authorization header too large".into()));
        }
        // Bytes first: a cached token is found without checking the header
        // character by character (a cached token was checked when cached,
        // and a hit compares equal to it).
        let token = match bearer::split_authorization(value.as_bytes()) {
            bearer::Credentials::Bearer(token) => token,
            bearer::Credentials::OtherScheme => {
                if value.to_str().is_err() {
                    return Err(AuthError::Invalid(
                        "authorization header is not ASCII".into(),
                    ));
                }
                return Err(AuthError::Missing);
            }
        };
        if let Some(hit) = self.cache.cached(token) {
            return hit;
        }
        let token = std::str::from_utf8(token)
            .ok()
            .filter(|_| value.to_str().is_ok())
            .ok_or_else(|| AuthError::Invalid("authorization header is not ASCII".into()))?;
        self.verify_and_cache(token).await
    }

    /// The principal of an `Authorization` header whose bearer token was
    /// verified before and has not expired; `None` for anything else
    /// (absent from the cache, expired, another scheme, malformed), which
    /// [`Authenticator::verify_header`] then answers properly. For paths
    /// that answer without awaiting (the server's conditional-read fast
    /// path).
    pub fn cached_header(&self, value: &HeaderValue) -> Option<Arc<Principal>> {
        if value.len() > MAX_AUTHORIZATION_BYTES {
            return None;
        }
        let bearer::Credentials::Bearer(token) = bearer::split_authorization(value.as_bytes())
        else {
            return None;
        };
        // Read only: an expired entry is left for the full path to drop
        // and answer.
        self.cache.unexpired_principal(token)
    }

    /// Verifies a compact JWT.
    pub async fn verify(&self, token: &str) -> Result<Arc<Principal>, AuthError> {
        if let Some(hit) = self.cache.cached(token.as_bytes()) {
            return hit;
        }
        self.verify_and_cache(token).await
    }

    async fn verify_and_cache(&self, token: &str) -> Result<Arc<Principal>, AuthError> {
        let principal = Arc::new(self.verifier.verify(token).await?);
        self.cache.insert(token, principal.clone());
        Ok(principal)
    }
}
