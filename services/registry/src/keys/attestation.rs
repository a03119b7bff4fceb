//! Signed attestations: a compact JWS (EdDSA) over a version's identity and
//! trust status, signed with the tenant's Ed25519 key (whose private half is
//! stored sealed, see `keyring`). Anyone with the tenant's JWKS can verify
//! one offline with a stock JWT library.

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use pinfold_core::ids::TenantId;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::KeyError;
use super::keyring::Keyring;
use crate::model::StoredKey;

/// The claims of a version attestation.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AttestationClaims {
    /// Issuer: `pinfold:tenant:<id>`.
    pub iss: String,
    /// Tenant.
    pub tenant: String,
    /// Server name.
    pub server: String,
    /// Version.
    pub version: String,
    /// `sha256:<hex>` of the canonical document.
    pub digest: String,
    /// Trust status at signing time.
    pub status: String,
    /// Who approved it (absent unless approved at some point).
    pub approved_by: Option<String>,
    /// When it was approved (seconds since the epoch).
    pub approved_at: Option<i64>,
    /// Issued at (seconds since the epoch).
    pub iat: i64,
}

/// Signs `claims` with the tenant's sealed key.
pub fn sign_attestation(
    keyring: &Keyring,
    tenant: &TenantId,
    key: &StoredKey,
    claims: &AttestationClaims,
) -> Result<String, KeyError> {
    let pkcs8 = keyring.open(tenant, &key.private_sealed)?;
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(key.kid.clone());
    header.typ = Some("JWT".into());
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_ed_der(&pkcs8))
        .map_err(|e| KeyError::Crypto(e.to_string()))
}

/// The tenant's JWKS document.
pub fn jwks(key: &StoredKey) -> serde_json::Value {
    serde_json::json!({
        "keys": [{
            "kty": "OKP",
            "crv": "Ed25519",
            "alg": "EdDSA",
            "use": "sig",
            "kid": key.kid,
            "x": key.public_key,
        }]
    })
}

#[cfg(test)]
mod tests {
    use pinfold_core::ids::Timestamp;

    use super::*;

    #[test]
    fn attestations_verify_with_the_jwks() {
        let ring = Keyring::new(&[7u8; 32]).unwrap();
        let t = TenantId::parse("acme").unwrap();
        let key = ring
            .generate_tenant_key(&t, Timestamp::from_millis(0))
            .unwrap();
        let claims = AttestationClaims {
            iss: "pinfold:tenant:acme".into(),
            tenant: "acme".into(),
            server: "io.x/y".into(),
            version: "1.0.0".into(),
            digest: format!("sha256:{}", "0".repeat(64)),
            status: "approved".into(),
            approved_by: Some("rita".into()),
            approved_at: Some(1),
            iat: 2,
        };
        let jws = sign_attestation(&ring, &t, &key, &claims).unwrap();
        let set: jsonwebtoken::jwk::JwkSet = serde_json::from_value(jwks(&key)).unwrap();
        let dk = jsonwebtoken::DecodingKey::from_jwk(&set.keys[0]).unwrap();
        let mut v = jsonwebtoken::Validation::new(Algorithm::EdDSA);
        v.required_spec_claims.clear();
        v.validate_exp = false;
        v.validate_aud = false;
        let data = jsonwebtoken::decode::<serde_json::Value>(&jws, &dk, &v).unwrap();
        assert_eq!(data.claims["digest"], claims.digest);
        assert_eq!(data.header.kid.as_deref(), Some(key.kid.as_str()));
    }
}
