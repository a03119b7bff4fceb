//! Property tests for the core semantics.

use pinfold_core::Mode;
use pinfold_core::annotations::Annotations;
use pinfold_core::card::{Limits, ServerCard};
use pinfold_core::contain::{Observation, check};
use pinfold_core::diff::{Class, diff};
use pinfold_core::digest::{canonical_bytes, digest};
use pinfold_core::reduce::{reduce_annotations, reduce_tool};
use proptest::prelude::*;
use serde_json::{Map, Number, Value, json};

// ---------- arbitrary JSON and equivalent spellings ----------

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        any::<u64>().prop_map(|u| json!(u)),
        (-1e300f64..1e300f64).prop_map(|f| json!(f)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "\\PC{0,12}".prop_map(Value::String),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z0-9\\u{80}-\\u{10FFFF}]{0,6}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A tiny deterministic generator for spelling choices.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn ws(r: &mut Rng, out: &mut String) {
    for _ in 0..r.pick(3) {
        out.push([' ', '\n', '\t', '\r'][r.pick(4) as usize]);
    }
}

fn respell_number(n: &Number, r: &mut Rng) -> String {
    if let Some(u) = n.as_u64() {
        return match r.pick(4) {
            0 => format!("{u}"),
            1 => format!("{u}.0"),
            2 => format!("{u}e0"),
            _ => format!("{u}0E-1"),
        };
    }
    if let Some(i) = n.as_i64() {
        return match r.pick(3) {
            0 => format!("{i}"),
            1 => format!("{i}.00"),
            _ => format!("{i}E+0"),
        };
    }
    let f = n.as_f64().unwrap();
    match r.pick(3) {
        0 => format!("{f:e}"),
        1 => format!("{f:E}"),
        _ => format!("{f:?}"),
    }
}

fn respell_string(s: &str, r: &mut Rng, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        let must = c == '"' || c == '\\' || (c as u32) < 0x20;
        if must || r.pick(3) == 0 {
            let mut buf = [0u16; 2];
            for unit in c.encode_utf16(&mut buf) {
                if r.pick(2) == 0 {
                    out.push_str(&format!("\\u{unit:04x}"));
                } else {
                    out.push_str(&format!("\\u{unit:04X}"));
                }
            }
        } else {
            out.push(c);
        }
    }
    out.push('"');
}

fn respell(v: &Value, r: &mut Rng, out: &mut String) {
    ws(r, out);
    match v {
        Value::Null | Value::Bool(_) => out.push_str(&v.to_string()),
        Value::Number(n) => out.push_str(&respell_number(n, r)),
        Value::String(s) => respell_string(s, r, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                respell(x, r, out);
            }
            ws(r, out);
            out.push(']');
        }
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            // shuffle
            for i in (1..entries.len()).rev() {
                let j = r.pick(i as u64 + 1) as usize;
                entries.swap(i, j);
            }
            out.push('{');
            for (i, (k, x)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                ws(r, out);
                respell_string(k, r, out);
                ws(r, out);
                out.push(':');
                respell(x, r, out);
            }
            ws(r, out);
            out.push('}');
        }
    }
    ws(r, out);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Key order, whitespace, number and string spellings never change the digest.
    #[test]
    fn digest_ignores_spelling(v in arb_json(), seed in 1u64..) {
        let mut text = String::new();
        respell(&v, &mut Rng(seed), &mut text);
        let reparsed = pinfold_core::json::parse_strict(text.as_bytes(), 128).unwrap();
        prop_assert_eq!(digest(&reparsed), digest(&v), "{}", text);
    }

    /// Our serialiser agrees byte for byte with an independent RFC 8785 implementation.
    #[test]
    fn canonical_matches_reference(v in arb_json()) {
        let reference = serde_json_canonicalizer::to_vec(&v).unwrap();
        prop_assert_eq!(String::from_utf8(canonical_bytes(&v)).unwrap(), String::from_utf8(reference).unwrap());
    }

    /// Strings and names crowded with bytes that must be escaped, and with
    /// their neighbours, against the same reference.
    #[test]
    fn canonical_escapes_match_reference(
        v in prop::collection::btree_map(
            "[a#!\\]\\x20\"\\\\\\x00-\\x1f\\x7f\\u{e9}\\u{20ac}\\u{e000}\\u{1F600}]{0,6}",
            prop::collection::vec("[a#!\\]\\x20\"\\\\\\x00-\\x1f\\x7f\\u{e9}\\u{20ac}\\u{1F600}]{0,40}", 0..4),
            0..8,
        )
    ) {
        let v = Value::Object(v.into_iter().map(|(k, s)| (k, json!(s))).collect());
        let reference = serde_json_canonicalizer::to_vec(&v).unwrap();
        prop_assert_eq!(String::from_utf8(canonical_bytes(&v)).unwrap(), String::from_utf8(reference).unwrap());
    }
}

// ---------- annotation possibilities ----------

