//! Attestation keys and signed attestations.
//!
//! Each tenant has an Ed25519 key. Its private half is stored sealed with
//! the server's 32-byte encryption key (AES-256-GCM, a random 96-bit nonce,
//! the tenant id as associated data, so a sealed key copied to another
//! tenant's row does not open). An attestation is a compact JWS (EdDSA) over
//! a version's identity and trust status; anyone with the tenant's JWKS can
//! verify it offline with a stock JWT library.

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::rand::{SecureRandom as _, SystemRandom};
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair as _};
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use pinfold_core::ids::{TenantId, Timestamp};
use serde::Serialize;
use sha2::{Digest as _, Sha256};
use utoipa::ToSchema;

use crate::model::StoredKey;

/// Associated data of a bound seal: the tenant, a NUL (which a tenant id
/// cannot contain), the context.
fn bound_aad(tenant: &TenantId, context: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(tenant.as_str().len() + 1 + context.len());
    aad.extend_from_slice(tenant.as_str().as_bytes());
    aad.push(0);
    aad.extend_from_slice(context.as_bytes());
    aad
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Key failures.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The server key has the wrong length or encoding.
    #[error("the encryption key must be 32 bytes, base64-encoded")]
    BadServerKey,
    /// A sealed key did not open (wrong server key or tampered row).
    #[error("a sealed attestation key could not be opened (was the encryption key changed?)")]
    Unseal,
    /// Crypto failure.
    #[error("cryptographic failure: {0}")]
    Crypto(String),
}

/// Seals and opens tenant keys with the server's encryption key.
pub struct Keyring {
    key: LessSafeKey,
    rng: SystemRandom,
}

impl Keyring {
    /// From 32 raw bytes.
    pub fn new(key: &[u8]) -> Result<Keyring, KeyError> {
        let unbound = UnboundKey::new(&AES_256_GCM, key).map_err(|_| KeyError::BadServerKey)?;
        Ok(Keyring {
            key: LessSafeKey::new(unbound),
            rng: SystemRandom::new(),
        })
    }

