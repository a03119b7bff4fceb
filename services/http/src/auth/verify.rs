//! Verifying one token, without the cache: the compact JWT is pre-parsed
//! (`crate::bearer`), its `iss` picks the issuer, whose allow-list must
//! hold the header's `alg`; the signature and the `exp`, `nbf`, `iss`,
//! `aud` and `sub` claims are checked with the issuer's key, and its claim
//! mapping names the tenant and roles.

use std::collections::HashMap;

use jsonwebtoken::{DecodingKey, Validation};

use super::error::AuthError;
use super::issuer::{Issuer, IssuerConfig, JwksFetch, KeySource};
use super::principal::Principal;
use crate::bearer;

/// The claims, read after validation as raw values: the crate
/// deserialises them *before* it validates, so a typed field would turn
/// "missing `exp`" into an opaque parse error; and a claim mapping may look
/// at any claim.
type Claims = serde_json::Map<String, serde_json::Value>;

/// The configured issuers (by `iss`), the leeway, and the HTTP client that
/// fetches their JWKS documents.
pub(super) struct Verifier {
    issuers: HashMap<String, Issuer>,
    leeway: u64,
    http: JwksFetch,
}

impl Verifier {
    /// A verifier of `issuers`' tokens; `leeway` already clamped.
    pub(super) fn new(issuers: Vec<IssuerConfig>, leeway: u64, http: JwksFetch) -> Self {
        Self {
            issuers: issuers
                .into_iter()
                .map(|c| (c.issuer.clone(), Issuer::new(c)))
                .collect(),
            leeway,
            http,
        }
    }

    /// How many JWKS fetches an issuer has made.
    pub(super) async fn jwks_fetches(&self, issuer: &str) -> u64 {
        match self.issuers.get(issuer) {
            Some(i) => i.fetches().await,
            None => 0,
        }
    }

    /// Verifies a compact JWT: the principal it names, or why it is refused.
    pub(super) async fn verify(&self, token: &str) -> Result<Principal, AuthError> {
        let invalid = |s: &str| AuthError::Invalid(s.to_owned());
        let [_, payload, _] = bearer::jwt_segments(token).map_err(invalid)?;
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| invalid("malformed token header or unsupported algorithm"))?;
        let payload = bearer::payload_claims(payload).map_err(invalid)?;
        let iss = bearer::issuer(&payload).map_err(invalid)?;
        let issuer = self
            .issuers
            .get(iss)
            .ok_or_else(|| invalid("untrusted issuer"))?;
        let cfg = issuer.config();
        if !cfg.algorithms.contains(&header.alg) {
            return Err(invalid("algorithm not allowed for this issuer"));
        }
        let jwks_key;
        let key: &DecodingKey = match &cfg.keys {
            KeySource::Static(k) => k,
            KeySource::Jwks { url, min_refetch } => {
                let kid = header
                    .kid
                    .as_deref()
                    .ok_or_else(|| invalid("token header has no kid"))?;
                jwks_key = issuer.jwks_key(&self.http, url, *min_refetch, kid).await?;
                &jwks_key
            }
        };
        let mut validation = Validation::new(header.alg);
        validation.algorithms = vec![header.alg];
        validation.set_issuer(&[&cfg.issuer]);
        validation.set_audience(&[&cfg.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = true;
        validation.leeway = self.leeway;
        let data = jsonwebtoken::decode::<Claims>(token, key, &validation).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind as K;
            AuthError::Invalid(match e.kind() {
                K::InvalidSignature => "bad signature".into(),
                K::ExpiredSignature => "token expired".into(),
                K::ImmatureSignature => "token not valid yet (nbf)".into(),
                K::InvalidIssuer => "wrong issuer".into(),
                K::InvalidAudience => "wrong audience".into(),
                K::MissingRequiredClaim(c) => format!("missing required claim {c}"),
                K::InvalidClaimFormat(c) => format!("claim {c} has the wrong type"),
                K::InvalidAlgorithm => "algorithm does not match the key".into(),
                _ => "token rejected".into(),
            })
        })?;
        let claims = data.claims;
        let sub = claims
            .get("sub")
            .and_then(serde_json::Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| invalid("claim sub must be a non-empty string"))?;
        let exp = claims
            .get("exp")
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| invalid("claim exp has the wrong type"))?;
        let (tenant, roles) = cfg.mapping.apply(&claims)?;
        Ok(Principal::new(sub, &cfg.issuer, tenant, &roles, exp))
    }
}
