//! Argument-key canonicalisation of the resolve cache
//! (`pinfold_resolve_check::key`, which the resolve service re-exports).
//!
//! The input is split into tenant, session, tool and a JSON document of
//! arguments. Properties: the key is injective in (tenant, session, tool)
//! and its arguments part is the RFC 8785 form (the same for any two
//! spellings of one value: re-parsed, pretty-printed, members reversed);
//! the key belongs to its own session's prefix and to no other; the tenant
//! reads back; fingerprints follow equality.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pinfold_core::digest::canonical_bytes;
use pinfold_core::json::parse_strict;
use pinfold_resolve_check::key::{CacheKey, session_prefix};
use serde_json::{Map, Value};

/// The members of every object in reverse order (same value, other spelling).
fn reversed(v: &Value) -> Value {
    match v {
        Value::Object(o) => {
            let mut m = Map::new();
            for (k, x) in o.iter().rev() {
                m.insert(k.clone(), reversed(x));
            }
            Value::Object(m)
        }
        Value::Array(a) => Value::Array(a.iter().map(reversed).collect()),
        other => other.clone(),
    }
}

fuzz_target!(|data: &[u8]| {
    // tenant \0 session \0 tool \0 arguments
    let mut parts = data.splitn(4, |b| *b == 0);
    let (Some(t), Some(s), Some(n), Some(args)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return;
    };
    let (Ok(tenant), Ok(session), Ok(tool)) = (
        std::str::from_utf8(t),
        std::str::from_utf8(s),
        std::str::from_utf8(n),
    ) else {
        return;
    };
    let Ok(arguments) = parse_strict(args, 64) else {
        return;
    };

    let k = CacheKey::new(tenant, session, tool, &arguments);
    let bytes = k.as_bytes();

    // Layout: three length-prefixed strings, then RFC 8785 arguments.
    let prefix = session_prefix(tenant, session);
    assert!(bytes.starts_with(&prefix));
    assert!(k.in_session(&prefix));
    let rest = &bytes[prefix.len()..];
    assert_eq!(&rest[..4], (tool.len() as u32).to_le_bytes());
    assert_eq!(&rest[4..4 + tool.len()], tool.as_bytes());
    assert_eq!(
        &rest[4 + tool.len()..],
        canonical_bytes(&arguments).as_slice()
    );
    assert_eq!(k.tenant(), tenant);
    assert_eq!(k.heap_size(), bytes.len());

    // Any spelling of the same arguments gives the same key.
    let pretty = serde_json::to_vec_pretty(&arguments).expect("serialises");
    let same = parse_strict(&pretty, 64).expect("reparses");
    for other in [same, reversed(&arguments)] {
        let k2 = CacheKey::new(tenant, session, tool, &other);
        assert!(k2 == k, "two spellings of one value give two keys");
        assert_eq!(k2.fingerprint(), k.fingerprint());
    }

    // Moving one byte between adjacent fields changes the key, and the
    // session prefix of a different session does not claim it.
    if !session.is_empty() {
        let shifted_session = &session[session.chars().next().map_or(0, char::len_utf8)..];
        let shifted_tenant = format!(
            "{tenant}{}",
            &session[..session.len() - shifted_session.len()]
        );
        let k3 = CacheKey::new(&shifted_tenant, shifted_session, tool, &arguments);
        assert!(k3 != k, "length prefixes failed to keep fields apart");
        assert!(!k3.in_session(&prefix));
        assert!(!k.in_session(&session_prefix(&shifted_tenant, shifted_session)));
    }
    let k4 = CacheKey::new(tenant, session, &format!("{tool}x"), &arguments);
    assert!(k4 != k);
    assert!(k4.in_session(&prefix));
});
