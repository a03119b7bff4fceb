//! A small concurrent cache for lookups made on every request (verified
//! tokens, the registry's ETag index, loaded resolve sessions).
//!
//! A general-purpose cache (moka) records every read for its eviction
//! policy; on these paths that bookkeeping costs more than the rest of the
//! lookup. [`HotCache`] does less: keys are already well-mixed 64-bit keyed
//! hashes (the caller keeps the full identity in the value and checks it on
//! a hit), entries live in shards under a read-write lock, each with an
//! expiry, and a full shard first drops what expired, then everything it
//! holds (a coarse bound: these caches only save work, they are never the
//! source of truth).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::RwLock;
use std::time::{Duration, Instant};

/// The keyed hash that makes the 64-bit keys of these caches: foldhash
/// with a random seed per instance. Fast on long inputs (a ~600-byte bearer
/// token hashes about ten times faster than with SipHash) and not
/// predictable by a client; callers check the identity stored in a hit, so
/// a collision is a miss, never a wrong answer.
pub type KeyHasher = foldhash::quality::RandomState;

/// Shards (a power of two).
const SHARDS: usize = 64;

/// The hasher of already-hashed keys: the key is the hash.
#[derive(Default, Clone, Copy)]
struct KeyIsHash(u64);

impl Hasher for KeyIsHash {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed; this keeps the trait total.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

struct Slot<V> {
    value: V,
    expires: Instant,
    weight: u64,
}

#[derive(Default)]
struct Shard<V> {
    map: HashMap<u64, Slot<V>, BuildHasherDefault<KeyIsHash>>,
    weight: u64,
}

/// A bounded map from 64-bit keyed hashes to values, each entry expiring
/// `ttl` after it was inserted.
pub struct HotCache<V> {
    shards: Box<[RwLock<Shard<V>>]>,
    shard_capacity: u64,
    ttl: Duration,
}

impl<V: Clone> HotCache<V> {
    /// A cache of at most `capacity` weight units (see [`HotCache::insert`])
    /// whose entries live at most `ttl`.
    pub fn new(capacity: u64, ttl: Duration) -> Self {
        HotCache {
            shards: (0..SHARDS)
                .map(|_| {
                    RwLock::new(Shard {
                        map: HashMap::default(),
                        weight: 0,
                    })
                })
                .collect(),
            shard_capacity: (capacity / SHARDS as u64).max(1),
            ttl,
        }
    }

    fn shard(&self, key: u64) -> &RwLock<Shard<V>> {
        // Bits the map itself does not use first (it takes the low bits
        // for the bucket and the top seven for the tag).
        &self.shards[((key >> 32) as usize) & (SHARDS - 1)]
    }

    /// The live entry under `key`.
    pub fn get(&self, key: u64) -> Option<V> {
        let shard = self.shard(key).read().unwrap_or_else(|e| e.into_inner());
        let slot = shard.map.get(&key)?;
        (Instant::now() < slot.expires).then(|| slot.value.clone())
    }

    /// Stores `value` under `key` with a `weight` (1 for a cache bounded by
    /// entries; bytes for one bounded by size).
    pub fn insert(&self, key: u64, value: V, weight: u64) {
        let now = Instant::now();
        let mut shard = self.shard(key).write().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = shard.map.remove(&key) {
            shard.weight -= old.weight;
        }
        if shard.weight + weight > self.shard_capacity {
            shard.map.retain(|_, s| s.expires > now);
            shard.weight = shard.map.values().map(|s| s.weight).sum();
            if shard.weight + weight > self.shard_capacity {
                shard.map.clear();
                shard.weight = 0;
            }
        }
        shard.weight += weight;
        shard.map.insert(
            key,
            Slot {
                value,
                expires: now + self.ttl,
                weight,
            },
        );
    }

    /// Forgets `key`.
    pub fn invalidate(&self, key: u64) {
        let mut shard = self.shard(key).write().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = shard.map.remove(&key) {
            shard.weight -= old.weight;
        }
    }

    /// Forgets everything.
    pub fn clear(&self) {
        for s in self.shards.iter() {
            let mut shard = s.write().unwrap_or_else(|e| e.into_inner());
            shard.map.clear();
            shard.weight = 0;
        }
    }

    /// Live entries (for tests and diagnostics; takes every shard's lock).
    pub fn len(&self) -> usize {
        let now = Instant::now();
        self.shards
            .iter()
            .map(|s| {
                let shard = s.read().unwrap_or_else(|e| e.into_inner());
                shard.map.values().filter(|v| v.expires > now).count()
            })
            .sum()
    }

    /// Whether no live entry is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u64) -> u64 {
        use std::hash::BuildHasher as _;
        std::hash::RandomState::new().hash_one(i)
    }

    #[test]
    fn stores_replaces_and_forgets() {
        let c = HotCache::new(1000, Duration::from_secs(60));
        let (a, b) = (key(1), key(2));
        assert_eq!(c.get(a), None);
        c.insert(a, "a", 1);
        c.insert(b, "b", 1);
        assert_eq!(c.get(a), Some("a"));
        c.insert(a, "a2", 1);
        assert_eq!(c.get(a), Some("a2"));
        assert_eq!(c.len(), 2);
        c.invalidate(a);
        assert_eq!(c.get(a), None);
        assert_eq!(c.get(b), Some("b"));
        c.clear();
        assert!(c.is_empty());
    }

    #[test]
    fn entries_expire() {
        let c = HotCache::new(1000, Duration::ZERO);
        c.insert(key(1), 1, 1);
        assert_eq!(c.get(key(1)), None, "a zero TTL keeps nothing");
    }

    #[test]
    fn the_weight_is_bounded() {
        // 64 shards of 2 units each.
        let c = HotCache::new(128, Duration::from_secs(60));
        for i in 0..10_000 {
            c.insert(key(i), i, 1);
        }
        assert!(c.len() <= 128, "{}", c.len());
        // An entry heavier than a shard is never kept along with others.
        c.insert(key(5), 5, 3);
        let shard = c.shard(key(5)).read().unwrap();
        assert!(shard.weight <= 3);
    }
}
