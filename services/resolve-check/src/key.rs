//! Cache keys: (tenant, session, tool, RFC 8785 bytes of the arguments).
//!
//! The key is one byte string: each of tenant, session and tool is written
//! as a 4-byte little-endian length followed by its bytes, and the canonical
//! arguments take the rest. Length prefixes make the encoding injective, so
//! no two tuples share a key (`("ab","c")` and `("a","bc")` differ), and a
//! session's keys all start with the same prefix ([`session_prefix`]), which
//! is how a session's entries are found for eviction.
//!
//! The arguments go through `pinfold_core::digest::write_canonical`: `1` and
//! `1.0`, reordered keys, or `"\u0041"` and `"A"` give the same key.

use std::cell::RefCell;
use std::hash::{Hash, Hasher};

use pinfold_core::digest::write_canonical;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// A resolve-cache key.
#[derive(Clone, PartialEq, Eq)]
pub struct CacheKey {
    bytes: Box<[u8]>,
    prefix_len: u32,
}

impl Hash for CacheKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write(&self.bytes);
    }
}

impl std::fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Arguments may hold personal data: show only their size and a hash.
        write!(
            f,
            "CacheKey({} bytes, {:032x})",
            self.bytes.len(),
            self.fingerprint()
        )
    }
}

fn push_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// The bytes every key of one session starts with.
pub fn session_prefix(tenant: &str, session: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + tenant.len() + session.len());
    push_str(&mut out, tenant);
    push_str(&mut out, session);
    out
}

impl CacheKey {
    /// Builds the key of resolving `tool` with `arguments` in a session.
    ///
    /// The bytes are written into a reused per-thread buffer and copied
    /// once into an exactly sized allocation.
    pub fn new(tenant: &str, session: &str, tool: &str, arguments: &Value) -> Self {
        thread_local! {
            static BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
        }
        let build = |out: &mut Vec<u8>| {
            push_str(out, tenant);
            push_str(out, session);
            let prefix_len = out.len() as u32;
            push_str(out, tool);
            write_canonical(out, arguments);
            Self {
                bytes: Box::from(out.as_slice()),
                prefix_len,
            }
        };
        BUF.with(|cell| match cell.try_borrow_mut() {
            Ok(mut buf) => {
                buf.clear();
                let key = build(&mut buf);
                if buf.capacity() > 64 * 1024 {
                    *buf = Vec::new();
                }
                key
            }
            Err(_) => build(&mut Vec::new()),
        })
    }

    /// The encoded key.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// True when the key belongs to the session whose [`session_prefix`] is
    /// `prefix`.
    pub fn in_session(&self, prefix: &[u8]) -> bool {
        self.bytes[..self.prefix_len as usize] == *prefix
    }

    /// A 128-bit SHA-256 fingerprint of the key (what the determinism check
    /// remembers once the entry itself is gone).
    pub fn fingerprint(&self) -> u128 {
        fingerprint(&self.bytes)
    }

    /// The tenant the key belongs to.
    pub fn tenant(&self) -> &str {
        let len = u32::from_le_bytes([self.bytes[0], self.bytes[1], self.bytes[2], self.bytes[3]]);
        std::str::from_utf8(&self.bytes[4..4 + len as usize]).unwrap_or("")
    }

    /// Bytes held by the key (for the cache weigher).
    pub fn heap_size(&self) -> usize {
        self.bytes.len()
    }
}

