//! One trusted token issuer: its configuration ([`IssuerConfig`]: `iss`,
//! `aud`, the algorithm allow-list, where its keys come from, its claim
//! mapping) and, at run time, its keys: a static key, or a JWKS document
//! cached by `kid` and fetched again for an unknown `kid` at most once per
//! refetch interval.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::Algorithm;
use jsonwebtoken::DecodingKey;
use jsonwebtoken::jwk::JwkSet;
use tokio::sync::Mutex;

use super::claims::ClaimMapping;
use super::error::AuthError;

/// Where an issuer's verification keys come from.
pub enum KeySource {
    /// One configured key (Ed25519 public key or HS256 secret); `kid` is ignored.
    Static(DecodingKey),
    /// A JWKS document fetched from a URL and cached by `kid`.
    Jwks {
        /// The JWKS URL.
        url: String,
        /// Minimum time between two fetches caused by unknown `kid`s.
        min_refetch: Duration,
    },
}

/// One trusted token issuer.
pub struct IssuerConfig {
    /// Expected `iss`.
    pub issuer: String,
    /// Expected `aud`.
    pub audience: String,
    /// Algorithms accepted from this issuer.
    pub algorithms: Vec<Algorithm>,
    /// Verification keys.
    pub keys: KeySource,
    /// How a verified token names its tenant and roles.
    pub mapping: ClaimMapping,
}

/// The keys fetched from an issuer's JWKS URL by `kid`, when they were
/// last fetched, and how many fetches there were.
struct JwksState {
    keys: HashMap<String, Arc<DecodingKey>>,
    last_fetch: Option<Instant>,
    fetches: u64,
}

/// A configured issuer and, for a JWKS source, the keys fetched so far.
pub(super) struct Issuer {
    config: IssuerConfig,
    jwks: Mutex<JwksState>,
}

impl Issuer {
    /// An issuer of `config` whose JWKS has not been fetched yet.
    pub(super) fn new(config: IssuerConfig) -> Self {
        Issuer {
            config,
            jwks: Mutex::new(JwksState {
                keys: HashMap::new(),
                last_fetch: None,
                fetches: 0,
            }),
        }
    }

    /// The issuer's configuration.
    pub(super) fn config(&self) -> &IssuerConfig {
        &self.config
    }

    /// How many JWKS fetches the issuer has made.
    pub(super) async fn fetches(&self) -> u64 {
        self.jwks.lock().await.fetches
    }

    /// The key `kid` from the issuer's JWKS at `url`, fetched (with `http`)
    /// when `kid` is unknown and the last fetch is at least `min_refetch`
    /// ago.
    pub(super) async fn jwks_key(
        &self,
        http: &reqwest::Client,
        url: &str,
        min_refetch: Duration,
        kid: &str,
    ) -> Result<DecodingKey, AuthError> {
        let mut state = self.jwks.lock().await;
        if let Some(k) = state.keys.get(kid) {
            return Ok((**k).clone());
        }
        let due = state.last_fetch.is_none_or(|t| t.elapsed() >= min_refetch);
        if !due {
            return Err(AuthError::Invalid("unknown key id".into()));
        }
        state.last_fetch = Some(Instant::now());
        state.fetches += 1;
        match fetch_jwks(http, url).await {
            Ok(keys) => state.keys = keys,
            Err(e) => {
                tracing::warn!(jwks.url = url, error = %e, "JWKS fetch failed");
                return Err(AuthError::Invalid("signing keys unavailable".into()));
            }
        }
        state
            .keys
            .get(kid)
            .map(|k| (**k).clone())
            .ok_or_else(|| AuthError::Invalid("unknown key id".into()))
    }
}

/// The keys of the JWKS document at `url` by `kid` (keys without a `kid`,
/// or that do not decode, are left out).
async fn fetch_jwks(
    http: &reqwest::Client,
    url: &str,
) -> Result<HashMap<String, Arc<DecodingKey>>, String> {
    let resp = http.get(url).send().await.map_err(|e| e.to_string())?;
    if !resp.status().is_success() {
        return Err(format!("status {}", resp.status()));
    }
    let bytes = resp.bytes().await.map_err(|e| e.to_string())?;
    if bytes.len() > 256 * 1024 {
        return Err("JWKS document too large".into());
    }
    let set: JwkSet = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    let mut keys = HashMap::new();
    for jwk in &set.keys {
        let Some(kid) = jwk.common.key_id.clone() else {
            continue;
        };
        if let Ok(k) = DecodingKey::from_jwk(jwk) {
            keys.insert(kid, Arc::new(k));
        }
    }
    Ok(keys)
}
