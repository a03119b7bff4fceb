//! Core benchmarks (targets in bench/README.md: each signature operation
//! ≤ 5 ms, a 1 KiB argument key ≤ 2 µs).
//!
//! The `uri_template_*` and `verify_pathological_template_*` cases time a
//! template built to make a backtracking matcher explode (six `{+var}`
//! expressions against a long URI that fails at the last character);
//! matching must stay linear in the URI.
//!
//! Uses the GitHub MCP server's 117 tool definitions from realdata when
//! present (`$PINFOLD_REALDATA` or `../../../shared/realdata`), otherwise a
//! synthetic signature of the same size.

#![allow(missing_docs)]

use std::hint::black_box;
use std::path::{Path, PathBuf};

use criterion::{Criterion, criterion_group, criterion_main};
use pinfold_core::Mode;
use pinfold_core::card::{Limits, ServerCard};
use pinfold_core::digest::digest;
use pinfold_core::ops;
use pinfold_core::reduce::reduce_signature;
use pinfold_core::uri_template::{UriTemplate, template_matches};
use serde_json::{Value, json};

fn github_tools() -> Vec<Value> {
    let dir = std::env::var_os("PINFOLD_REALDATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/realdata"))
        .join("github-toolsnaps");
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd.map(|e| e.unwrap().path()).collect(),
        Err(_) => {
            eprintln!("realdata not found, using a synthetic 117-tool signature");
            return (0..117)
                .map(|i| {
                    json!({"name": format!("tool_{i}"), "description": "x".repeat(300),
                    "inputSchema": {"type": "object", "properties": {
                        "owner": {"type": "string", "description": "Repository owner"},
                        "repo": {"type": "string", "description": "Repository name"},
                        "page": {"type": "number", "minimum": 1}}, "required": ["owner", "repo"]},
                    "annotations": [{"readOnlyHint": true, "title": "t"}, {"destructiveHint": i % 2 == 0}]})
                })
                .collect();
        }
    };
    files.sort();
    files
        .iter()
        .map(|f| pinfold_core::json::parse_strict(&std::fs::read(f).unwrap(), 64).unwrap())
        .collect()
}

fn args_1kib() -> Value {
    let mut m = serde_json::Map::new();
    let mut i = 0;
    while serde_json::to_vec(&Value::Object(m.clone())).unwrap().len() < 1000 {
        m.insert(
            format!("field_{i:02}"),
            json!(format!("value number {i} with some text")),
        );
        m.insert(format!("n_{i:02}"), json!(i * 37));
        i += 1;
    }
    m.insert(
        "nested".into(),
        json!({"b": [1, 2.5, true, null], "a": "x"}),
    );
    Value::Object(m)
}

fn benches(c: &mut Criterion) {
    let doc = json!({"name": "io.github.github/github-mcp-server", "version": "1.0.0",
        "description": "GitHub's official MCP server", "signature": {"tools": github_tools()}});
    let card = ServerCard::from_value(&doc, &Limits::default()).unwrap();
    let tools_list = reduce_signature(&card.signature);
    eprintln!(
        "signature: {} tools, {} canonical bytes",
        card.signature.tools.len(),
        card.canonical_len()
    );

    c.bench_function("digest_github_signature", |b| {
        b.iter(|| digest(black_box(&doc)))
    });
    c.bench_function("reduce_github_signature", |b| {
        b.iter(|| reduce_signature(black_box(&card.signature)))
    });
    c.bench_function("verify_github_tools_list", |b| {
        b.iter(|| ops::verify_card(black_box(&card), black_box(&tools_list), Mode::Strict).unwrap())
    });
    // The guard's re-verification after a list_changed: the upstream's
    // list (here the published tools, as the server lists them) reviewed
    // against the signature, then the view a client is shown. Target:
    // ≤ 10 ms for 100 tools, off the request path.
    let listed = json!({"tools": github_tools()});
    c.bench_function("guard_review_github_tools_list", |b| {
        b.iter(|| {
            pinfold_core::guard::review_tools(
                black_box(&card.signature),
                black_box(&listed),
                Mode::Strict,
                &Limits::default(),
            )
            .unwrap()
        })
    });
    let review = pinfold_core::guard::review_tools(
        &card.signature,
        &listed,
        Mode::Strict,
        &Limits::default(),
    )
    .unwrap();
    c.bench_function("guard_list_result_github", |b| {
        b.iter(|| serde_json::to_vec(&black_box(&review).list_result(false)).unwrap())
    });
    c.bench_function("validate_github_card", |b| {
        b.iter(|| ServerCard::from_value(black_box(&doc), &Limits::default()).unwrap())
    });
    let args = args_1kib();
    eprintln!(
        "argument object: {} canonical bytes",
        pinfold_core::digest::canonical_bytes(&args).len()
    );
    c.bench_function("canonical_bytes_1kib_arguments", |b| {
        b.iter(|| pinfold_core::digest::canonical_bytes(black_box(&args)))
    });
}

