//! The GitHub MCP server's real tool list as a signed card (shared by the
//! render tests and the benchmark): the 117 tool definitions the server
//! publishes plus the 4 its documentation lists without one (121 tools),
//! each with the OAuth scopes its documentation names as `securitySchemes`;
//! and a modified copy of it that a reviewer would have to catch.
//!
//! Read from `$PINFOLD_REALDATA` or `../../../shared/realdata` (relative to
//! this crate); absent, the callers print a notice and skip.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// The real-data directory, when present.
pub fn realdata() -> Option<PathBuf> {
    let p = std::env::var_os("PINFOLD_REALDATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/realdata"));
    if p.join("github-toolsnaps").is_dir() {
        Some(p)
    } else {
        eprintln!(
            "notice: realdata not found at {}; skipping the GitHub tool-list checks",
            p.display()
        );
        None
    }
}

fn read(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// The card of the GitHub MCP server with its 121 tools.
pub fn github_card(realdata: &Path) -> Value {
    let mut files: Vec<_> = std::fs::read_dir(realdata.join("github-toolsnaps"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let scopes = read(&realdata.join("github-scopes.json"));
    let details = scopes["details"].as_object().unwrap().clone();
    let mut tools: Vec<Value> = files.iter().map(|f| read(f)).collect();
    let known: Vec<String> = tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    for (name, d) in &details {
        if !known.contains(name) {
            tools.push(json!({"name": name, "description": d["title"],
                "inputSchema": {"type": "object"}}));
        }
    }
    for t in &mut tools {
        let name = t["name"].as_str().unwrap().to_owned();
        let Some(d) = details.get(&name) else {
            continue;
        };
        let accepted: Vec<Value> = d["accepted"].as_array().cloned().unwrap_or_default();
        let schemes = match d["requirement"].as_str().unwrap() {
            "none" => json!([{"type": "noauth"}]),
            "any_of" => Value::Array(
                accepted
                    .iter()
                    .map(|s| json!({"type": "oauth2", "scopes": [s]}))
                    .collect(),
            ),
            _ => json!([{"type": "oauth2", "scopes": accepted}]),
        };
        t["securitySchemes"] = schemes;
    }
    json!({
        "name": "io.github.github/github-mcp-server", "version": "0.30.0",
        "description": "GitHub's official MCP server",
        "signature": {"tools": tools, "prompts": [], "resources": [], "resourceTemplates": []}
    })
}

/// A modified copy a reviewer must catch: five read-only tools may now
/// write, two tools removed and two added (one destructive), a property and
/// an enum value added to a schema, three descriptions reworded, a scope
/// added to a tool's envelope.
pub fn modified(card: &Value) -> Value {
    let mut next = card.clone();
    next["version"] = json!("0.31.0");
    let tools = next["signature"]["tools"].as_array_mut().unwrap();
    let mut flipped = 0;
    for t in tools.iter_mut() {
        if flipped < 5 && t["annotations"]["readOnlyHint"] == json!(true) {
            t["annotations"] = json!([t["annotations"].clone(),
                {"readOnlyHint": false, "destructiveHint": true, "openWorldHint": true}]);
            flipped += 1;
        }
    }
    tools.truncate(tools.len() - 2);
    for (i, t) in tools.iter_mut().enumerate().take(3) {
        t["description"] = json!(format!("Reworded description {i}."));
    }
    if let Some(t) = tools
        .iter_mut()
        .find(|t| t["inputSchema"]["properties"].is_object())
    {
        t["inputSchema"]["properties"]["force"] = json!({"type": "boolean"});
        let props = t["inputSchema"]["properties"].as_object_mut().unwrap();
        if let Some(p) = props.values_mut().find(|p| p["enum"].is_array()) {
            p["enum"].as_array_mut().unwrap().push(json!("everything"));
        }
    }
    if let Some(t) = tools
        .iter_mut()
        .find(|t| t["securitySchemes"][0]["type"] == json!("oauth2"))
    {
        t["securitySchemes"][0]["scopes"]
            .as_array_mut()
            .unwrap()
            .push(json!("admin:org"));
    }
    tools.push(
        json!({"name": "purge_repository", "description": "Deletes <b>every</b> branch",
        "inputSchema": {"type": "object", "properties": {"repo": {"type": "string"}}},
        "annotations": {"readOnlyHint": false, "destructiveHint": true},
        "securitySchemes": [{"type": "oauth2", "scopes": ["delete_repo"]}]}),
    );
    tools.push(json!({"name": "list_secrets", "description": "Lists secrets",
        "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true, "openWorldHint": false}}));
    next
}
