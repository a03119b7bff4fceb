//! A prepared version weighs about what it holds: the cache of prepared
//! versions is bounded by these weights, so they must not undercount. This
//! binary counts every allocation (`stats_alloc`) and prepares the
//! reference card and, when `../shared/realdata` (or `$PINFOLD_REALDATA`)
//! is there, the GitHub MCP server's 117 tools.
//!
//! One test function: the counters are process-wide.

use std::alloc::System;
use std::path::{Path, PathBuf};

use pinfold_core::card::Limits;
use pinfold_resolve_check::PreparedSignature;
use serde_json::{Value, json};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn live() -> i64 {
    let s = GLOBAL.stats();
    // A reallocation is already in these two (its growth as allocated, its
    // shrinking as deallocated); `bytes_reallocated` is the same change
    // again, and is not added.
    s.bytes_allocated as i64 - s.bytes_deallocated as i64
}

fn github_card() -> Option<Value> {
    let dir = std::env::var_os("PINFOLD_REALDATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/realdata"))
        .join("github-toolsnaps");
    let Ok(rd) = std::fs::read_dir(&dir) else {
        eprintln!(
            "realdata not found at {}, skipping the GitHub tool list",
            dir.display()
        );
        return None;
    };
    let mut files: Vec<PathBuf> = rd.map(|e| e.unwrap().path()).collect();
    files.sort();
    let tools: Vec<Value> = files
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|f| serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap())
        .collect();
    Some(
        json!({"name": "io.github.github/github-mcp-server", "version": "1.0.0",
        "signature": {"tools": tools}}),
    )
}

/// A card unlike the measured ones whose one schema uses what the
/// measured ones do: nested objects, arrays, enums, formats, patterns.
fn warm_up_card() -> Value {
    json!({"name": "io.example/warm-up", "version": "1.0.0", "signature": {"tools": [{
        "name": "warm_up",
        "description": "sets up the validator library",
        "inputSchema": {"type": "object", "properties": {
            "a": {"type": "string", "pattern": "^[a-z]+$", "format": "uri"},
            "b": {"type": "array", "items": {"type": "integer", "minimum": 0}},
            "c": {"type": "string", "enum": ["x", "y"]},
            "d": {"type": "object", "additionalProperties": false,
                  "properties": {"e": {"type": "boolean"}}, "required": ["e"]}
        }, "required": ["a"]}
    }]}})
}

#[test]
fn a_prepared_version_weighs_what_it_holds() {
    let reference: Value =
        serde_json::from_str(include_str!("../../../examples/manage-files-1.0.0.json")).unwrap();
    let mut cards = vec![("manage-files", reference)];
    if let Some(g) = github_card() {
        cards.push(("github (117 tools)", g));
    }
    // Unmeasured: the validator library's process-wide state (its
    // meta-schemas, format checkers and pattern engines) is set up once,
    // by the first schema compiled, and held by no prepared version.
    drop(PreparedSignature::new(&warm_up_card(), &Limits::default()).unwrap());
    for (what, card) in cards {
        let before = live();
        let p = PreparedSignature::new(&card, &Limits::default()).unwrap();
        let held = live() - before;
        let weight = p.heap_bytes() as i64;
        let ratio = weight as f64 / held as f64;
        println!("{what}: prepared holds {held} B, weighs {weight} B ({ratio:.2}x)");
        assert!(
            (0.9..=2.0).contains(&ratio),
            "{what}: weighs {weight} B for {held} B held"
        );
        drop(p);
    }
}