fn pathological_templates(c: &mut Criterion) {
    const TEMPLATES: [&str; 2] = [
        "x://{+a}{+b}{+c}{+d}{+e}{+f}!",
        "x://{+a}a{+b}a{+c}a{+d}a{+e}a{+f}!",
    ];
    let uri = format!("x://{}", "a".repeat(10_000));
    c.bench_function("uri_template_pathological_10k", |b| {
        b.iter(|| template_matches(black_box(TEMPLATES[0]), black_box(&uri)))
    });
    c.bench_function("uri_template_pathological_separated_10k", |b| {
        b.iter(|| template_matches(black_box(TEMPLATES[1]), black_box(&uri)))
    });
    let compiled = UriTemplate::parse(TEMPLATES[1]);
    c.bench_function("uri_template_pathological_separated_10k_compiled", |b| {
        b.iter(|| compiled.matches(black_box(&uri)))
    });
    // What `pinfold signature verify` does: an 80-character URI, as in the
    // original report, against a card holding the template.
    let doc = json!({"name": "io.example/patho", "version": "1.0.0", "signature": {
        "resourceTemplates": [{"uriTemplate": TEMPLATES[0], "name": "patho"}]}});
    let card = ServerCard::from_value(&doc, &Limits::default()).unwrap();
    let observed = json!({"resources": [{"uri": format!("x://{}", "a".repeat(80)), "name": "r"}]});
    c.bench_function("verify_pathological_template_80", |b| {
        b.iter(|| ops::verify_card(black_box(&card), black_box(&observed), Mode::Strict).unwrap())
    });
}

/// The whole publish-validation path of the `bench/load.sh publish` card
/// (~58 KiB, 92 tools, bench/publish-template.json): what the registry's
/// publish job does on the CPU pool — strict parse of the body, every card
/// rule, canonical bytes and digest, and dropping the parsed tree.
fn publish_path(c: &mut Criterion) {
    let template = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/publish-template.json");
    let body = std::fs::read_to_string(template)
        .expect("bench/publish-template.json")
        .replace("__VERSION__", "1.0.0")
        .into_bytes();
    let limits = Limits::default();
    eprintln!("publish card: {} bytes", body.len());
    c.bench_function("publish_path_58k_card", |b| {
        b.iter(|| {
            let doc = pinfold_core::json::parse_strict(black_box(&body), 64).unwrap();
            let card = ServerCard::check(&doc, &limits).unwrap();
            drop(doc);
            card
        })
    });
    let doc = pinfold_core::json::parse_strict(&body, 64).unwrap();
    c.bench_function("publish_path_58k_card_parse_only", |b| {
        b.iter(|| pinfold_core::json::parse_strict(black_box(&body), 64).unwrap())
    });
    c.bench_function("publish_path_58k_card_check_only", |b| {
        b.iter(|| ServerCard::check(black_box(&doc), &limits).unwrap())
    });
    c.bench_function("publish_path_58k_card_full_model", |b| {
        b.iter(|| ServerCard::from_value(black_box(&doc), &limits).unwrap())
    });
}

criterion_group!(core, benches, pathological_templates, publish_path);
criterion_main!(core);