/// The first 128 bits of SHA-256 of `bytes`.
pub fn fingerprint(bytes: &[u8]) -> u128 {
    let d = Sha256::digest(bytes);
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    u128::from_le_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn canonical_arguments() {
        let a = CacheKey::new("t1", "s", "x", &json!({"a": 1, "b": [1.0, "A"]}));
        let b = CacheKey::new("t1", "s", "x", &json!({"b": [1, "\u{41}"], "a": 1.0}));
        assert_eq!(a, b);
        assert_eq!(a.fingerprint(), b.fingerprint());
        let c = CacheKey::new("t1", "s", "x", &json!({"a": 2, "b": [1, "A"]}));
        assert_ne!(a, c);
    }

    #[test]
    fn length_prefixes_keep_tuples_apart() {
        let v = json!({});
        let keys = [
            CacheKey::new("ab", "c", "t", &v),
            CacheKey::new("a", "bc", "t", &v),
            CacheKey::new("a", "b", "ct", &v),
            CacheKey::new("a", "bct", "", &v),
        ];
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
        // A tool name cannot run into the arguments either.
        assert_ne!(
            CacheKey::new("a", "b", "t", &json!("x")),
            CacheKey::new("a", "b", "t\"", &json!("x"))
        );
    }

    /// The key of `arguments`, built from an independent RFC 8785
    /// implementation.
    fn reference_key(tenant: &str, session: &str, tool: &str, arguments: &Value) -> Vec<u8> {
        let mut want = session_prefix(tenant, session);
        push_str(&mut want, tool);
        want.extend_from_slice(&serde_json_canonicalizer::to_vec(arguments).unwrap());
        want
    }

    /// RFC 8785's own examples (§3.2.2 mixed values, §3.2.3 name sorting,
    /// Appendix B numbers) end the key byte for byte.
    #[test]
    fn rfc8785_vectors() {
        let cases = [
            (
                r#"{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
                   "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
                   "literals": [null, true, false]}"#,
                r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#,
            ),
            (
                r#"{"\u20ac": 1, "\r": 2, "\ufb33": 3, "1": 4, "\ud83d\ude00": 5, "\u0080": 6, "\u00f6": 7}"#,
                "{\"\\r\":2,\"1\":4,\"\u{80}\":6,\"ö\":7,\"€\":1,\"😀\":5,\"\u{fb33}\":3}",
            ),
            (
                "[5e-324, -1.7976931348623157e308, 9007199254740992, 295147905179352825856, 1e23, 9.999999999999997e-7, 1424953923781206.25, -0.0]",
                "[5e-324,-1.7976931348623157e+308,9007199254740992,295147905179352830000,1e+23,9.999999999999997e-7,1424953923781206.2,0]",
            ),
        ];
        for (input, canonical) in cases {
            let v: Value = serde_json::from_str(input).unwrap();
            let key = CacheKey::new("acme", "s1", "tool", &v);
            let mut want = session_prefix("acme", "s1");
            push_str(&mut want, "tool");
            want.extend_from_slice(canonical.as_bytes());
            assert_eq!(
                String::from_utf8_lossy(key.as_bytes()),
                String::from_utf8_lossy(&want)
            );
            assert_eq!(key.as_bytes(), reference_key("acme", "s1", "tool", &v));
        }
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let text = "[a#!\\]\\x20\"\\\\\\x00-\\x1f\\x7f\\u{e9}\\u{20ac}\\u{e000}\\u{1F600}]{0,20}";
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            text.prop_map(Value::String),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::btree_map(text, inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Any arguments give the key an independent RFC 8785 implementation
        /// gives, and two arguments share a key exactly when their canonical
        /// forms are equal.
        #[test]
        fn key_matches_reference(a in arb_json(), b in arb_json(), tool in "\\PC{0,8}") {
            let ka = CacheKey::new("t", "s", &tool, &a);
            let want = reference_key("t", "s", &tool, &a);
            prop_assert_eq!(ka.as_bytes(), want.as_slice());
            let kb = CacheKey::new("t", "s", &tool, &b);
            let same = serde_json_canonicalizer::to_vec(&a).unwrap()
                == serde_json_canonicalizer::to_vec(&b).unwrap();
            prop_assert_eq!(ka == kb, same);
        }
    }

    #[test]
    fn session_membership() {
        let k = CacheKey::new("acme", "s1", "t", &json!({"a": 1}));
        assert!(k.in_session(&session_prefix("acme", "s1")));
        assert_eq!(k.tenant(), "acme");
        assert!(!k.in_session(&session_prefix("acme", "s2")));
        assert!(!k.in_session(&session_prefix("acm", "es1")));
        assert!(!format!("{k:?}").contains("\"a\""));
    }
}
