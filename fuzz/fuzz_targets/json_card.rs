//! Strict JSON parsing and server-card validation.
//!
//! - `parse_strict` accepts only what serde_json accepts, with the same
//!   value, never a duplicate key and never nesting past the limit;
//! - card validation never panics, `ServerCard::from_value` and the
//!   one-pass `ServerCard::check` agree (same errors, or the same digest
//!   and canonical bytes), and the digest is that of the canonical form;
//! - every error carries a JSON pointer that resolves in the document (or
//!   names a member that is missing from an object that exists).
#![no_main]

use libfuzzer_sys::fuzz_target;
use pinfold_core::card::{Limits, ServerCard};
use pinfold_core::digest::{canonical_bytes, digest_bytes};
use pinfold_core::json::{JsonErrorKind, parse_strict};
use serde_json::Value;

const MAX_DEPTH: usize = 16;

fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// The pointer resolves, or its parent resolves (a missing member).
fn pointer_plausible(doc: &Value, pointer: &str) -> bool {
    if doc.pointer(pointer).is_some() {
        return true;
    }
    match pointer.rfind('/') {
        Some(i) => doc.pointer(&pointer[..i]).is_some(),
        None => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let strict = parse_strict(data, MAX_DEPTH);
    let loose = serde_json::from_slice::<Value>(data);
    let doc = match strict {
        Ok(v) => {
            let loose = loose.expect("strict accepted what serde_json refuses");
            assert_eq!(v, loose, "strict and serde_json parse differently");
            assert!(depth(&v) <= MAX_DEPTH, "nesting past the limit accepted");
            v
        }
        Err(e) => {
            // Refused as too deep: the nesting is found before any later
            // syntax error, but a document that is JSON must be that deep.
            if e.kind == JsonErrorKind::TooDeep
                && let Ok(loose) = loose
            {
                assert!(depth(&loose) > MAX_DEPTH, "refused as too deep: {e}");
            }
            return;
        }
    };

    let limits = Limits {
        max_depth: MAX_DEPTH,
        ..Limits::default()
    };
    let full = ServerCard::from_value(&doc, &limits);
    let checked = ServerCard::check(&doc, &limits);
    match (full, checked) {
        (Ok(card), Ok(checked)) => {
            let canon = canonical_bytes(&doc);
            assert_eq!(card.canonical(), canon.as_slice());
            assert_eq!(checked.canonical(), canon.as_slice());
            assert_eq!(card.digest(), digest_bytes(&canon));
            assert_eq!(checked.digest(), card.digest());
            assert_eq!(checked.name, card.name);
            assert_eq!(checked.version, card.version);
            assert_eq!(checked.tools, card.signature.tools.len());
            // A valid card stays valid from its canonical bytes.
            let again = parse_strict(&canon, MAX_DEPTH).expect("canonical bytes parse");
            let again = ServerCard::from_value(&again, &limits).expect("canonical card valid");
            assert_eq!(again.digest(), card.digest());
        }
        (Err(a), Err(b)) => {
            assert_eq!(a, b, "from_value and check report different errors");
            assert!(!a.errors.is_empty(), "an error without a reason");
            for e in &a.errors {
                assert!(
                    e.pointer.is_empty() || e.pointer.starts_with('/'),
                    "not a JSON pointer: {:?}",
                    e.pointer
                );
                assert!(
                    pointer_plausible(&doc, &e.pointer),
                    "pointer {:?} ({}) is not in the document",
                    e.pointer,
                    e.code
                );
            }
        }
        (a, b) => panic!(
            "from_value and check disagree: {:?} vs {:?}",
            a.map(|c| c.digest().to_owned()),
            b.map(|c| c.digest().to_owned())
        ),
    }
});
