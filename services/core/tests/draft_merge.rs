//! Property tests of the merge of captures (`pinfold_core::draft::merge`):
//! the result depends only on the set of captures, merging again changes
//! nothing, and a clean merge contains every capture.

use pinfold_core::Mode;
use pinfold_core::card::{Limits, ServerCard};
use pinfold_core::contain::{Observation, check};
use pinfold_core::digest::canonical_bytes;
use pinfold_core::draft::{Capture, Merged, merge};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn arb_annotation() -> impl Strategy<Value = Value> {
    (
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
        prop::option::of(prop_oneof![Just("A"), Just("B")]),
        prop::option::of(0u8..2),
    )
        .prop_map(|(ro, de, id, ow, ag, title, custom)| {
            let mut m = Map::new();
            for (k, v) in [
                ("readOnlyHint", ro),
                ("destructiveHint", de),
                ("idempotentHint", id),
                ("openWorldHint", ow),
                ("agencyHint", ag),
            ] {
                if let Some(b) = v {
                    m.insert(k.into(), Value::Bool(b));
                }
            }
            if let Some(t) = title {
                m.insert("title".into(), json!(t));
            }
            if let Some(c) = custom {
                // 1 and 1.0 are the same canonically.
                m.insert(
                    "x-custom".into(),
                    if c == 0 { json!(1) } else { json!(1.0) },
                );
            }
            Value::Object(m)
        })
}

fn arb_meta() -> impl Strategy<Value = Value> {
    let effects = prop::sample::subsequence(vec!["read", "write", "external", "delete"], 1..3);
    (
        prop::option::of(effects),
        prop::option::of(prop_oneof![Just("public"), Just("restricted")]),
        prop::option::of(any::<bool>()),
        prop::option::of(prop_oneof![Just(json!([true])), Just(json!([false, true]))]),
        prop::option::of(0u8..3),
    )
        .prop_map(|(effect, sens, confirm, idem, vendor)| {
            let mut m = Map::new();
            if let Some(e) = effect {
                m.insert(
                    "mcp.dev/effect".into(),
                    if e.len() == 1 { json!(e[0]) } else { json!(e) },
                );
            }
            if let Some(s) = sens {
                m.insert("mcp.dev/resultSensitivity".into(), json!(s));
            }
            if let Some(c) = confirm {
                m.insert("mcp.dev/requiresConfirmation".into(), json!(c));
            }
            if let Some(i) = idem {
                m.insert("mcp.dev/idempotent".into(), i);
            }
            if let Some(v) = vendor {
                m.insert("vendor.example/flag".into(), json!(v));
            }
            Value::Object(m)
        })
}

fn arb_tool(schemas: usize) -> impl Strategy<Value = Value> {
    let schemes = prop::sample::subsequence(
        vec![
            json!({"type": "noauth"}),
            json!({"type": "oauth2", "scopes": ["a"]}),
            json!({"type": "oauth2", "scopes": ["a", "b"]}),
            json!({"type": "oauth2", "scopes": ["b", "a"]}),
        ],
        0..3,
    );
    (
        prop_oneof![Just("alpha"), Just("beta"), Just("gamma")],
        0..schemas,
        prop_oneof![
            Just(None),
            arb_annotation().prop_map(Some),
            prop::collection::vec(arb_annotation(), 1..3).prop_map(|v| Some(Value::Array(v))),
        ],
        prop::option::of(arb_meta()),
        prop::option::of(schemes),
        prop::option::of(prop_oneof![Just("one"), Just("two")]),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(name, schema, ann, meta, schemes, desc, resolve)| {
            let mut t = Map::new();
            t.insert("name".into(), json!(name));
            let ty = ["string", "integer"][schema];
            t.insert(
                "inputSchema".into(),
                json!({"type": "object", "properties": {"v": {"type": ty}}}),
            );
            if let Some(a) = ann {
                t.insert("annotations".into(), a);
            }
            if let Some(m) = meta {
                t.insert("_meta".into(), m);
            }
            if let Some(s) = schemes {
                t.insert("securitySchemes".into(), Value::Array(s));
            }
            if let Some(d) = desc {
                t.insert("description".into(), json!(d));
            }
            if let Some(r) = resolve {
                t.insert("resolve".into(), json!(r));
            }
            Value::Object(t)
        })
}

/// A capture; `schemas` > 1 lets tools disagree on `inputSchema`.
fn arb_capture(schemas: usize) -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(arb_tool(schemas), 0..4),
        prop::collection::vec(
            (
                prop_oneof![Just("p"), Just("q")],
                prop_oneof![Just(None), Just(Some(json!([])))],
                prop::option::of(prop_oneof![Just("d1"), Just("d2")]),
            ),
            0..2,
        ),
        prop::collection::vec(prop_oneof![Just("file:///a"), Just("file:///b")], 0..2),
        prop::collection::vec(prop_oneof![Just("file:///t/{x}"), Just("db://{x}")], 0..2),
    )
        .prop_map(|(tools, prompts, resources, templates)| {
            let prompts: Vec<Value> = prompts
                .into_iter()
                .map(|(n, args, d)| {
                    let mut p = json!({"name": n});
                    if let Some(a) = args {
                        p["arguments"] = a;
                    }
                    if let Some(d) = d {
                        p["description"] = json!(d);
                    }
                    p
                })
                .collect();
            let resources: Vec<Value> = resources
                .into_iter()
                .map(|u| json!({"uri": u, "name": "r"}))
                .collect();
            let templates: Vec<Value> = templates
                .into_iter()
                .map(|u| json!({"uriTemplate": u, "name": "t"}))
                .collect();
            json!({"tools": tools, "prompts": prompts, "resources": resources, "resourceTemplates": templates})
        })
}

