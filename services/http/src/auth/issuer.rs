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
use pinfold_egress::{Egress, Rules};
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

/// The largest JWKS document read.
const MAX_JWKS_BYTES: usize = 256 * 1024;

/// How an issuer's JWKS documents are fetched: through the server's egress
/// path, under the rules of the server's own requests (public addresses,
/// the operator's `[egress] allow`, loopback only when the operator allows
/// it).
#[derive(Clone)]
pub struct JwksFetch {
    /// The server's egress path.
    pub egress: Arc<Egress>,
    /// The rules of the server's own requests.
    pub rules: Rules,
}

impl JwksFetch {
    /// Fetches over a private egress path that allows public addresses
    /// only (tools that never fetch a JWKS, benches).
    pub fn public_only() -> Self {
        let egress = Egress::new(pinfold_egress::EgressConfig::default());
        let rules = egress.rules(pinfold_egress::AllowList::default());
        JwksFetch { egress, rules }
    }
}

/// The keys fetched from an issuer's JWKS URL by `kid`, when they were
/// last fetched, and how many fetches there were.
#[derive(Default)]
struct JwksState {
    keys: HashMap<String, Arc<DecodingKey>>,
    last_fetch: Option<Instant>,
    fetches: u64,
}

/// A configured issuer and, for a JWKS source, the keys fetched so far.
/// A known key is read under a short lock that no network wait holds;
/// fetches are one at a time (`fetching`), and a caller that waited for
/// one looks at its result before fetching again.
pub(super) struct Issuer {
    config: IssuerConfig,
    jwks: std::sync::Mutex<JwksState>,
    fetching: Mutex<()>,
}

impl Issuer {
    /// An issuer of `config` whose JWKS has not been fetched yet.
    pub(super) fn new(config: IssuerConfig) -> Self {
        Issuer {
            config,
            jwks: std::sync::Mutex::new(JwksState::default()),
            fetching: Mutex::new(()),
        }
    }

    /// The issuer's configuration.
    pub(super) fn config(&self) -> &IssuerConfig {
        &self.config
    }

    fn state(&self) -> std::sync::MutexGuard<'_, JwksState> {
        self.jwks.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn known(&self, kid: &str) -> Option<DecodingKey> {
        self.state().keys.get(kid).map(|k| (**k).clone())
    }

    /// How many JWKS fetches the issuer has made.
    pub(super) async fn fetches(&self) -> u64 {
        self.state().fetches
    }

    /// The key `kid` from the issuer's JWKS at `url`, fetched (through
    /// `http`) when `kid` is unknown and the last fetch is at least
    /// `min_refetch` ago.
    pub(super) async fn jwks_key(
        &self,
        http: &JwksFetch,
        url: &str,
        min_refetch: Duration,
        kid: &str,
    ) -> Result<DecodingKey, AuthError> {
        if let Some(k) = self.known(kid) {
            return Ok(k);
        }
        let _one_fetch = self.fetching.lock().await;
        // A fetch that ended while this caller waited may have brought it.
        if let Some(k) = self.known(kid) {
            return Ok(k);
        }
        {
            let mut state = self.state();
            let due = state.last_fetch.is_none_or(|t| t.elapsed() >= min_refetch);
            if !due {
                return Err(AuthError::Invalid("unknown key id".into()));
            }
            state.last_fetch = Some(Instant::now());
            state.fetches += 1;
        }
        match fetch_jwks(http, url).await {
            Ok(keys) => self.state().keys = keys,
            Err(e) => {
                tracing::warn!(
                    jwks.url = %pinfold_egress::redact::redact_url(url),
                    error = %e,
                    "JWKS fetch failed"
                );
                return Err(AuthError::Invalid("signing keys unavailable".into()));
            }
        }
        self.known(kid)
            .ok_or_else(|| AuthError::Invalid("unknown key id".into()))
    }
}

/// The keys of the JWKS document at `url` by `kid` (keys without a `kid`,
/// or that do not decode, are left out). The body is read up to 256 KiB
/// and no further.
async fn fetch_jwks(
    http: &JwksFetch,
    url: &str,
) -> Result<HashMap<String, Arc<DecodingKey>>, String> {
    let parsed = url::Url::parse(url).map_err(|_| "not a URL".to_owned())?;
    let req = http
        .egress
        .request(&http.rules, reqwest::Method::GET, parsed, true)
        .map_err(|e| e.to_string())?;
    let mut resp = http.egress.send(req).await.map_err(|e| e.to_string())?;
    if !resp.status().is_success() {
        return Err(format!("status {}", resp.status()));
    }
    let bytes = pinfold_egress::read_body(&mut resp, MAX_JWKS_BYTES)
        .await
        .map_err(|e| e.to_string())?;
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
