//! The registry on data published by others: the GitHub MCP server's tools,
//! live captures of reference servers, and the official registry's seed.

use std::path::Path;

use pinfold_tests::*;
use serde_json::{Map, Value, json};

fn github_tools(realdata: &Path) -> Vec<Value> {
    let mut files: Vec<_> = std::fs::read_dir(realdata.join("github-toolsnaps"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap())
        .collect()
}

/// Our own reading of the normalisation rule (docs/SEMANTICS.md,
/// "Normalisation"), written independently of pinfold-core as an oracle.
fn expected_hints(annotations: Option<&Value>) -> (bool, bool, bool, bool) {
    let get = |k: &str, default: bool| {
        annotations
            .and_then(|a| a.get(k))
            .and_then(Value::as_bool)
            .unwrap_or(default)
    };
    let read_only = get("readOnlyHint", false);
    let destructive = if read_only {
        false
    } else {
        get("destructiveHint", true)
    };
    let idempotent = if read_only {
        true
    } else {
        get("idempotentHint", false)
    };
    (
        read_only,
        destructive,
        idempotent,
        get("openWorldHint", true),
    )
}

#[tokio::test]
async fn the_github_toolset_publishes_and_its_tools_view_matches() {
    let Some(realdata) = realdata() else { return };
    let app = TestApp::new().await;
    let tools = github_tools(&realdata);
    assert_eq!(tools.len(), 117);
    let doc = json!({
        "name": "io.github.github/github-mcp-server", "version": "0.30.0",
        "description": "GitHub's official MCP server",
        "signature": {"tools": tools, "prompts": [], "resources": [], "resourceTemplates": []}
    });
    let path = format!(
        "/v1/tenants/{}/servers/io.github.github%2Fgithub-mcp-server/versions/0.30.0",
        app.tenant
    );
    let pubr = app
        .send(
            "PUT",
            &path,
            Some(&app.as_roles("ci", &["publisher"])),
            Some(doc.clone()),
        )
        .await;
    assert_eq!(pubr.status, 201, "{}", String::from_utf8_lossy(&pubr.bytes));
    let view = app.get(&format!("{path}/tools"), &app.admin()).await.json();
    let listed = view["tools"].as_array().unwrap();
    assert_eq!(listed.len(), 117);
    for original in &tools {
        let name = original["name"].as_str().unwrap();
        let shown = listed
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing"));
        let a = &shown["annotations"];
        let got = (
            a["readOnlyHint"].as_bool().unwrap(),
            a["destructiveHint"].as_bool().unwrap(),
            a["idempotentHint"].as_bool().unwrap(),
            a["openWorldHint"].as_bool().unwrap(),
        );
        assert_eq!(got, expected_hints(original.get("annotations")), "{name}");
        assert_eq!(shown["inputSchema"], original["inputSchema"], "{name}");
        if let Some(title) = original.get("annotations").and_then(|a| a.get("title")) {
            assert_eq!(
                &a["title"], title,
                "{name}: unknown and display fields survive"
            );
        }
    }
    // What the server itself lists verifies conformant under strict...
    let verify = format!("{path}/verify?mode=strict");
    let r = app
        .send(
            "POST",
            &verify,
            Some(&app.admin()),
            Some(json!({"tools": tools})),
        )
        .await
        .json();
    assert_eq!(r["conformant"], true, "{r}");
    // ...and a copy where one read-only tool became destructive does not.
    let mut mutated = tools.clone();
    let victim = mutated
        .iter_mut()
        .find(|t| t["annotations"]["readOnlyHint"] == true)
        .unwrap();
    victim["annotations"]["readOnlyHint"] = json!(false);
    victim["annotations"]["destructiveHint"] = json!(true);
    let victim_name = victim["name"].clone();
    let r = app
        .send(
            "POST",
            &verify,
            Some(&app.admin()),
            Some(json!({"tools": mutated})),
        )
        .await
        .json();
    assert_eq!(r["conformant"], false);
    assert_eq!(r["blocking"], true);
    assert_eq!(r["violations"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["violations"][0]["name"], victim_name);
    assert_eq!(r["violations"][0]["less_safe"], true);
}

#[tokio::test]
async fn live_server_captures_publish_and_verify_their_own_lists() {
    let Some(realdata) = realdata() else { return };
    let app = TestApp::new().await;
    let mut files: Vec<_> = std::fs::read_dir(realdata.join("servers"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('_'))
        .collect();
    files.sort();
    assert_eq!(files.len(), 9);
    for f in files {
        let capture: Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
        let stem = f.file_stem().unwrap().to_string_lossy().replace("__", "-");
        let name = format!("io.github.captures/{stem}");
        let mut sig = Map::new();
        for k in ["tools", "prompts", "resources", "resourceTemplates"] {
            sig.insert(k.into(), capture.get(k).cloned().unwrap_or(json!([])));
        }
        let doc =
            json!({"name": name, "version": "1.0.0", "description": "captured", "signature": sig});
        let path = format!(
            "/v1/tenants/{}/servers/{}/versions/1.0.0",
            app.tenant,
            name.replace('/', "%2F")
        );
        let r = app
            .send(
                "PUT",
                &path,
                Some(&app.as_roles("ci", &["publisher"])),
                Some(doc),
            )
            .await;
        assert_eq!(
            r.status,
            201,
            "{stem}: {}",
            String::from_utf8_lossy(&r.bytes)
        );
        let mut observed = Map::new();
        for k in ["tools", "prompts", "resources", "resourceTemplates"] {
            if let Some(v) = capture.get(k) {
                observed.insert(k.into(), v.clone());
            }
        }
        let report = app
            .send(
                "POST",
                &format!("{path}/verify?mode=strict"),
                Some(&app.admin()),
                Some(Value::Object(observed.clone())),
            )
            .await
            .json();
        assert_eq!(report["conformant"], true, "{stem}: {report}");
        // An extra tool the signature never declared is a less-safe violation.
        let mut extra = observed.clone();
        extra["tools"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "exfiltrate", "inputSchema": {"type": "object"}}));
        let report = app
            .send(
                "POST",
                &format!("{path}/verify?mode=strict"),
                Some(&app.admin()),
                Some(Value::Object(extra)),
            )
            .await
            .json();
        assert_eq!(report["violations"][0]["kind"], "undeclared_tool", "{stem}");
        assert_eq!(report["violations"][0]["less_safe"], true);
    }
}

#[tokio::test]
async fn the_official_registry_seed_imports_or_fails_with_pointers() {
    let Some(realdata) = realdata() else { return };
    let app = TestApp::new().await;
    let seed: Vec<Value> = serde_json::from_slice(
        &std::fs::read(realdata.join("registry/seed/seed_2025-09-29_b21c6f5.json")).unwrap(),
    )
    .unwrap();
    let validation: Value = serde_json::from_slice(
        &std::fs::read(realdata.join("registry/seed/_validation.json")).unwrap(),
    )
    .unwrap();
    let expected = &validation["seed/seed_2025-09-29_b21c6f5.json"];
    assert_eq!(seed.len(), 358);
    let path = format!("/v1/tenants/{}/import/server-json", app.tenant);
    let token = app.as_roles("importer", &["publisher"]);
    let (mut imported, mut refused) = (0, 0);
    for (i, entry) in seed.iter().enumerate() {
        let r = app
            .send("POST", &path, Some(&token), Some(entry.clone()))
            .await;
        let schema_valid = expected["entries"][i]["valid"].as_bool().unwrap();
        match r.status.as_u16() {
            201 => {
                imported += 1;
                assert!(
                    schema_valid,
                    "entry {i} violates its schema but was imported"
                );
            }
            422 => {
                refused += 1;
                let body = r.json();
                let pointers: Vec<&str> = body["errors"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e["pointer"].as_str().unwrap())
                    .collect();
                assert!(
                    !schema_valid,
                    "entry {i} is schema-valid but was refused: {body}"
                );
                assert_eq!(
                    pointers,
                    ["/description"],
                    "entry {i}: the seed's errors are all about the description"
                );
            }
            s => panic!(
                "entry {i}: unexpected status {s}: {}",
                String::from_utf8_lossy(&r.bytes)
            ),
        }
    }
    println!("official registry seed: {imported} imported, {refused} refused with pointers");
    assert_eq!(imported, expected["valid"].as_u64().unwrap() as usize);
    assert_eq!(refused, expected["invalid"].as_u64().unwrap() as usize);
    // The current-format entries import too.
    let current: Vec<Value> = serde_json::from_slice(
        &std::fs::read(realdata.join("registry/seed/seed_current_29e32c39.json")).unwrap(),
    )
    .unwrap();
    for entry in current {
        let r = app.send("POST", &path, Some(&token), Some(entry)).await;
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    }
}
