//! [`Keyring`]: the current master key and the old ones; seals new values
//! under the current key, opens values under any configured key (and legacy
//! values without a key id), and re-seals a value under the current key.
//!
//! A value is sealed with AES-256-GCM under the key derived from the
//! current master key for its tenant and purpose (see `master`), with a
//! fresh random 96-bit nonce, and the tenant (and context) as associated
//! data too: a sealed value copied to another tenant's or another context's
//! row does not open there. Each derived key seals few values, far from the
//! limits on random nonces under one key.

use aws_lc_rs::aead::{Aad, LessSafeKey, NONCE_LEN, Nonce};
use aws_lc_rs::rand::{SecureRandom as _, SystemRandom};
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair as _};
use base64::Engine as _;
use pinfold_core::ids::{TenantId, Timestamp};
use sha2::{Digest as _, Sha256};

use super::error::KeyError;
use super::master::{MasterKey, Purpose};
use super::sealed::{self, Sealed, b64, unb64};
use crate::model::StoredKey;

/// Length of the AES-GCM tag.
const TAG_LEN: usize = 16;

/// Associated data of a tenant's own secret: the tenant id.
fn tenant_aad(tenant: &TenantId) -> Vec<u8> {
    tenant.as_str().as_bytes().to_vec()
}

/// Associated data of a bound seal: the tenant, a NUL (which a tenant id
/// cannot contain), the context.
fn bound_aad(tenant: &TenantId, context: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(tenant.as_str().len() + 1 + context.len());
    aad.extend_from_slice(tenant.as_str().as_bytes());
    aad.push(0);
    aad.extend_from_slice(context.as_bytes());
    aad
}

fn aad_of(tenant: &TenantId, purpose: Purpose<'_>) -> Vec<u8> {
    match purpose {
        Purpose::Tenant => tenant_aad(tenant),
        Purpose::Bound(context) => bound_aad(tenant, context),
    }
}

/// Standard or URL-safe base64 (padded or not), surrounding space ignored.
fn decode_key(text: &str) -> Result<Vec<u8>, KeyError> {
    let t = text.trim();
    base64::engine::general_purpose::STANDARD
        .decode(t)
        .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(t))
        .or_else(|_| base64::engine::general_purpose::URL_SAFE.decode(t))
        .map_err(|_| KeyError::BadServerKey)
}

/// What [`Keyring::reseal`] did with a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resealed {
    /// The value opens and is already sealed under the current key.
    Current,
    /// The value opened (under an old key, or as a legacy value); this is
    /// the same secret sealed under the current key.
    New(String),
}

/// Seals and opens secrets at rest: one current master key, which seals,
/// and any number of old ones, which only open.
pub struct Keyring {
    current: MasterKey,
    old: Vec<MasterKey>,
    rng: SystemRandom,
}

impl Keyring {
    /// With the current master key from 32 raw bytes (and no old key).
    pub fn new(key: &[u8]) -> Result<Keyring, KeyError> {
        Ok(Keyring {
            current: MasterKey::new(key)?,
            old: Vec::new(),
            rng: SystemRandom::new(),
        })
    }

    /// With the current master key from base64 (standard or URL-safe) of
    /// 32 bytes.
    pub fn from_base64(text: &str) -> Result<Keyring, KeyError> {
        Keyring::new(&decode_key(text)?)
    }

    /// Adds an old master key (32 raw bytes): values sealed under it still
    /// open, nothing new is sealed under it. A key configured twice (or
    /// equal to the current one) is refused.
    pub fn with_old_key(mut self, key: &[u8]) -> Result<Keyring, KeyError> {
        let old = MasterKey::new(key)?;
        if self.kids().any(|k| k == old.kid()) {
            return Err(KeyError::DuplicateKey(old.kid().to_owned()));
        }
        self.old.push(old);
        Ok(self)
    }

    /// [`Keyring::with_old_key`] from base64.
    pub fn with_old_base64(self, text: &str) -> Result<Keyring, KeyError> {
        let key = decode_key(text)?;
        self.with_old_key(&key)
    }