fn run(caps: &[(&str, &Value)]) -> Merged {
    let caps: Vec<Capture<'_>> = caps
        .iter()
        .map(|(label, lists)| Capture {
            label: (*label).to_owned(),
            base: String::new(),
            lists,
        })
        .collect();
    merge(&caps, &Limits::default()).expect("generated captures are well formed")
}

fn canon(v: &Value) -> Vec<u8> {
    canonical_bytes(v)
}

fn same(a: &Merged, b: &Merged) -> bool {
    canon(&a.signature) == canon(&b.signature)
        && canon(&serde_json::to_value(&a.conflicts).unwrap())
            == canon(&serde_json::to_value(&b.conflicts).unwrap())
        && canon(&serde_json::to_value(&a.notes).unwrap())
            == canon(&serde_json::to_value(&b.notes).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The order of captures never matters, conflicts and notes included.
    #[test]
    fn merge_is_commutative(a in arb_capture(2), b in arb_capture(2), c in arb_capture(2)) {
        let abc = run(&[("A", &a), ("B", &b), ("C", &c)]);
        let cab = run(&[("C", &c), ("A", &a), ("B", &b)]);
        let bac = run(&[("B", &b), ("A", &a), ("C", &c)]);
        prop_assert!(same(&abc, &cab));
        prop_assert!(same(&abc, &bac));
    }

    /// Merging a capture with itself, or merging a merge again, changes
    /// nothing.
    #[test]
    fn merge_is_idempotent(a in arb_capture(1), b in arb_capture(1)) {
        let once = run(&[("A", &a), ("B", &b)]);
        prop_assert!(once.is_clean());
        let twice = run(&[("A", &a), ("B", &b), ("A2", &a), ("B2", &b)]);
        prop_assert_eq!(canon(&once.signature), canon(&twice.signature));
        let again = run(&[("M", &once.signature)]);
        prop_assert_eq!(canon(&once.signature), canon(&again.signature));
        let with_self = run(&[("M", &once.signature), ("M2", &once.signature)]);
        prop_assert_eq!(canon(&once.signature), canon(&with_self.signature));
    }

    /// Merging in steps gives the merge of all.
    #[test]
    fn merge_is_associative(a in arb_capture(1), b in arb_capture(1), c in arb_capture(1)) {
        let ab = run(&[("A", &a), ("B", &b)]);
        let stepwise = run(&[("AB", &ab.signature), ("C", &c)]);
        let all = run(&[("A", &a), ("B", &b), ("C", &c)]);
        prop_assert_eq!(canon(&stepwise.signature), canon(&all.signature));
    }

    /// A clean merge is a valid signature that contains every capture:
    /// containment finds no violation in any of them.
    #[test]
    fn a_clean_merge_contains_every_capture(a in arb_capture(1), b in arb_capture(1), c in arb_capture(1)) {
        let m = run(&[("A", &a), ("B", &b), ("C", &c)]);
        prop_assert!(m.is_clean(), "{:?}", m.conflicts);
        let card = json!({"name": "io.example/merged", "version": "1.0.0", "signature": m.signature});
        let card = ServerCard::from_value(&card, &Limits::default());
        prop_assert!(card.is_ok(), "{:?}", card.err());
        let card = card.unwrap();
        for cap in [&a, &b, &c] {
            let obs = Observation::from_value(cap, &Limits::default()).unwrap();
            let report = check(&card.signature, &obs, Mode::Strict);
            prop_assert!(report.conformant, "{:?}\ncapture: {}\nmerged: {}", report.violations, cap, m.signature);
        }
    }

    /// Captures that disagree on an inputSchema always conflict, and the
    /// conflict names every version.
    #[test]
    fn differing_schemas_always_conflict(a in arb_capture(2), b in arb_capture(2)) {
        let m = run(&[("A", &a), ("B", &b)]);
        let schemas = |name: &str| -> std::collections::BTreeSet<Vec<u8>> {
            [&a, &b]
                .iter()
                .flat_map(|c| c["tools"].as_array().unwrap().iter())
                .filter(|t| t["name"] == name)
                .map(|t| canon(&t["inputSchema"]))
                .collect()
        };
        for name in ["alpha", "beta", "gamma"] {
            let n = schemas(name).len();
            let conflict = m.conflicts.iter().find(|c| c.item == name);
            if n > 1 {
                prop_assert!(conflict.is_some());
                prop_assert_eq!(conflict.unwrap().versions.len(), n);
            } else {
                prop_assert!(conflict.is_none());
            }
        }
    }
}
