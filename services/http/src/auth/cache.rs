//! The cache of verified tokens.
//!
//! Verified tokens are cached so a repeat costs a keyed hash of the token
//! bytes (foldhash with a per-process random seed: a token of ~600 bytes
//! hashes in about a tenth of SipHash's time), a map lookup and a comparison
//! with the cached token itself (so a hash collision can only miss, never
//! admit another token, and only a verified token is ever cached); the
//! cached entry still honours `exp`. The cache is bounded by bytes, since it
//! holds the tokens.

use std::hash::BuildHasher as _;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::error::AuthError;
use super::principal::Principal;
use crate::hot::{HotCache, KeyHasher};

/// A verified token and whom it names.
struct Verified {
    token: Box<[u8]>,
    principal: Arc<Principal>,
}

/// Bytes the token cache may hold (tokens and their principals).
const TOKEN_CACHE_BYTES: u64 = 64 * 1024 * 1024;
/// What an entry weighs besides its token.
const ENTRY_WEIGHT: u64 = 256;

/// Verified tokens by a keyed hash of their bytes, each entry holding the
/// token it was verified as.
pub(super) struct TokenCache {
    /// Keyed hash of the token bytes → the verified token.
    cache: HotCache<Arc<Verified>>,
    hasher: KeyHasher,
    /// The leeway `exp` is checked with.
    leeway: u64,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl TokenCache {
    /// An empty cache whose entries expire `leeway` seconds after their
    /// token's `exp`.
    pub(super) fn new(leeway: u64) -> Self {
        Self {
            cache: HotCache::new(TOKEN_CACHE_BYTES, Duration::from_secs(300)),
            hasher: KeyHasher::default(),
            leeway,
        }
    }

    /// The principal of `token` when it was verified before and has not
    /// expired; `None` otherwise. Read only: an expired entry is left for
    /// [`TokenCache::cached`] to drop and answer.
    pub(super) fn unexpired_principal(&self, token: &[u8]) -> Option<Arc<Principal>> {
        let (_, hit) = self.lookup(token)?;
        self.unexpired(&hit).then(|| hit.principal.clone())
    }

    /// The cache entry of `token` (and its key): only an entry of this very
    /// token, never one that merely shares its keyed hash.
    fn lookup(&self, token: &[u8]) -> Option<(u64, Arc<Verified>)> {
        let key = self.hasher.hash_one(token);
        let hit = self.cache.get(key)?;
        (*hit.token == *token).then_some((key, hit))
    }

    /// Whether a cached token is still within its `exp` (with the leeway).
    fn unexpired(&self, hit: &Verified) -> bool {
        now_secs() <= hit.principal.expires_at + self.leeway
    }

    /// The cached answer for `token`, if it was verified before.
    pub(super) fn cached(&self, token: &[u8]) -> Option<Result<Arc<Principal>, AuthError>> {
        // Another token with the same keyed hash is a miss: verify this one.
        let (key, hit) = self.lookup(token)?;
        if self.unexpired(&hit) {
            return Some(Ok(hit.principal.clone()));
        }
        self.cache.invalidate(key);
        Some(Err(AuthError::Invalid("token expired".into())))
    }

    /// Caches `principal` as what the verified `token` names.
    pub(super) fn insert(&self, token: &str, principal: Arc<Principal>) {
        self.cache.insert(
            self.hasher.hash_one(token.as_bytes()),
            Arc::new(Verified {
                token: token.as_bytes().into(),
                principal,
            }),
            token.len() as u64 + ENTRY_WEIGHT,
        );
    }
}