fn arb_possibility() -> impl Strategy<Value = Value> {
    let b = || prop::option::of(any::<bool>());
    (
        b(),
        b(),
        b(),
        b(),
        b(),
        prop::option::of(prop::sample::select(vec!["never", "optional", "always"])),
        prop::option::of(0u8..2),
        prop::option::of("[a-z]{1,3}"),
    )
        .prop_map(|(ro, de, id, ow, ag, task, x, title)| {
            let mut m = Map::new();
            let mut put = |k: &str, v: Option<Value>| {
                if let Some(v) = v {
                    m.insert(k.into(), v);
                }
            };
            put("readOnlyHint", ro.map(Value::Bool));
            put("destructiveHint", de.map(Value::Bool));
            put("idempotentHint", id.map(Value::Bool));
            put("openWorldHint", ow.map(Value::Bool));
            put("agencyHint", ag.map(Value::Bool));
            put("taskHint", task.map(|t| json!(t)));
            put("x-custom", x.map(|x| json!(x)));
            put("title", title.map(Value::String));
            Value::Object(m)
        })
}

fn arb_possibilities() -> impl Strategy<Value = Vec<Value>> {
    prop::collection::vec(arb_possibility(), 1..5)
}

fn card_of(possibilities: &[Value]) -> ServerCard {
    let doc = json!({"name": "a.b/c", "version": "1.0.0", "signature": {"tools": [
        {"name": "t", "inputSchema": {"type": "object"}, "annotations": possibilities}]}});
    ServerCard::from_value(&doc, &Limits::default()).unwrap()
}

fn observe(tool: Value) -> Observation {
    Observation::from_value(&json!({"tools": [tool]}), &Limits::default()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Reducing a reduced tool changes nothing.
    #[test]
    fn reduction_idempotent(ps in arb_possibilities()) {
        let card = card_of(&ps);
        let once = reduce_tool(&card.signature.tools[0]);
        let again_card = card_of(std::slice::from_ref(&once["annotations"]));
        let twice = reduce_tool(&again_card.signature.tools[0]);
        prop_assert_eq!(once, twice);
    }

    /// The worst case is at least as dangerous as every possibility.
    #[test]
    fn reduction_never_safer(ps in arb_possibilities()) {
        let card = card_of(&ps);
        let t = &card.signature.tools[0];
        let worst = reduce_annotations(t);
        for p in &t.possibilities {
            prop_assert!(p.at_most_as_dangerous_as(&worst), "{:?} vs {:?}", p, worst);
        }
    }

    /// Every declared possibility, observed alone, conforms.
    #[test]
    fn every_possibility_contained(ps in arb_possibilities()) {
        let card = card_of(&ps);
        for p in &ps {
            let obs = observe(json!({"name": "t", "inputSchema": {"type": "object"}, "annotations": p}));
            let r = check(&card.signature, &obs, Mode::Strict);
            prop_assert!(r.conformant, "{:?}", r.violations);
        }
    }

    /// The worst-case tool conforms iff it equals a declared possibility.
    #[test]
    fn reduced_contained_iff_declared(ps in arb_possibilities()) {
        let card = card_of(&ps);
        let t = &card.signature.tools[0];
        let reduced = reduce_tool(t);
        let r = check(&card.signature, &observe(reduced), Mode::Strict);
        let worst: Annotations = reduce_annotations(t);
        let declared = t.possibilities.iter().any(|p| worst.conforms_to(p));
        prop_assert_eq!(r.conformant, declared);
    }

    /// A version compared with itself has no changes.
    #[test]
    fn diff_self_empty(ps in arb_possibilities()) {
        let card = card_of(&ps);
        let d = diff(&card, &card);
        prop_assert!(d.changes.is_empty());
        prop_assert_eq!(d.classification, Class::Neutral);
    }

    /// When B allows a possibility less safe than anything A allowed, the
    /// diff says escalation.
    #[test]
    fn diff_reports_escalation(a in arb_possibilities(), b in arb_possibilities()) {
        let (ca, cb) = (card_of(&a), card_of(&b));
        let (ta, tb) = (&ca.signature.tools[0], &cb.signature.tools[0]);
        let less_safe = tb.possibilities.iter().any(|p| !ta.possibilities.iter().any(|q| p.at_most_as_dangerous_as(q)));
        let d = diff(&ca, &cb);
        if less_safe {
            prop_assert_eq!(d.classification, Class::Escalation);
            prop_assert!(d.changes.iter().any(|c| c.class == Class::Escalation && c.kind == "annotation_possibility_added"));
        } else {
            prop_assert!(d.changes.iter().all(|c| c.class != Class::Escalation), "{:?}", d.changes);
        }
        // containment agrees: B's possibilities observed against A are less safe exactly then
        for (k, p) in b.iter().enumerate() {
            let r = check(&ca.signature, &observe(json!({"name": "t", "inputSchema": {"type": "object"}, "annotations": p})), Mode::Strict);
            let this_less_safe = !ta.possibilities.iter().any(|q| tb.possibilities[k].at_most_as_dangerous_as(q));
            prop_assert_eq!(r.less_safe(), this_less_safe);
        }
    }
}
