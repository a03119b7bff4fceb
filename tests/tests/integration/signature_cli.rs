//! `pinfold signature digest|reduce|verify|diff` on the bundled examples and
//! on real published tool definitions.

use std::path::{Path, PathBuf};

use pinfold_server::signature_cmd::{DiffArgs, OneFile, SignatureCommand, VerifyArgs, run};
use serde_json::{Value, json};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name)
}

/// Runs a command; returns (exit code, stdout JSON or Null, stderr).
fn sig(cmd: SignatureCommand) -> (i32, Value, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = run(cmd, &mut out, &mut err).unwrap();
    let json = serde_json::from_slice(&out).unwrap_or(Value::Null);
    (code, json, String::from_utf8(err).unwrap())
}

fn verify(sig_file: PathBuf, observed: PathBuf, mode: &str) -> (i32, Value, String) {
    sig(SignatureCommand::Verify(VerifyArgs {
        signature: sig_file,
        observed,
        mode: mode.into(),
    }))
}

#[test]
fn digest_is_stable_and_matches_core() {
    let (code, out, _) = sig(SignatureCommand::Digest(OneFile {
        file: example("files-1.0.0.json"),
    }));
    assert_eq!(code, 0);
    let doc: Value =
        serde_json::from_slice(&std::fs::read(example("files-1.0.0.json")).unwrap()).unwrap();
    assert_eq!(out["digest"], pinfold_core::digest::digest(&doc));
    assert_eq!(out["name"], "io.github.acme/files");
    assert!(out["digest"].as_str().unwrap().starts_with("sha256:"));
}

#[test]
fn reduce_gives_the_worst_case_per_tool() {
    let (code, out, _) = sig(SignatureCommand::Reduce(OneFile {
        file: example("files-1.0.0.json"),
    }));
    assert_eq!(code, 0);
    let manage = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "manage_file")
        .unwrap();
    // One possibility is destructive: the worst case is destructive.
    assert_eq!(manage["annotations"]["destructiveHint"], true);
    assert_eq!(manage["annotations"]["readOnlyHint"], false);
    let read = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "read_file")
        .unwrap();
    assert_eq!(
        read["annotations"]["destructiveHint"], false,
        "read-only normalises destructive=false"
    );
}