    /// From standard or URL-safe base64.
    pub fn from_base64(text: &str) -> Result<Keyring, KeyError> {
        let t = text.trim();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(t)
            .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(t))
            .map_err(|_| KeyError::BadServerKey)?;
        if bytes.len() != 32 {
            return Err(KeyError::BadServerKey);
        }
        Keyring::new(&bytes)
    }

    /// 32 fresh random bytes, base64 (for generating a server key).
    pub fn generate_base64() -> Result<String, KeyError> {
        let mut k = [0u8; 32];
        SystemRandom::new()
            .fill(&mut k)
            .map_err(|_| KeyError::Crypto("rng".into()))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(k))
    }

    /// Seals `plain` for `tenant`: base64url(nonce ‖ ciphertext ‖ tag).
    pub fn seal(&self, tenant: &TenantId, plain: &[u8]) -> Result<String, KeyError> {
        self.seal_aad(tenant.as_str().as_bytes(), plain)
    }

    fn seal_aad(&self, aad: &[u8], plain: &[u8]) -> Result<String, KeyError> {
        let mut nonce = [0u8; NONCE_LEN];
        self.rng
            .fill(&mut nonce)
            .map_err(|_| KeyError::Crypto("rng".into()))?;
        let mut buf = plain.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                &mut buf,
            )
            .map_err(|_| KeyError::Crypto("seal".into()))?;
        let mut out = nonce.to_vec();
        out.extend(buf);
        Ok(b64(&out))
    }

    /// Opens what [`Keyring::seal`] produced for the same tenant.
    pub fn open(&self, tenant: &TenantId, sealed: &str) -> Result<Vec<u8>, KeyError> {
        self.open_aad(tenant.as_str().as_bytes(), sealed)
    }

    fn open_aad(&self, aad: &[u8], sealed: &str) -> Result<Vec<u8>, KeyError> {
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(sealed)
            .map_err(|_| KeyError::Unseal)?;
        if raw.len() < NONCE_LEN + 16 {
            return Err(KeyError::Unseal);
        }
        let (nonce, rest) = raw.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| KeyError::Unseal)?;
        let mut buf = rest.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(aad), &mut buf)
            .map_err(|_| KeyError::Unseal)?;
        Ok(plain.to_vec())
    }

    /// Seals `plain` for `tenant` and a `context` within it (for example a
    /// session id): the associated data binds both, so the value opens for
    /// neither another tenant nor another context.
    pub fn seal_bound(
        &self,
        tenant: &TenantId,
        context: &str,
        plain: &[u8],
    ) -> Result<String, KeyError> {
        self.seal_aad(&bound_aad(tenant, context), plain)
    }

    /// Opens what [`Keyring::seal_bound`] produced for the same tenant and
    /// context.
    pub fn open_bound(
        &self,
        tenant: &TenantId,
        context: &str,
        sealed: &str,
    ) -> Result<Vec<u8>, KeyError> {
        self.open_aad(&bound_aad(tenant, context), sealed)
    }

    /// Generates a new Ed25519 key for `tenant`, sealed for storage.
    pub fn generate_tenant_key(
        &self,
        tenant: &TenantId,
        at: Timestamp,
    ) -> Result<StoredKey, KeyError> {
        let doc = Ed25519KeyPair::generate_pkcs8(&self.rng)
            .map_err(|_| KeyError::Crypto("keygen".into()))?;
        let pair = Ed25519KeyPair::from_pkcs8(doc.as_ref())
            .map_err(|_| KeyError::Crypto("keygen".into()))?;
        let public = pair.public_key().as_ref().to_vec();
        let kid = hex::encode(&Sha256::digest(&public)[..8]);
        Ok(StoredKey {
            kid,
            public_key: b64(&public),
            private_sealed: self.seal(tenant, doc.as_ref())?,
            created_at: at,
        })
    }
}

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
    use super::*;

    #[test]
    fn seal_binds_the_tenant_and_the_server_key() {
        let ring = Keyring::from_base64(&Keyring::generate_base64().unwrap()).unwrap();
        let a = TenantId::parse("acme").unwrap();
        let b = TenantId::parse("other").unwrap();
        let sealed = ring.seal(&a, b"secret key bytes").unwrap();
        assert_eq!(ring.open(&a, &sealed).unwrap(), b"secret key bytes");
        assert!(matches!(ring.open(&b, &sealed), Err(KeyError::Unseal)));
        let other = Keyring::from_base64(&Keyring::generate_base64().unwrap()).unwrap();
        assert!(matches!(other.open(&a, &sealed), Err(KeyError::Unseal)));
        assert_ne!(
            ring.seal(&a, b"x").unwrap(),
            ring.seal(&a, b"x").unwrap(),
            "fresh nonce"
        );
        assert!(Keyring::from_base64("c2hvcnQ=").is_err());
    }

    #[test]
    fn a_bound_seal_opens_only_for_its_tenant_and_context() {
        let ring = Keyring::new(&[9u8; 32]).unwrap();
        let a = TenantId::parse("acme").unwrap();
        let sealed = ring.seal_bound(&a, "s1", b"Authorization: x").unwrap();
        assert_eq!(
            ring.open_bound(&a, "s1", &sealed).unwrap(),
            b"Authorization: x"
        );
        assert!(
            ring.open_bound(&a, "s2", &sealed).is_err(),
            "another session"
        );
        let b = TenantId::parse("other").unwrap();
        assert!(
            ring.open_bound(&b, "s1", &sealed).is_err(),
            "another tenant"
        );
        // A plain tenant seal and a bound one never open for each other.
        assert!(ring.open(&a, &sealed).is_err());
        let plain = ring.seal(&a, b"k").unwrap();
        assert!(ring.open_bound(&a, "", &plain).is_err());
    }

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
