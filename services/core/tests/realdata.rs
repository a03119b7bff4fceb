//! Conformance against real public data (`/work/shared/realdata`, never
//! copied into the project). Located at `$PINFOLD_REALDATA` or
//! `../../../shared/realdata` from this crate; skipped with a notice when
//! absent.

use std::path::{Path, PathBuf};

use pinfold_core::Mode;
use pinfold_core::card::{Limits, ServerCard};
use pinfold_core::contain::ViolationKind;
use pinfold_core::json::parse_strict;
use pinfold_core::ops;
use serde_json::{Value, json};

fn realdata() -> Option<PathBuf> {
    let dir = std::env::var_os("PINFOLD_REALDATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/realdata"));
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("realdata not found, skipping");
        None
    }
}

fn load(path: &Path) -> Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_strict(&bytes, 64).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && !p.file_name().unwrap().to_string_lossy().starts_with('_')
        })
        .collect();
    files.sort();
    files
}

fn card_with(name: &str, version: &str, signature: Value) -> Value {
    json!({"name": name, "version": version, "signature": signature})
}

#[test]
fn github_toolsnaps_each_parse_and_all_together() {
    let Some(root) = realdata() else { return };
    let files = json_files(&root.join("github-toolsnaps"));
    assert_eq!(files.len(), 117);
    let mut all = Vec::new();
    for f in &files {
        let tool = load(f);
        let doc = card_with(
            "io.github.github/github-mcp-server",
            "1.0.0",
            json!({"tools": [tool.clone()]}),
        );
        if let Err(e) = ServerCard::from_value(&doc, &Limits::default()) {
            panic!("{}: {e:?}", f.display());
        }
        all.push(tool);
    }
    let doc = card_with(
        "io.github.github/github-mcp-server",
        "1.0.0",
        json!({"tools": all}),
    );
    let card = ServerCard::from_value(&doc, &Limits::default()).expect("117-tool signature");
    assert_eq!(card.signature.tools.len(), 117);
    // its worst-case tools/list is within the signature
    let reduced = ops::reduce_document(&doc).unwrap();
    let report = ops::verify(&doc, &reduced, Mode::Strict).unwrap();
    assert!(report.conformant, "{:?}", report.violations.first());
}

fn capture_card(capture: &Value) -> Value {
    let info = &capture["serverInfo"];
    let slug: String = info["name"]
        .as_str()
        .unwrap()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let mut sig = serde_json::Map::new();
    for key in ["tools", "prompts", "resources", "resourceTemplates"] {
        if let Some(v) = capture.get(key).filter(|v| v.is_array()) {
            sig.insert(key.into(), v.clone());
        }
    }
    card_with(
        &format!("io.example.captures/{slug}"),
        info["version"].as_str().unwrap(),
        Value::Object(sig),
    )
}

fn observed(capture: &Value) -> Value {
    let mut o = serde_json::Map::new();
    for key in ["tools", "prompts", "resources", "resourceTemplates"] {
        if let Some(v) = capture.get(key).filter(|v| v.is_array()) {
            o.insert(key.into(), v.clone());
        }
    }
    Value::Object(o)
}

#[test]
fn server_captures_verify_and_detect_escalations() {
    let Some(root) = realdata() else { return };
    let files = json_files(&root.join("servers"));
    assert_eq!(files.len(), 9);
    let mut flipped_any = 0;
    for f in &files {
        let capture = load(f);
        let doc = capture_card(&capture);
        let card = ServerCard::from_value(&doc, &Limits::default())
            .unwrap_or_else(|e| panic!("{}: {e:?}", f.display()));
        assert_eq!(
            card.signature.tools.len(),
            capture["tools"].as_array().unwrap().len()
        );

        // the capture's own lists conform, without even a notice
        let obs = observed(&capture);
        let report = ops::verify(&doc, &obs, Mode::Strict).unwrap();
        assert!(
            report.conformant,
            "{}: {:?}",
            f.display(),
            report.violations
        );
        assert!(
            report.notices.is_empty(),
            "{}: {:?}",
            f.display(),
            report.notices
        );

        // an undeclared tool is a less-safe violation
        let mut extra = obs.clone();
        extra["tools"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "surprise_tool", "inputSchema": {"type": "object"}}));
        let report = ops::verify(&doc, &extra, Mode::Strict).unwrap();
        assert!(!report.conformant && report.blocking && report.less_safe());
        assert_eq!(report.violations[0].kind, ViolationKind::UndeclaredTool);

        // flipping destructiveHint false -> true on a writing tool
        let tools = obs["tools"].as_array().unwrap();
        if let Some(i) = tools.iter().position(|t| {
            t["annotations"]["destructiveHint"] == json!(false)
                && t["annotations"]["readOnlyHint"] != json!(true)
        }) {
            flipped_any += 1;
            let mut flipped = obs.clone();
            flipped["tools"][i]["annotations"]["destructiveHint"] = json!(true);
            let report = ops::verify(&doc, &flipped, Mode::Strict).unwrap();
            assert_eq!(report.violations.len(), 1, "{}", f.display());
            let v = &report.violations[0];
            assert_eq!(v.kind, ViolationKind::AnnotationNotDeclared);
            assert_eq!(v.pointer, format!("/tools/{i}/annotations"));
            assert!(v.less_safe);
            // the same observation is only flagged in advisory mode
            let advisory = ops::verify(&doc, &flipped, Mode::Advisory).unwrap();
            assert!(!advisory.conformant && !advisory.blocking && !advisory.fails());
        }

        // a subset (the first tool only) conforms too
        if let Some(first) = tools.first() {
            let subset = json!({"tools": [first]});
            assert!(ops::verify(&doc, &subset, Mode::Strict).unwrap().conformant);
        }
    }
    assert!(
        flipped_any >= 5,
        "expected several writing tools among the captures"
    );
}

#[test]
fn registry_examples_dir() {
    let Some(root) = realdata() else { return };
    let dir = root.join("registry/examples-dir");
    for f in json_files(&dir.join("valid")) {
        let doc = load(&f);
        let card = ServerCard::from_value(&doc, &Limits::default())
            .unwrap_or_else(|e| panic!("{}: {e:?}", f.display()));
        assert_eq!(card.name.as_str(), doc["name"].as_str().unwrap());
    }
    let expected = [
        ("bad-name-pattern.json", "/name", "invalid_server_name"),
        (
            "description-too-long.json",
            "/description",
            "description_too_long",
        ),
        ("missing-name.json", "/name", "missing_field"),
        (
            "package-version-latest.json",
            "/packages/0/version",
            "invalid_package_version",
        ),
        (
            "positional-argument-missing-value.json",
            "/packages/0/packageArguments/0",
            "invalid_argument",
        ),
    ];
    let files = json_files(&dir.join("invalid"));
    assert_eq!(files.len(), expected.len());
    for (file, pointer, code) in expected {
        let doc = load(&dir.join("invalid").join(file));
        let e = ServerCard::from_value(&doc, &Limits::default()).unwrap_err();
        assert_eq!(e.errors.len(), 1, "{file}: {e:?}");
        assert_eq!(
            (e.errors[0].pointer.as_str(), e.errors[0].code),
            (pointer, code),
            "{file}"
        );
    }
}