#[test]
fn verify_exit_codes_follow_the_mode() {
    let (code, out, _) = verify(
        example("files-1.0.0.json"),
        example("files-observed.json"),
        "strict",
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["conformant"], true);
    assert_eq!(out["notices"][0]["kind"], "description_changed");
    let drifted = example("files-observed-drifted.json");
    let (code, out, _) = verify(example("files-1.0.0.json"), drifted.clone(), "strict");
    assert_eq!(code, 1);
    let kinds: Vec<&str> = out["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["annotation_not_declared", "undeclared_tool"]);
    assert!(
        out["violations"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v["less_safe"] == true)
    );
    assert_eq!(
        verify(example("files-1.0.0.json"), drifted.clone(), "permissive").0,
        1
    );
    assert_eq!(
        verify(example("files-1.0.0.json"), drifted.clone(), "advisory").0,
        0
    );
    let (code, _, err) = verify(example("files-1.0.0.json"), drifted, "lenient");
    assert_eq!(code, 2);
    assert!(err.contains("--mode"), "{err}");
}

#[test]
fn diff_classifies_an_added_tool_as_escalation() {
    let (code, out, _) = sig(SignatureCommand::Diff(DiffArgs {
        old: example("files-1.0.0.json"),
        new: example("files-1.1.0.json"),
        fail_on: None,
    }));
    assert_eq!(code, 0);
    assert_eq!(out["classification"], "escalation");
    assert_eq!(out["changes"][0]["kind"], "tool_added");
    let (_, back, _) = sig(SignatureCommand::Diff(DiffArgs {
        old: example("files-1.1.0.json"),
        new: example("files-1.0.0.json"),
        fail_on: None,
    }));
    assert_eq!(back["classification"], "reduction");
    let (_, same, _) = sig(SignatureCommand::Diff(DiffArgs {
        old: example("files-1.0.0.json"),
        new: example("files-1.0.0.json"),
        fail_on: None,
    }));
    assert_eq!(same, json!({"classification": "neutral", "changes": []}));
}

/// `diff --fail-on`: CI branches on the exit code instead of parsing JSON.
/// A schema change is `incompatible` (what `verify` blocks is never
/// `neutral`), a description change neutral.
#[test]
fn diff_fail_on_exits_1_at_the_threshold() {
    use pinfold_server::signature_cmd::FailOn;
    let dir = tempfile::tempdir().unwrap();
    let base: Value =
        serde_json::from_slice(&std::fs::read(example("files-1.0.0.json")).unwrap()).unwrap();
    let variant = |name: &str, patch: &dyn Fn(&mut Value)| {
        let mut v = base.clone();
        patch(&mut v);
        let p = dir.path().join(name);
        std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
        p
    };
    let schema = variant("schema.json", &|v| {
        v["signature"]["tools"][0]["inputSchema"]["required"] = json!(["path", "extra"]);
    });
    let words = variant("words.json", &|v| {
        v["signature"]["tools"][0]["description"] = json!("other words");
    });
    let diff = |old: PathBuf, new: PathBuf, fail_on: Option<FailOn>| {
        sig(SignatureCommand::Diff(DiffArgs { old, new, fail_on }))
    };
    let (e, f) = (Some(FailOn::Escalation), Some(FailOn::Change));
    let old = example("files-1.0.0.json");
    // An escalation: both thresholds fail; without --fail-on, 0.
    assert_eq!(diff(old.clone(), example("files-1.1.0.json"), e).0, 1);
    assert_eq!(diff(old.clone(), example("files-1.1.0.json"), f).0, 1);
    assert_eq!(diff(old.clone(), example("files-1.1.0.json"), None).0, 0);
    // A reduction: only `change` fails.
    assert_eq!(diff(example("files-1.1.0.json"), old.clone(), e).0, 0);
    assert_eq!(diff(example("files-1.1.0.json"), old.clone(), f).0, 1);
    // A schema change: incompatible, not neutral.
    let (code, out, _) = diff(old.clone(), schema, f);
    assert_eq!(code, 1);
    assert_eq!(out["classification"], "incompatible");
    assert_eq!(out["changes"][0]["kind"], "input_schema_changed");
    // A description change: neutral, nothing fails.
    let (code, out, _) = diff(old.clone(), words, f);
    assert_eq!((code, out["classification"].clone()), (0, json!("neutral")));
    // Bad input is still 2.
    assert_eq!(diff(old, dir.path().join("missing.json"), e).0, 2);
}

#[test]
fn bad_input_exits_2_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = sig(SignatureCommand::Digest(OneFile {
        file: dir.path().join("missing.json"),
    }));
    assert_eq!(code, 2);
    assert!(err.starts_with("pinfold: cannot read"), "{err}");
    let dup = dir.path().join("dup.json");
    std::fs::write(&dup, r#"{"name":"a.b/c","name":"a.b/d","version":"1.0.0"}"#).unwrap();
    let (code, _, err) = sig(SignatureCommand::Digest(OneFile { file: dup }));
    assert_eq!(code, 2);
    assert!(err.contains("duplicate key"), "{err}");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"name":"nope","version":"latest"}"#).unwrap();
    let (code, out, err) = sig(SignatureCommand::Digest(OneFile { file: bad }));
    assert_eq!(code, 2);
    let pointers: Vec<&str> = out["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["pointer"].as_str().unwrap())
        .collect();
    assert_eq!(pointers, ["/name", "/version"]);
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// A card whose signature is the GitHub MCP server's 117 published tools.
fn github_card(realdata: &Path) -> Value {
    let mut tools = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(realdata.join("github-toolsnaps"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut seen = std::collections::BTreeSet::new();
    for f in files {
        let tool: Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
        // Feature-flag variants repeat a tool name; a signature lists each name once.
        if seen.insert(tool["name"].as_str().unwrap().to_owned()) {
            tools.push(tool);
        }
    }
    json!({
        "name": "io.github.github/github-mcp-server",
        "version": "0.30.0",
        "description": "GitHub's official MCP server",
        "signature": {"tools": tools, "prompts": [], "resources": [], "resourceTemplates": []}
    })
}

#[test]
fn the_github_toolset_round_trips_through_the_cli() {
    let Some(realdata) = pinfold_tests::realdata() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let card = github_card(&realdata);
    let card_file = dir.path().join("github.json");
    std::fs::write(&card_file, serde_json::to_vec_pretty(&card).unwrap()).unwrap();
    let (code, digest, err) = sig(SignatureCommand::Digest(OneFile {
        file: card_file.clone(),
    }));
    assert_eq!(code, 0, "{err} {digest}");
    let (code, reduced, _) = sig(SignatureCommand::Reduce(OneFile {
        file: card_file.clone(),
    }));
    assert_eq!(code, 0);
    assert!(reduced["tools"].as_array().unwrap().len() >= 100);
    // The reduced view is exactly what a conformant server would list.
    let observed = dir.path().join("observed.json");
    std::fs::write(&observed, serde_json::to_vec(&reduced).unwrap()).unwrap();
    let (code, report, _) = verify(card_file.clone(), observed.clone(), "strict");
    assert_eq!(code, 0, "{report}");
    // Flip one read-only tool to destructive: a less-safe violation.
    let mut mutated = reduced.clone();
    let tool = mutated["tools"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|t| t["annotations"]["readOnlyHint"] == true)
        .unwrap();
    tool["annotations"]["readOnlyHint"] = json!(false);
    tool["annotations"]["destructiveHint"] = json!(true);
    let name = tool["name"].clone();
    std::fs::write(&observed, serde_json::to_vec(&mutated).unwrap()).unwrap();
    let (code, report, _) = verify(card_file.clone(), observed, "strict");
    assert_eq!(code, 1);
    assert_eq!(report["violations"][0]["kind"], "annotation_not_declared");
    assert_eq!(report["violations"][0]["name"], name);
    assert_eq!(report["violations"][0]["less_safe"], true);
    // Reordering keys and whitespace does not move the digest.
    let compact = dir.path().join("compact.json");
    std::fs::write(&compact, serde_json::to_vec(&card).unwrap()).unwrap();
    let (_, digest2, _) = sig(SignatureCommand::Digest(OneFile { file: compact }));
    assert_eq!(digest["digest"], digest2["digest"]);
}