    /// 32 fresh random bytes, base64 (for generating a server key).
    pub fn generate_base64() -> Result<String, KeyError> {
        let mut k = [0u8; 32];
        SystemRandom::new()
            .fill(&mut k)
            .map_err(|_| KeyError::Crypto("rng".into()))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(k))
    }

    /// The id of the current master key, which seals every new value.
    pub fn current_kid(&self) -> &str {
        self.current.kid()
    }

    /// The ids of the old master keys, in configured order.
    pub fn old_kids(&self) -> impl Iterator<Item = &str> {
        self.old.iter().map(MasterKey::kid)
    }

    /// Every configured key id, the current one first.
    fn kids(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.current.kid()).chain(self.old_kids())
    }

    fn master(&self, kid: &str) -> Option<&MasterKey> {
        std::iter::once(&self.current)
            .chain(&self.old)
            .find(|m| m.kid() == kid)
    }

    /// Seals `plain` as `tenant`'s own secret (its attestation private
    /// key): `v2.<kid>.<base64url(nonce ‖ ciphertext ‖ tag)>`.
    pub fn seal(&self, tenant: &TenantId, plain: &[u8]) -> Result<String, KeyError> {
        self.seal_as(tenant, Purpose::Tenant, plain)
    }

    /// Opens what [`Keyring::seal`] produced for the same tenant, under any
    /// configured key, or a legacy value.
    pub fn open(&self, tenant: &TenantId, sealed: &str) -> Result<Vec<u8>, KeyError> {
        self.open_as(tenant, Purpose::Tenant, sealed)
    }

    /// Seals `plain` for `tenant` and a `context` within it (for example a
    /// session id): key derivation and associated data bind both, so the
    /// value opens for neither another tenant nor another context.
    pub fn seal_bound(
        &self,
        tenant: &TenantId,
        context: &str,
        plain: &[u8],
    ) -> Result<String, KeyError> {
        self.seal_as(tenant, Purpose::Bound(context), plain)
    }

    /// Opens what [`Keyring::seal_bound`] produced for the same tenant and
    /// context, under any configured key, or a legacy value.
    pub fn open_bound(
        &self,
        tenant: &TenantId,
        context: &str,
        sealed: &str,
    ) -> Result<Vec<u8>, KeyError> {
        self.open_as(tenant, Purpose::Bound(context), sealed)
    }

    /// Opens `sealed` (for `tenant`, and `context` when it is bound to
    /// one) and, unless it is already sealed under the current key, seals
    /// the same secret under the current key. A value that does not open
    /// is an error, whichever key it names.
    pub fn reseal(
        &self,
        tenant: &TenantId,
        context: Option<&str>,
        sealed: &str,
    ) -> Result<Resealed, KeyError> {
        let purpose = match context {
            None => Purpose::Tenant,
            Some(c) => Purpose::Bound(c),
        };
        let plain = self.open_as(tenant, purpose, sealed)?;
        if sealed::key_id_of(sealed) == Some(self.current.kid()) {
            return Ok(Resealed::Current);
        }
        Ok(Resealed::New(self.seal_as(tenant, purpose, &plain)?))
    }

    fn seal_as(
        &self,
        tenant: &TenantId,
        purpose: Purpose<'_>,
        plain: &[u8],
    ) -> Result<String, KeyError> {
        let key = self.current.derive(tenant, purpose)?;
        let mut nonce = [0u8; NONCE_LEN];
        self.rng
            .fill(&mut nonce)
            .map_err(|_| KeyError::Crypto("rng".into()))?;
        let mut body = plain.to_vec();
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(aad_of(tenant, purpose)),
            &mut body,
        )
        .map_err(|_| KeyError::Crypto("seal".into()))?;
        let mut out = Vec::with_capacity(NONCE_LEN + body.len());
        out.extend_from_slice(&nonce);
        out.extend(body);
        Ok(sealed::render(self.current.kid(), &out))
    }

    fn open_as(
        &self,
        tenant: &TenantId,
        purpose: Purpose<'_>,
        sealed: &str,
    ) -> Result<Vec<u8>, KeyError> {
        let aad = aad_of(tenant, purpose);
        match sealed::parse(sealed)? {
            Sealed::Keyed { kid, body } => {
                let master = self
                    .master(kid)
                    .ok_or_else(|| KeyError::UnknownKey(kid.to_owned()))?;
                open_with(&master.derive(tenant, purpose)?, &aad, &unb64(body)?)
            }
            // Before key ids: sealed directly with whichever master key was
            // configured then; the tag tells which one it was.
            Sealed::Legacy(body) => {
                let raw = unb64(body)?;
                std::iter::once(&self.current)
                    .chain(&self.old)
                    .find_map(|m| open_with(m.legacy(), &aad, &raw).ok())
                    .ok_or(KeyError::Unseal)
            }
        }
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

/// Opens nonce ‖ ciphertext ‖ tag with `key` and `aad`.
fn open_with(key: &LessSafeKey, aad: &[u8], raw: &[u8]) -> Result<Vec<u8>, KeyError> {
    if raw.len() < NONCE_LEN + TAG_LEN {
        return Err(KeyError::Unseal);
    }
    let (nonce, rest) = raw.split_at(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| KeyError::Unseal)?;
    let mut buf = rest.to_vec();
    let plain = key
        .open_in_place(nonce, Aad::from(aad), &mut buf)
        .map_err(|_| KeyError::Unseal)?;
    Ok(plain.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::master::{BOUND_INFO, KID_INFO, SALT, TENANT_INFO};

    fn tenant(id: &str) -> TenantId {
        TenantId::parse(id).unwrap()
    }

    /// HMAC-SHA256 (RFC 2104) on `sha2`, independent of aws-lc-rs.
    fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
        let mut k = [0u8; 64];
        if key.len() > 64 {
            k[..32].copy_from_slice(&Sha256::digest(key));
        } else {
            k[..key.len()].copy_from_slice(key);
        }
        let mut inner = Sha256::new();
        inner.update(k.map(|b| b ^ 0x36));
        for p in parts {
            inner.update(p);
        }
        let mut outer = Sha256::new();
        outer.update(k.map(|b| b ^ 0x5c));
        outer.update(inner.finalize());
        outer.finalize().into()
    }

    /// HKDF-SHA256 (RFC 5869 §2.2, §2.3) on [`hmac`].
    fn hkdf(salt: &[u8], ikm: &[u8], info: &[u8], len: usize) -> Vec<u8> {
        let prk = hmac(salt, &[ikm]);
        let (mut okm, mut t) = (Vec::new(), Vec::new());
        for i in 1u8.. {
            if okm.len() >= len {
                break;
            }
            t = hmac(&prk, &[&t, info, &[i]]).to_vec();
            okm.extend_from_slice(&t);
        }
        okm.truncate(len);
        okm
    }

    #[test]
    fn the_reference_hkdf_matches_rfc5869_test_case_1() {
        // RFC 5869, Appendix A.1.
        let okm = hkdf(
            &hex::decode("000102030405060708090a0b0c").unwrap(),
            &[0x0b; 22],
            &hex::decode("f0f1f2f3f4f5f6f7f8f9").unwrap(),
            42,
        );
        assert_eq!(
            hex::encode(okm),
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
        );
    }

    #[test]
    fn keys_are_derived_per_tenant_and_context_with_hkdf_sha256() {
        let master = [5u8; 32];
        let m = MasterKey::new(&master).unwrap();
        let (a, b) = (tenant("acme"), tenant("other"));
        let derived = [
            m.derive_bytes(&a, Purpose::Bound("s1")).unwrap(),
            m.derive_bytes(&a, Purpose::Bound("s2")).unwrap(),
            m.derive_bytes(&b, Purpose::Bound("s1")).unwrap(),
            m.derive_bytes(&a, Purpose::Tenant).unwrap(),
            m.derive_bytes(&b, Purpose::Tenant).unwrap(),
            // The NUL between tenant and context keeps these apart.
            m.derive_bytes(&tenant("acme-1"), Purpose::Bound("x"))
                .unwrap(),
            m.derive_bytes(&a, Purpose::Bound("-1\0x")).unwrap(),
        ];
        for (i, x) in derived.iter().enumerate() {
            assert_ne!(x, &master, "{i}: the master key itself");
            for (j, y) in derived.iter().enumerate().skip(i + 1) {
                assert_ne!(x, y, "keys {i} and {j} coincide");
            }
        }
        // Exactly RFC 5869 with the documented salt and info.
        assert_eq!(
            derived[0].to_vec(),
            hkdf(SALT, &master, &[BOUND_INFO, b"\0acme\0s1"].concat(), 32)
        );
        assert_eq!(
            derived[3].to_vec(),
            hkdf(SALT, &master, &[TENANT_INFO, b"\0acme"].concat(), 32)
        );
        assert_eq!(
            m.kid(),
            hex::encode(hkdf(SALT, &master, KID_INFO, 6)),
            "the key id is derived too"
        );
        // Another master key derives other keys for the same use.
        let other = MasterKey::new(&[6u8; 32]).unwrap();
        assert_ne!(
            other.derive_bytes(&a, Purpose::Bound("s1")).unwrap(),
            derived[0]
        );
        assert_ne!(other.kid(), m.kid());
    }

    #[test]
    fn a_value_opens_only_for_its_tenant_and_context() {
        let ring = Keyring::new(&[9u8; 32]).unwrap();
        let (a, b) = (tenant("acme"), tenant("other"));
        let sealed = ring.seal_bound(&a, "s1", b"Authorization: x").unwrap();
        assert_eq!(
            ring.open_bound(&a, "s1", &sealed).unwrap(),
            b"Authorization: x"
        );
        assert!(matches!(
            ring.open_bound(&a, "s2", &sealed),
            Err(KeyError::Unseal)
        ));
        assert!(matches!(
            ring.open_bound(&b, "s1", &sealed),
            Err(KeyError::Unseal)
        ));
        // A tenant's own secret and a bound one never open for each other.
        assert!(ring.open(&a, &sealed).is_err());
        let own = ring.seal(&a, b"k").unwrap();
        assert_eq!(ring.open(&a, &own).unwrap(), b"k");
        assert!(ring.open(&b, &own).is_err());
        assert!(ring.open_bound(&a, "", &own).is_err());
        // A fresh nonce every time.
        assert_ne!(
            ring.seal_bound(&a, "s1", b"x").unwrap(),
            ring.seal_bound(&a, "s1", b"x").unwrap()
        );
    }

    #[test]
    fn every_value_carries_the_current_key_id() {
        let ring = Keyring::new(&[1u8; 32]).unwrap();
        let kid = ring.current_kid().to_owned();
        assert_eq!(kid.len(), 12);
        assert!(
            kid.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_eq!(Keyring::new(&[1u8; 32]).unwrap().current_kid(), kid);
        let a = tenant("acme");
        for v in [
            ring.seal(&a, b"k").unwrap(),
            ring.seal_bound(&a, "c", b"").unwrap(),
        ] {
            assert!(v.starts_with(&format!("v2.{kid}.")), "{v}");
            assert_eq!(crate::keys::key_id_of(&v), Some(kid.as_str()));
            // nonce + tag around the plain text, in base64url.
            assert!(!v[16..].contains(['.', '=', '+', '/']), "{v}");
        }
    }

    #[test]
    fn old_keys_open_only_the_current_key_seals_and_reseal_moves_values_over() {
        let (k1, k2) = ([1u8; 32], [2u8; 32]);
        let a = tenant("acme");
        let one = Keyring::new(&k1).unwrap();
        let v1 = one.seal_bound(&a, "s1", b"secret").unwrap();
        let own1 = one.seal(&a, b"own").unwrap();
        // Rotated: key 2 current, key 1 old.
        let rotated = Keyring::new(&k2).unwrap().with_old_key(&k1).unwrap();
        assert_eq!(rotated.old_kids().collect::<Vec<_>>(), [one.current_kid()]);
        assert_eq!(rotated.open_bound(&a, "s1", &v1).unwrap(), b"secret");
        let v2 = rotated.seal_bound(&a, "s1", b"new").unwrap();
        assert_eq!(crate::keys::key_id_of(&v2), Some(rotated.current_kid()));
        let Resealed::New(moved) = rotated.reseal(&a, Some("s1"), &v1).unwrap() else {
            panic!("a value under key 1 is re-sealed");
        };
        assert_eq!(
            rotated.reseal(&a, Some("s1"), &moved).unwrap(),
            Resealed::Current
        );
        let Resealed::New(own2) = rotated.reseal(&a, None, &own1).unwrap() else {
            panic!("a tenant's own secret under key 1 is re-sealed");
        };
        // A value re-sealed for the wrong context does not open.
        assert!(rotated.reseal(&a, Some("s2"), &v1).is_err());
        // Key 1 removed: what was re-sealed opens, what was not does not.
        let two = Keyring::new(&k2).unwrap();
        assert_eq!(two.open_bound(&a, "s1", &moved).unwrap(), b"secret");
        assert_eq!(two.open(&a, &own2).unwrap(), b"own");
        match two.open_bound(&a, "s1", &v1) {
            Err(KeyError::UnknownKey(kid)) => assert_eq!(kid, one.current_kid()),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            two.reseal(&a, Some("s1"), &v1),
            Err(KeyError::UnknownKey(_))
        ));
        // A value naming a configured key it was not sealed under does not
        // open either.
        let forged = moved.replacen(two.current_kid(), one.current_kid(), 1);
        assert!(rotated.open_bound(&a, "s1", &forged).is_err());
    }

    /// Sealed before key ids existed, by the code of that time, with
    /// `[42; 32]` as the encryption key: `seal_bound(acme, "s1",
    /// "Authorization: legacy")` and `seal(acme, "legacy tenant secret")`.
    const LEGACY_BOUND: &str = "RTkMXMafuAqI72X8S-yOc89xP4ymhiL-MV4CCRPpNgwsH2hREx9gH1eiiESb5zg-PQ";
    const LEGACY_OWN: &str = "AkQRb7dIU2jOw3OhLzxN7j6YpT25mbc3uNJKwFSGY94B8F9QvDWxdzN0_leUe2KX";

    #[test]
    fn legacy_values_without_a_key_id_still_open_and_are_resealed() {
        let a = tenant("acme");
        assert_eq!(crate::keys::key_id_of(LEGACY_BOUND), None);
        let same = Keyring::new(&[42u8; 32]).unwrap();
        assert_eq!(
            same.open_bound(&a, "s1", LEGACY_BOUND).unwrap(),
            b"Authorization: legacy"
        );
        assert_eq!(same.open(&a, LEGACY_OWN).unwrap(), b"legacy tenant secret");
        // Still bound to tenant and context.
        assert!(same.open_bound(&a, "s2", LEGACY_BOUND).is_err());
        assert!(
            same.open_bound(&tenant("other"), "s1", LEGACY_BOUND)
                .is_err()
        );
        assert!(same.open(&a, LEGACY_BOUND).is_err());
        // Under the current key, which seals v2 values: re-sealed too.
        assert!(matches!(
            same.reseal(&a, Some("s1"), LEGACY_BOUND).unwrap(),
            Resealed::New(v) if v.starts_with("v2.")
        ));
        // The legacy key kept as an old key.
        let rotated = Keyring::new(&[2u8; 32])
            .unwrap()
            .with_old_key(&[42u8; 32])
            .unwrap();
        assert_eq!(
            rotated.open_bound(&a, "s1", LEGACY_BOUND).unwrap(),
            b"Authorization: legacy"
        );
        let Resealed::New(v) = rotated.reseal(&a, None, LEGACY_OWN).unwrap() else {
            panic!("a legacy value is always re-sealed");
        };
        let without = Keyring::new(&[2u8; 32]).unwrap();
        assert_eq!(without.open(&a, &v).unwrap(), b"legacy tenant secret");
        assert!(matches!(
            without.open(&a, LEGACY_OWN),
            Err(KeyError::Unseal)
        ));
    }

    #[test]
    fn bad_and_duplicate_keys_are_refused_without_showing_them() {
        let text = Keyring::generate_base64().unwrap();
        let ring = Keyring::from_base64(&text).unwrap();
        let e = Keyring::from_base64(&text)
            .unwrap()
            .with_old_base64(&format!(" {text}\n"))
            .err()
            .unwrap();
        assert!(matches!(&e, KeyError::DuplicateKey(k) if k == ring.current_kid()));
        assert!(!e.to_string().contains(text.trim_end_matches('=')));
        let short = base64::engine::general_purpose::STANDARD.encode([1u8; 16]);
        for bad in [short.as_str(), "not base64!", ""] {
            assert!(matches!(
                Keyring::from_base64(bad),
                Err(KeyError::BadServerKey)
            ));
            assert!(matches!(
                Keyring::new(&[1u8; 32]).unwrap().with_old_base64(bad),
                Err(KeyError::BadServerKey)
            ));
        }
        // URL-safe base64 works too.
        let url = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([3u8; 32]);
        assert_eq!(
            Keyring::from_base64(&url).unwrap().current_kid(),
            Keyring::new(&[3u8; 32]).unwrap().current_kid()
        );
    }

    #[test]
    fn tampered_or_malformed_values_do_not_open() {
        let ring = Keyring::new(&[4u8; 32]).unwrap();
        let a = tenant("acme");
        let v = ring.seal_bound(&a, "c", b"secret").unwrap();
        let last = v.len() - 1;
        let flipped = format!("{}{}", &v[..last], if v.ends_with('A') { 'B' } else { 'A' });
        for bad in [
            flipped.as_str(),
            &v[..20],
            "v2.",
            "v9.0123456789ab.AAAA",
            "",
            "!!",
        ] {
            assert!(ring.open_bound(&a, "c", bad).is_err(), "{bad}");
        }
    }
}
