//! One master key (a configured `encryption_key`): its id, and the AES-256
//! keys derived from it per tenant and purpose with HKDF-SHA256 (RFC 5869).
//!
//! ```text
//! PRK  = HKDF-Extract(salt = SALT, IKM = master key)               (RFC 5869 §2.2)
//! kid  = hex(HKDF-Expand(PRK, "pinfold/key-id", 6))                 (12 hex digits)
//! key  = HKDF-Expand(PRK, "pinfold/seal/tenant" ‖ 0 ‖ tenant, 32)   (a tenant's own secrets)
//! key  = HKDF-Expand(PRK, "pinfold/seal/bound" ‖ 0 ‖ tenant ‖ 0 ‖ context, 32)
//! ```
//!
//! `SALT` is fixed and not secret (RFC 5869 §3.1 allows that; the master
//! key is already uniformly random). Tenant ids cannot contain NUL, so the
//! `info` strings of two different (tenant, context) pairs never coincide
//! (RFC 5869 §3.2: `info` binds the derived key to its use). The key id is
//! derived too, so it reveals nothing of the key, and the same key gives the
//! same id on every replica.

use aws_lc_rs::aead::{AES_256_GCM, LessSafeKey, UnboundKey};
use aws_lc_rs::error::Unspecified;
use aws_lc_rs::hkdf::{HKDF_SHA256, KeyType, Okm, Prk, Salt};
use pinfold_core::ids::TenantId;

use super::error::KeyError;
use super::sealed::KID_LEN;

/// The HKDF salt of every derivation (RFC 5869 §2.2, §3.1).
pub(crate) const SALT: &[u8] = b"pinfold sealing keys, format v2, HKDF-SHA256 salt";
/// `info` of the key id.
pub(crate) const KID_INFO: &[u8] = b"pinfold/key-id";
/// `info` prefix of a tenant's own secrets (no context).
pub(crate) const TENANT_INFO: &[u8] = b"pinfold/seal/tenant";
/// `info` prefix of a secret bound to a tenant and a context.
pub(crate) const BOUND_INFO: &[u8] = b"pinfold/seal/bound";

/// What a derived key is for: a tenant's own secret, or one bound to a
/// context within the tenant (a session, a provider, a grant).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Purpose<'a> {
    /// The tenant alone (its attestation private key).
    Tenant,
    /// The tenant and this context.
    Bound(&'a str),
}

/// An HKDF output length (the key id's).
struct Len(usize);

impl KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

/// A configured master key.
pub(crate) struct MasterKey {
    kid: String,
    prk: Prk,
    /// The key itself, for values sealed before key ids (legacy).
    legacy: LessSafeKey,
}

impl MasterKey {
    /// From 32 raw bytes.
    pub(crate) fn new(key: &[u8]) -> Result<MasterKey, KeyError> {
        if key.len() != 32 {
            return Err(KeyError::BadServerKey);
        }
        let legacy = LessSafeKey::new(
            UnboundKey::new(&AES_256_GCM, key).map_err(|_| KeyError::BadServerKey)?,
        );
        let prk = Salt::new(HKDF_SHA256, SALT).extract(key);
        let mut id = [0u8; KID_LEN / 2];
        prk.expand(&[KID_INFO], Len(id.len()))
            .and_then(|okm| okm.fill(&mut id))
            .map_err(|_| KeyError::Crypto("hkdf".into()))?;
        Ok(MasterKey {
            kid: hex::encode(id),
            prk,
            legacy,
        })
    }

    /// The key id (12 lowercase hex digits).
    pub(crate) fn kid(&self) -> &str {
        &self.kid
    }

    /// The key sealing `tenant`'s values of `purpose` under this master key.
    pub(crate) fn derive(
        &self,
        tenant: &TenantId,
        purpose: Purpose<'_>,
    ) -> Result<LessSafeKey, KeyError> {
        self.expand(tenant, purpose, &AES_256_GCM, |okm| {
            Ok(LessSafeKey::new(UnboundKey::from(okm)))
        })
    }

    /// The derived key's bytes (what [`MasterKey::derive`] keys AES with),
    /// for checking the derivation against RFC 5869 in tests.
    #[cfg(test)]
    pub(crate) fn derive_bytes(
        &self,
        tenant: &TenantId,
        purpose: Purpose<'_>,
    ) -> Result<[u8; 32], KeyError> {
        self.expand(tenant, purpose, Len(32), |okm| {
            let mut out = [0u8; 32];
            okm.fill(&mut out)?;
            Ok(out)
        })
    }

    /// HKDF-Expand (RFC 5869 §2.3) of this key's PRK with the `info` of
    /// `tenant` and `purpose`, handed to `f`.
    fn expand<L: KeyType, R>(
        &self,
        tenant: &TenantId,
        purpose: Purpose<'_>,
        len: L,
        f: impl FnOnce(Okm<'_, L>) -> Result<R, Unspecified>,
    ) -> Result<R, KeyError> {
        let t = tenant.as_str().as_bytes();
        match purpose {
            Purpose::Tenant => self.prk.expand(&[TENANT_INFO, &[0], t], len).and_then(f),
            Purpose::Bound(context) => self
                .prk
                .expand(&[BOUND_INFO, &[0], t, &[0], context.as_bytes()], len)
                .and_then(f),
        }
        .map_err(|_| KeyError::Crypto("hkdf".into()))
    }

    /// The master key as values before key ids were sealed with.
    pub(crate) fn legacy(&self) -> &LessSafeKey {
        &self.legacy
    }
}
