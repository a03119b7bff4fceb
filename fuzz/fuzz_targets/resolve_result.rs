//! The upstream resolve-result parser: what `pinfold-resolve` does with the
//! raw result of `tools/resolve` or `tools/annotations`
//! (`pinfold_resolve_check::prepared`, which the resolve service
//! re-exports), over `pinfold_core::contain`.
//!
//! The input's first byte picks a declared tool of the reference card
//! (`examples/manage-files-1.0.0.json`), the rest is the upstream's result.
//! Properties: parsing and checking never panic and are deterministic; a
//! parsed result names only the requested tool; a result that checks is
//! served as an object named after the requested tool with every
//! worst-case member (a seed tool's annotations being its own); and the
//! served tool, sent back as a seed result, parses and checks too, with the
//! same conformance when the upstream sent a whole tool.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use pinfold_core::card::Limits;
use pinfold_core::contain::Observation;
use pinfold_resolve_check::prepared::PreparedSignature;
use serde_json::{Value, json};

const CARD: &str = include_str!("../../examples/manage-files-1.0.0.json");
const TOOLS: [&str; 4] = [
    "manage_files",
    "manage_files_dynamic",
    "list_files",
    "undeclared",
];

fn signature() -> &'static PreparedSignature {
    static SIG: OnceLock<PreparedSignature> = OnceLock::new();
    SIG.get_or_init(|| {
        let card: Value = serde_json::from_str(CARD).expect("the example card is JSON");
        PreparedSignature::new(&card, &Limits::default()).expect("the example card is valid")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let name = TOOLS[pick as usize % TOOLS.len()];
    // The engine reads results through serde_json (rmcp), not strictly.
    let Ok(result) = serde_json::from_slice::<Value>(rest) else {
        return;
    };
    let limits = Limits::default();

    if let Ok(obs) = Observation::from_resolution(name, &result, &limits) {
        for (_, t, full) in &obs.tools {
            assert_eq!(t.name, name, "a result named another tool");
            assert!(!full, "a resolution compares an input schema");
        }
        assert!(obs.prompts.is_empty() && obs.resources.is_empty());
    }

    let Some(tool) = signature().tool(name) else {
        assert_eq!(name, "undeclared");
        return;
    };
    let first = tool.check(&result, &limits);
    let second = tool.check(&result, &limits);
    assert_eq!(
        first
            .as_ref()
            .map(|r| (r.conformant, r.violations.len()))
            .ok(),
        second
            .as_ref()
            .map(|r| (r.conformant, r.violations.len()))
            .ok(),
        "checking is not deterministic"
    );
    let Ok(report) = first else {
        return;
    };
    assert_eq!(report.conformant, report.violations.is_empty());

    let served = tool.served_tool(result.clone());
    assert_eq!(served, tool.served_tool(result.clone()));
    let value = served.to_value();
    assert_eq!(
        serde_json::to_value(&served).expect("a served tool serializes"),
        value,
        "a served tool serializes as the value it stands for"
    );
    let obj = value.as_object().expect("a served tool is an object");
    assert_eq!(obj.get("name").and_then(Value::as_str), Some(name));
    for k in tool
        .worst_case()
        .as_object()
        .expect("worst case is an object")
        .keys()
    {
        // A seed tool's own annotations (or their absence) are what it says.
        let from_seed = k == "annotations" && result.get("tool").is_some_and(Value::is_object);
        assert!(from_seed || obj.contains_key(k), "served tool lacks {k}");
    }

    // The served tool, sent back as a seed result, is accepted too.
    let again = tool
        .check(&json!({"tool": served}), &limits)
        .unwrap_or_else(|e| panic!("the served tool does not check: {e}"));
    if result.get("tool").is_some_and(Value::is_object) {
        assert_eq!(
            again.conformant, report.conformant,
            "serving changed conformance"
        );
    }
});
