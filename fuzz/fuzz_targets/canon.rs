//! Canonicalisation (RFC 8785): for any document the strict parser accepts,
//! `canon(parse(canon(x))) == canon(x)`, the canonical bytes are themselves
//! strict JSON, agree with an independent RFC 8785 implementation, and the
//! digest is the same however the value is reached (parse, serialise,
//! re-parse).
#![no_main]

use libfuzzer_sys::fuzz_target;
use pinfold_core::digest::{canonical_bytes, canonical_eq, digest, digest_bytes, is_digest};
use pinfold_core::json::{DEFAULT_MAX_DEPTH, parse_strict};

fuzz_target!(|data: &[u8]| {
    let Ok(value) = parse_strict(data, DEFAULT_MAX_DEPTH) else {
        return;
    };
    let canon = canonical_bytes(&value);

    // The canonical form is strict JSON, and a fixed point.
    let reparsed = parse_strict(&canon, DEFAULT_MAX_DEPTH)
        .unwrap_or_else(|e| panic!("canonical bytes do not parse: {e}"));
    assert_eq!(
        canonical_bytes(&reparsed),
        canon,
        "canon(canon(x)) != canon(x)"
    );
    assert!(canonical_eq(&value, &reparsed));

    // Canonical output is ASCII-clean of insignificant white space.
    assert!(!canon.contains(&b'\n'), "canonical form holds a newline");

    // The digest is stable across parse/serialise round trips.
    let d = digest(&value);
    assert!(is_digest(&d), "malformed digest {d}");
    assert_eq!(d, digest_bytes(&canon));
    assert_eq!(d, digest(&reparsed));
    let pretty = serde_json::to_vec_pretty(&value).expect("a Value serialises");
    let from_pretty =
        parse_strict(&pretty, DEFAULT_MAX_DEPTH).expect("serde_json's output parses strictly");
    assert_eq!(
        digest(&from_pretty),
        d,
        "digest changed across serialise/parse"
    );

    // An independent RFC 8785 implementation writes the same bytes.
    if let Ok(other) = serde_json_canonicalizer::to_vec(&value) {
        assert_eq!(
            other,
            canon,
            "RFC 8785 implementations disagree: {:?} vs {:?}",
            String::from_utf8_lossy(&other),
            String::from_utf8_lossy(&canon)
        );
    }
});
