//! The resolve cache end to end, on both databases: Pinfold's HTTP API, the
//! reference upstream (an rmcp MCP server) over real HTTP, and the checks
//! against the published signature.

use std::sync::Arc;
use std::time::Duration;

use pinfold_example_upstream::{Running, Switches};
use pinfold_tests::*;
use serde_json::{Value, json};

use crate::manage_files::{publish, server, upstream};

fn client(app: &TestApp) -> String {
    app.as_roles("carl-client", &["client"])
}

/// Sets the tenant's mode and the server's cache policy.
async fn set_policy(app: &TestApp, mode: &str, cache: &str) {
    app.put_policy(&json!({"enforcement_mode": mode, "approval_required": true,
        "overrides": {"servers": {server(): {"resolve_cache": cache}}}}))
        .await;
}

/// Opens a session on `up` and returns its path.
async fn session(app: &TestApp, up: &Running) -> String {
    let r = app
        .send(
            "POST",
            &format!("/v1/tenants/{}/sessions", app.tenant),
            Some(&client(app)),
            Some(json!({"server": server(), "upstream": {"url": up.url(),
                "headers": {"X-Upstream-Key": "k-123"}}})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    format!(
        "/v1/tenants/{}/sessions/{}",
        app.tenant,
        r.json()["id"].as_str().unwrap()
    )
}

async fn resolve(app: &TestApp, session: &str, name: &str, arguments: Value) -> Resp {
    app.send(
        "POST",
        &format!("{session}/resolve"),
        Some(&client(app)),
        Some(json!({"name": name, "arguments": arguments})),
    )
    .await
}

async fn resolved(app: &TestApp, session: &str, name: &str, arguments: Value) -> Value {
    let r = resolve(app, session, name, arguments).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    r.json()
}

async fn audit_kinds(app: &TestApp) -> Vec<String> {
    let a = app
        .get(
            &format!("/v1/tenants/{}/audit?limit=100", app.tenant),
            &app.admin(),
        )
        .await
        .json();
    a["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn read_and_delete_resolve_and_a_repeat_is_a_cache_hit() {
    let app = TestApp::new().await;
    publish(&app).await;
    let up = upstream(Switches::default()).await;
    let s = session(&app, &up).await;
    let read = resolved(
        &app,
        &s,
        "manage_files",
        json!({"path": "/notes.txt", "action": "read"}),
    )
    .await;
    assert_eq!(read["source"], "upstream");
    assert_eq!(read["conformant"], true);
    assert_eq!(read["tool"]["name"], "manage_files");
    assert_eq!(read["tool"]["annotations"]["readOnlyHint"], true);
    assert!(read["tool"]["inputSchema"].is_object(), "a complete tool");
    let del = resolved(
        &app,
        &s,
        "manage_files",
        json!({"path": "/notes.txt", "action": "delete"}),
    )
    .await;
    assert_eq!(del["tool"]["annotations"]["destructiveHint"], true);
    assert_eq!(del["tool"]["annotations"]["readOnlyHint"], false);
    let calls = up.calls();
    // The same arguments with the keys in another order: the same key.
    let again = resolved(
        &app,
        &s,
        "manage_files",
        json!({"action": "read", "path": "/notes.txt"}),
    )
    .await;
    assert_eq!(again["source"], "cache");
    assert_eq!(again["tool"], read["tool"]);
    assert_eq!(up.calls(), calls, "a hit does not reach the upstream");
    // tools/annotations for a dynamicAnnotations tool: the declared tool with
    // the resolved annotations.
    let dynamic = resolved(
        &app,
        &s,
        "manage_files_dynamic",
        json!({"path": "/a", "action": "read"}),
    )
    .await;
    assert_eq!(dynamic["source"], "upstream");
    assert_eq!(dynamic["tool"]["annotations"]["readOnlyHint"], true);
    assert!(dynamic["tool"]["inputSchema"].is_object());
    assert!(app.metric("pinfold_resolve_hits_total").await >= 1.0);
    assert!(app.metric("pinfold_resolve_cache_entries").await >= 1.0);
}

#[tokio::test]
async fn undeclared_tools_bad_arguments_and_static_tools() {
    let app = TestApp::new().await;
    publish(&app).await;
    let up = upstream(Switches::default()).await;
    let s = session(&app, &up).await;
    resolve(&app, &s, "rm_rf", json!({}))
        .await
        .problem(404, "tool_not_declared");
    let r = resolve(
        &app,
        &s,
        "manage_files",
        json!({"path": 7, "action": "burn"}),
    )
    .await;
    let p = r.problem(422, "validation_failed");
    let pointers: Vec<&str> = p["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["pointer"].as_str().unwrap())
        .collect();
    assert!(
        pointers.iter().any(|p| p.starts_with("/arguments")),
        "{pointers:?}"
    );
    // Not an object, and malformed bodies.
    resolve(&app, &s, "manage_files", json!([1]))
        .await
        .problem(422, "validation_failed");
    app.send_raw(
        "POST",
        &format!("{s}/resolve"),
        Some(&client(&app)),
        Some(b"{\"name\":"),
        &[],
    )
    .await
    .problem(400, "malformed_json");
    app.send(
        "POST",
        &format!("{s}/resolve"),
        Some(&client(&app)),
        Some(json!({"name": "manage_files", "arguments": {}, "extra": true})),
    )
    .await
    .problem(422, "validation_failed");
    // A tool that neither resolves nor has dynamic annotations: its declared
    // worst case, without an upstream call.
    let before = up.calls();
    let r = resolved(&app, &s, "list_files", json!({"dir": "/"})).await;
    assert_eq!(r["source"], "static");
    assert_eq!(up.calls(), before);
    // Roles and callers.
    app.send(
        "POST",
        &format!("{s}/resolve"),
        Some(&app.as_roles("rea", &["reader"])),
        Some(json!({"name": "list_files", "arguments": {"dir": "/"}})),
    )
    .await
    .problem(403, "forbidden_role");
    app.send(
        "POST",
        &format!("{s}/resolve"),
        Some(&app.as_roles("eve", &["client"])),
        Some(json!({"name": "list_files", "arguments": {"dir": "/"}})),
    )
    .await
    .problem(404, "session_not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_identical_misses_make_one_upstream_call() {
    let app = Arc::new(TestApp::new().await);
    publish(&app).await;
    let up = upstream(Switches {
        delay: Duration::from_millis(300),
        ..Switches::default()
    })
    .await;
    let s = session(&app, &up).await;
    // Warm the upstream connection (initialize) with another key.
    resolved(
        &app,
        &s,
        "manage_files",
        json!({"path": "/w", "action": "read"}),
    )
    .await;
    let before = up.calls();
    let mut tasks = Vec::new();
    for _ in 0..100 {
        let (app, s) = (app.clone(), s.clone());
        tasks.push(tokio::spawn(async move {
            resolved(
                &app,
                &s,
                "manage_files",
                json!({"path": "/x", "action": "append"}),
            )
            .await
        }));
    }
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    assert_eq!(up.calls() - before, 1, "one upstream call for 100 misses");
    assert!(answers.iter().all(|a| a["tool"] == answers[0]["tool"]));
    assert!(answers.iter().all(|a| a["source"] != "fallback"));
}

#[tokio::test]
async fn strict_refuses_an_undeclared_annotation_and_permissive_flags_it() {
    for (mode, source, conformant) in [
        ("permissive", "upstream", false),
        ("advisory", "upstream", false),
        ("strict", "fallback", false),
    ] {
        let app = TestApp::new().await;
        publish(&app).await;
        set_policy(&app, mode, "session").await;
        let up = upstream(Switches {
            undeclared: true,
            ..Switches::default()
        })
        .await;
        let s = session(&app, &up).await;
        let r = resolved(
            &app,
            &s,
            "manage_files",
            json!({"path": "/a", "action": "read"}),
        )
        .await;
        assert_eq!(r["source"], source, "{mode}: {r}");
        assert_eq!(r["conformant"], conformant, "{mode}");
        assert!(!r["violations"].as_array().unwrap().is_empty(), "{mode}");
        if mode == "strict" {
            // The worst case is served, and the refusal is on record.
            assert_eq!(r["tool"]["annotations"]["destructiveHint"], true);
            assert!(r["reason"].is_string());
            assert!(
                audit_kinds(&app)
                    .await
                    .contains(&"resolve.refused".to_owned())
            );
        } else {
            assert_eq!(r["tool"]["annotations"]["readOnlyHint"], true);
        }
    }
}

#[tokio::test]
async fn a_stopped_upstream_falls_back_and_recovery_follows() {
    let app = TestApp::new().await;
    publish(&app).await;
    let up = upstream(Switches::default()).await;
    let s = session(&app, &up).await;
    up.stop().await;
    let args = json!({"path": "/r", "action": "read"});
    let r = resolved(&app, &s, "manage_files", args.clone()).await;
    assert_eq!(r["source"], "fallback");
    assert!(r["reason"].is_string());
    assert_eq!(
        r["tool"]["annotations"]["destructiveHint"], true,
        "worst case"
    );
    assert!(app.metric("pinfold_resolve_upstream_calls_total").await >= 0.0);
    up.restart().await.unwrap();
    // Errors are never cached: the same call now reaches the upstream.
    let mut recovered = Value::Null;
    for _ in 0..3 {
        recovered = resolved(&app, &s, "manage_files", args.clone()).await;
        if recovered["source"] == "upstream" {
            break;
        }
    }
    assert_eq!(recovered["source"], "upstream", "{recovered}");
    assert_eq!(recovered["tool"]["annotations"]["readOnlyHint"], true);
}

#[tokio::test]
async fn with_resolve_cache_none_every_call_goes_upstream_and_nondeterminism_is_recorded() {
    let app = TestApp::new().await;
    publish(&app).await;
    set_policy(&app, "permissive", "none").await;
    let up = upstream(Switches {
        nondeterministic: true,
        ..Switches::default()
    })
    .await;
    let s = session(&app, &up).await;
    let args = json!({"path": "/n", "action": "read"});
    let first = resolved(&app, &s, "manage_files", args.clone()).await;
    let calls = up.calls();
    let second = resolved(&app, &s, "manage_files", args.clone()).await;
    assert_eq!(first["source"], "upstream");
    assert_eq!(second["source"], "upstream");
    assert_eq!(up.calls(), calls + 1, "no reuse under resolve_cache: none");
    assert!(
        audit_kinds(&app)
            .await
            .contains(&"resolve.nondeterministic".to_owned()),
        "the changed answer is on record"
    );
    assert!(
        app.metric("pinfold_resolve_violations_total{kind=\"determinism\"}")
            .await
            >= 1.0
    );
}

#[tokio::test]
async fn closing_a_session_drops_its_entries() {
    let app = TestApp::new().await;
    publish(&app).await;
    let up = upstream(Switches::default()).await;
    let s = session(&app, &up).await;
    resolved(
        &app,
        &s,
        "manage_files",
        json!({"path": "/d", "action": "read"}),
    )
    .await;
    assert!(app.metric("pinfold_resolve_cache_entries").await >= 1.0);
    assert_eq!(
        app.send("DELETE", &s, Some(&client(&app)), None)
            .await
            .status,
        204
    );
    resolve(
        &app,
        &s,
        "manage_files",
        json!({"path": "/d", "action": "read"}),
    )
    .await
    .problem(404, "session_not_found");
    // Its entries are gone at once (no other session holds any).
    let entries = app.metric("pinfold_resolve_cache_entries").await;
    assert_eq!(entries, 0.0);
}

#[tokio::test]
async fn batches_answer_in_order_with_errors_in_place() {
    let app = TestApp::new().await;
    publish(&app).await;
    let up = upstream(Switches::default()).await;
    let s = session(&app, &up).await;
    let r = app
        .send(
            "POST",
            &format!("{s}/resolve/batch"),
            Some(&client(&app)),
            Some(json!({"calls": [
                {"name": "manage_files", "arguments": {"path": "/a", "action": "read"}},
                {"name": "nope", "arguments": {}},
                {"name": "manage_files", "arguments": {"path": "/a", "action": "delete"}},
                {"name": "list_files", "arguments": {"dir": "/"}},
            ]})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    let results = r.json()["results"].as_array().unwrap().clone();
    assert_eq!(results.len(), 4);
    assert_eq!(results[0]["tool"]["annotations"]["readOnlyHint"], true);
    assert_eq!(results[1]["error"]["code"], "tool_not_declared");
    assert_eq!(results[2]["tool"]["annotations"]["destructiveHint"], true);
    assert_eq!(results[3]["source"], "static");
    let calls: Vec<Value> = (0..101)
        .map(|i| json!({"name": "list_files", "arguments": {"dir": format!("/{i}")}}))
        .collect();
    app.send(
        "POST",
        &format!("{s}/resolve/batch"),
        Some(&client(&app)),
        Some(json!({"calls": calls})),
    )
    .await
    .problem(422, "validation_failed");
    app.send(
        "POST",
        &format!("{s}/resolve/batch"),
        Some(&client(&app)),
        Some(json!({"calls": []})),
    )
    .await
    .problem(422, "validation_failed");
}

#[tokio::test]
async fn revocation_ends_resolution() {
    let app = TestApp::new().await;
    publish(&app).await;
    let up = upstream(Switches::default()).await;
    let s = session(&app, &up).await;
    resolved(
        &app,
        &s,
        "manage_files",
        json!({"path": "/a", "action": "read"}),
    )
    .await;
    let r = app
        .send(
            "POST",
            &format!(
                "/v1/tenants/{}/servers/{}/versions/1.0.0/status",
                app.tenant,
                server().replace('/', "%2F")
            ),
            Some(&app.admin()),
            Some(json!({"status": "revoked", "reason": "compromised"})),
        )
        .await;
    assert_eq!(r.status, 200);
    resolve(
        &app,
        &s,
        "manage_files",
        json!({"path": "/a", "action": "read"}),
    )
    .await
    .problem(410, "version_revoked");
}

#[tokio::test]
async fn a_session_opened_on_one_replica_resolves_on_another() {
    if backend() == Backend::Sqlite {
        eprintln!("notice: replicas need PostgreSQL; SQLite runs as one process");
        return;
    }
    let a = TestApp::new().await;
    publish(&a).await;
    let b = a.replica().await;
    let up = upstream(Switches::default()).await;
    let s = session(&a, &up).await;
    // B has never seen the session: it loads the row, opens the sealed
    // headers with the shared key, and resolves.
    let r = resolved(
        &b,
        &s,
        "manage_files",
        json!({"path": "/a", "action": "read"}),
    )
    .await;
    assert_eq!(r["source"], "upstream");
    assert_eq!(r["tool"]["annotations"]["readOnlyHint"], true);
}

/// A policy tightened while a session is open reaches it on its next
/// resolve: the session opened permissive, with an upstream that answers
/// an undeclared annotation; after the tenant turns `strict`, the very next
/// resolve (a cached answer) is refused and the worst case served, and the
/// session's read shows the mode it now runs under. `resolve_cache: none`
/// applies at once too (the next call goes upstream, not to the cache);
/// a session opened under strict stays strict when the policy loosens.
#[tokio::test]
async fn a_tightened_policy_reaches_a_live_session_at_its_next_resolve() {
    let app = TestApp::new().await;
    publish(&app).await;
    set_policy(&app, "permissive", "session").await;
    let up = upstream(Switches {
        undeclared: true,
        ..Switches::default()
    })
    .await;
    let s = session(&app, &up).await;
    let read = json!({"path": "/a", "action": "read"});
    let r = resolved(&app, &s, "manage_files", read.clone()).await;
    assert_eq!(r["source"], "upstream", "{r}");
    assert_eq!(r["tool"]["annotations"]["openWorldHint"], true);
    let r = resolved(&app, &s, "manage_files", read.clone()).await;
    assert_eq!(
        r["source"], "cache",
        "served permissively from the cache: {r}"
    );
    let view = app.get(&s, &client(&app)).await.json();
    assert_eq!(view["mode"], "permissive");
    assert_eq!(view["effective_mode"], "permissive");

    set_policy(&app, "strict", "session").await;
    let r = resolved(&app, &s, "manage_files", read.clone()).await;
    assert_eq!(r["source"], "fallback", "strict at once: {r}");
    assert_eq!(r["reason"], "refused_strict");
    assert_eq!(r["tool"]["annotations"]["destructiveHint"], true);
    let view = app.get(&s, &client(&app)).await.json();
    assert_eq!(view["mode"], "permissive", "the mode it opened with");
    assert_eq!(view["effective_mode"], "strict", "{view}");

    // resolve_cache: none at once: the answer comes from the upstream again
    // (and is refused there under strict).
    let calls = up.calls();
    set_policy(&app, "strict", "none").await;
    let r = resolved(&app, &s, "manage_files", read.clone()).await;
    assert_eq!(r["source"], "fallback", "{r}");
    assert_eq!(up.calls(), calls + 1, "went upstream, not to the cache");
    let view = app.get(&s, &client(&app)).await.json();
    assert_eq!(view["effective_resolve_cache"], "none", "{view}");

    // Loosening applies to new sessions only: a session opened under
    // strict stays strict after the policy loosens.
    set_policy(&app, "strict", "session").await;
    let strict_session = session(&app, &up).await;
    set_policy(&app, "permissive", "session").await;
    let r = resolved(&app, &strict_session, "manage_files", read.clone()).await;
    assert_eq!(r["source"], "fallback", "opened strict, stays strict: {r}");
    let view = app.get(&strict_session, &client(&app)).await.json();
    assert_eq!(view["effective_mode"], "strict", "{view}");
}
