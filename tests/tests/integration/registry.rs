//! The registry on both databases: publish, immutability, review and
//! lifecycle, conditional reads, views, diff, verify, attestations, import.

use std::sync::Arc;

use pinfold_tests::*;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

const SERVER: &str = "io.github.acme/files";

fn enc(server: &str) -> String {
    server.replace('/', "%2F")
}

fn vpath(app: &TestApp, server: &str, version: &str) -> String {
    format!(
        "/v1/tenants/{}/servers/{}/versions/{version}",
        app.tenant,
        enc(server)
    )
}

fn card(server: &str, version: &str, tools: Value) -> Value {
    json!({
        "name": server,
        "version": version,
        "title": "Acme Files",
        "description": "Files in an Acme workspace",
        "signature": {"tools": tools, "prompts": [], "resources": [], "resourceTemplates": []}
    })
}

fn read_tool() -> Value {
    json!({"name": "read_file", "description": "Read a file",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        "annotations": {"readOnlyHint": true, "openWorldHint": false}})
}

fn manage_tool() -> Value {
    json!({"name": "manage_file", "description": "Copy or delete",
        "inputSchema": {"type": "object", "properties": {"action": {"enum": ["copy", "delete"]}}},
        "annotations": [{"readOnlyHint": false, "destructiveHint": false, "openWorldHint": false},
                        {"readOnlyHint": false, "destructiveHint": true, "openWorldHint": false}],
        "securitySchemes": [{"type": "oauth2", "scopes": ["files:write"]}]})
}

fn publisher(app: &TestApp) -> String {
    app.as_roles("paula-publisher", &["publisher"])
}

fn reviewer(app: &TestApp) -> String {
    app.as_roles("rick-reviewer", &["reviewer"])
}

async fn publish(app: &TestApp, token: &str, doc: &Value) -> Resp {
    let server = doc["name"].as_str().unwrap();
    let version = doc["version"].as_str().unwrap();
    app.send(
        "PUT",
        &vpath(app, server, version),
        Some(token),
        Some(doc.clone()),
    )
    .await
}

async fn approve(app: &TestApp, server: &str, version: &str) -> Resp {
    app.send(
        "POST",
        &format!("{}/review", vpath(app, server, version)),
        Some(&reviewer(app)),
        Some(json!({"decision": "approve", "note": "looks right"})),
    )
    .await
}

#[tokio::test]
async fn publish_then_republish_identical_is_200_with_the_same_body() {
    let app = TestApp::new().await;
    let doc = card(SERVER, "1.0.0", json!([read_tool(), manage_tool()]));
    let r = publish(&app, &publisher(&app), &doc).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    let first = r.json();
    assert_eq!(first["status"], "pending", "new tenants require approval");
    assert_eq!(first["published_by"], "paula-publisher");
    assert_eq!(first["digest"], pinfold_core::digest::digest(&doc));
    assert_eq!(first["card"], doc);
    assert_eq!(
        r.header("location").unwrap(),
        format!(
            "/v1/tenants/{}/servers/{}/versions/1.0.0",
            app.tenant,
            enc(SERVER)
        )
    );
    // The same content again, even with other key order and whitespace.
    let spaced = serde_json::to_string_pretty(&doc).unwrap();
    let r2 = app
        .send_raw(
            "PUT",
            &vpath(&app, SERVER, "1.0.0"),
            Some(&publisher(&app)),
            Some(spaced.as_bytes()),
            &[],
        )
        .await;
    assert_eq!(r2.status, 200);
    assert_eq!(r2.bytes, r.bytes, "identical body");
    assert_eq!(r2.header("etag"), r.header("etag"));
}

#[tokio::test]
async fn different_content_for_a_version_is_409_with_both_digests() {
    let app = TestApp::new().await;
    let a = card(SERVER, "1.0.0", json!([read_tool()]));
    let b = card(SERVER, "1.0.0", json!([read_tool(), manage_tool()]));
    assert_eq!(publish(&app, &publisher(&app), &a).await.status, 201);
    let p = publish(&app, &publisher(&app), &b)
        .await
        .problem(409, "version_exists");
    assert_eq!(p["existing_digest"], pinfold_core::digest::digest(&a));
    assert_eq!(p["submitted_digest"], pinfold_core::digest::digest(&b));
    let stored = app
        .get(&vpath(&app, SERVER, "1.0.0"), &app.admin())
        .await
        .json();
    assert_eq!(stored["card"], a, "the original is untouched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_concurrent_conflicting_publishes_have_one_winner() {
    let app = Arc::new(TestApp::new().await);
    let mut tasks = Vec::new();
    for i in 0..20 {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            let mut doc = card(SERVER, "2.0.0", json!([read_tool()]));
            doc["description"] = json!(format!("variant {i}"));
            let r = publish(&app, &publisher(&app), &doc).await;
            (r.status.as_u16(), doc)
        }));
    }
    let mut winners = Vec::new();
    let mut conflicts = 0;
    for t in tasks {
        match t.await.unwrap() {
            (201, doc) => winners.push(doc),
            (409, _) => conflicts += 1,
            (s, _) => panic!("unexpected status {s}"),
        }
    }
    assert_eq!(winners.len(), 1);
    assert_eq!(conflicts, 19);
    let stored = app
        .get(&vpath(&app, SERVER, "2.0.0"), &app.admin())
        .await
        .json();
    assert_eq!(
        stored["card"], winners[0],
        "the stored document is the winner's"
    );
    let audit = app
        .get(
            &format!("/v1/tenants/{}/audit?kind=version.published", app.tenant),
            &app.admin(),
        )
        .await
        .json();
    assert_eq!(
        audit["items"].as_array().unwrap().len(),
        1,
        "losers left no audit event"
    );
}

#[tokio::test]
async fn invalid_documents_are_422_with_every_pointer() {
    let app = TestApp::new().await;
    let mut doc = card(
        SERVER,
        "1.0.0",
        json!([read_tool(), read_tool(), {"name": "bad name!", "inputSchema": {"type": 7}}]),
    );
    doc["version"] = json!("1.0.0");
    let r = publish(&app, &publisher(&app), &doc).await;
    let p = r.problem(422, "validation_failed");
    let pointers: Vec<&str> = p["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["pointer"].as_str().unwrap())
        .collect();
    assert!(
        pointers.contains(&"/signature/tools/1/name"),
        "duplicate name: {pointers:?}"
    );
    assert!(
        pointers.contains(&"/signature/tools/2/name"),
        "bad name: {pointers:?}"
    );
    assert!(
        pointers
            .iter()
            .any(|p| p.starts_with("/signature/tools/2/inputSchema")),
        "{pointers:?}"
    );
    // Path and document must agree.
    let doc = card(SERVER, "1.0.0", json!([read_tool()]));
    let r = app
        .send(
            "PUT",
            &vpath(&app, "io.github.acme/other", "1.0.1"),
            Some(&publisher(&app)),
            Some(doc),
        )
        .await;
    let p = r.problem(422, "validation_failed");
    let pointers: Vec<&str> = p["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["pointer"].as_str().unwrap())
        .collect();
    assert_eq!(pointers, ["/name", "/version"]);
    // `latest` and ranges are not versions.
    let doc = card(SERVER, "latest", json!([]));
    let p = publish(&app, &publisher(&app), &doc)
        .await
        .problem(422, "validation_failed");
    assert_eq!(p["errors"][0]["pointer"], "/version");
    // Nothing was stored.
    let list = app
        .get(&format!("/v1/tenants/{}/servers", app.tenant), &app.admin())
        .await
        .json();
    assert_eq!(list["items"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn malformed_and_oversize_publishes() {
    let app = TestApp::new().await;
    let path = vpath(&app, SERVER, "1.0.0");
    let t = publisher(&app);
    app.send_raw("PUT", &path, Some(&t), Some(b"{\"name\":"), &[])
        .await
        .problem(400, "malformed_json");
    app.send_raw(
        "PUT",
        &path,
        Some(&t),
        Some(br#"{"name":"a.b/c","name":"a.b/d"}"#),
        &[],
    )
    .await
    .problem(400, "duplicate_key");
    let deep = format!("{{\"x\":{}{}}}", "[".repeat(70), "]".repeat(70));
    app.send_raw("PUT", &path, Some(&t), Some(deep.as_bytes()), &[])
        .await
        .problem(400, "too_deep");
    // Over 1 MiB canonical but under the 2 MiB body limit: the document limit.
    let big_desc = "x".repeat(1_100_000);
    let mut doc = card(SERVER, "1.0.0", json!([read_tool()]));
    doc["signature"]["tools"][0]["description"] = json!(big_desc);
    publish(&app, &t, &doc)
        .await
        .problem(413, "document_too_large");
    // Over the body limit.
    let huge = vec![b' '; 3 * 1024 * 1024];
    app.send_raw("PUT", &path, Some(&t), Some(&huge), &[])
        .await
        .problem(413, "body_too_large");
    // Too many tools.
    let tools: Vec<Value> = (0..2001)
        .map(|i| json!({"name": format!("t{i}"), "inputSchema": {"type": "object"}}))
        .collect();
    publish(&app, &t, &card(SERVER, "1.0.0", Value::Array(tools)))
        .await
        .problem(413, "document_too_large");
}

#[tokio::test]
async fn roles_for_publishing_and_reviewing() {
    let app = TestApp::new().await;
    let doc = card(SERVER, "1.0.0", json!([read_tool()]));
    publish(&app, &app.as_roles("r", &["reader"]), &doc)
        .await
        .problem(403, "forbidden_role");
    publish(&app, &app.as_roles("c", &["client"]), &doc)
        .await
        .problem(403, "forbidden_role");
    assert_eq!(publish(&app, &publisher(&app), &doc).await.status, 201);
    let review = format!("{}/review", vpath(&app, SERVER, "1.0.0"));
    app.send(
        "POST",
        &review,
        Some(&publisher(&app)),
        Some(json!({"decision": "approve"})),
    )
    .await
    .problem(403, "forbidden_role");
    // An admin who published cannot approve their own version either.
    let doc2 = card(SERVER, "1.1.0", json!([read_tool()]));
    assert_eq!(publish(&app, &app.admin(), &doc2).await.status, 201);
    let r = app
        .send(
            "POST",
            &format!("{}/review", vpath(&app, SERVER, "1.1.0")),
            Some(&app.admin()),
            Some(json!({"decision": "approve"})),
        )
        .await;
    r.problem(403, "separation_of_duties");
    // A publisher who is also a reviewer cannot approve what they published.
    let both = app.as_roles("paula-publisher", &["publisher", "reviewer"]);
    app.send(
        "POST",
        &review,
        Some(&both),
        Some(json!({"decision": "approve"})),
    )
    .await
    .problem(403, "separation_of_duties");
    // Someone else can.
    let r = approve(&app, SERVER, "1.0.0").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"], "approved");
    assert_eq!(r.json()["approved_by"], "rick-reviewer");
    assert_eq!(r.json()["reviews"][0]["note"], "looks right");
}

#[tokio::test]
async fn review_and_status_bodies_are_checked() {
    let app = TestApp::new().await;
    publish(
        &app,
        &publisher(&app),
        &card(SERVER, "1.0.0", json!([read_tool()])),
    )
    .await;
    let base = vpath(&app, SERVER, "1.0.0");
    let rv = reviewer(&app);
    let r = app
        .send(
            "POST",
            &format!("{base}/review"),
            Some(&rv),
            Some(json!({"decision": "maybe"})),
        )
        .await;
    assert_eq!(
        r.problem(422, "validation_failed")["errors"][0]["pointer"],
        "/decision"
    );
    let r = app
        .send(
            "POST",
            &format!("{base}/review"),
            Some(&rv),
            Some(json!({"decision": "approve", "extra": 1})),
        )
        .await;
    assert_eq!(
        r.problem(422, "validation_failed")["errors"][0]["code"],
        "unknown_field"
    );
    let r = app
        .send(
            "POST",
            &format!("{base}/review"),
            Some(&rv),
            Some(json!({"decision": "approve", "note": "x".repeat(2001)})),
        )
        .await;
    assert_eq!(
        r.problem(422, "validation_failed")["errors"][0]["pointer"],
        "/note"
    );
    let r = app
        .send(
            "POST",
            &format!("{base}/status"),
            Some(&app.admin()),
            Some(json!({"status": "revoked", "reason": "  "})),
        )
        .await;
    assert_eq!(
        r.problem(422, "validation_failed")["errors"][0]["pointer"],
        "/reason"
    );
    let r = app
        .send(
            "POST",
            &format!("{base}/status"),
            Some(&app.admin()),
            Some(json!({"status": "approved", "reason": "no"})),
        )
        .await;
    assert_eq!(
        r.problem(422, "validation_failed")["errors"][0]["pointer"],
        "/status"
    );
    app.send_raw(
        "POST",
        &format!("{base}/review"),
        Some(&rv),
        Some(b"{"),
        &[],
    )
    .await
    .problem(400, "malformed_json");
    let missing = vpath(&app, SERVER, "9.9.9");
    app.send(
        "POST",
        &format!("{missing}/review"),
        Some(&rv),
        Some(json!({"decision": "approve"})),
    )
    .await
    .problem(404, "version_not_found");
    // Nothing changed.
    let rec = app.get(&base, &app.admin()).await.json();
    assert_eq!(rec["status"], "pending");
    assert_eq!(rec["reviews"], json!([]));
}

#[tokio::test]
async fn lifecycle_transitions_and_latest() {
    let app = TestApp::new().await;
    let p = publisher(&app);
    for v in ["1.0.0", "1.1.0", "2.0.0-rc.1"] {
        assert_eq!(
            publish(&app, &p, &card(SERVER, v, json!([read_tool()])))
                .await
                .status,
            201
        );
    }
    let latest = vpath(&app, SERVER, "latest");
    app.get(&latest, &app.admin())
        .await
        .problem(404, "no_trusted_version");
    assert_eq!(approve(&app, SERVER, "2.0.0-rc.1").await.status, 200);
    assert_eq!(
        app.get(&latest, &app.admin()).await.json()["version"],
        "2.0.0-rc.1",
        "only a pre-release is trusted"
    );
    assert_eq!(approve(&app, SERVER, "1.0.0").await.status, 200);
    assert_eq!(
        app.get(&latest, &app.admin()).await.json()["version"],
        "1.0.0",
        "releases win over pre-releases"
    );
    assert_eq!(approve(&app, SERVER, "1.1.0").await.status, 200);
    assert_eq!(
        app.get(&latest, &app.admin()).await.json()["version"],
        "1.1.0"
    );
    // Revoke 1.1.0: latest falls back to 1.0.0.
    let status = |v: &str| format!("{}/status", vpath(&app, SERVER, v));
    let r = app
        .send(
            "POST",
            &status("1.1.0"),
            Some(&app.admin()),
            Some(json!({"status": "revoked", "reason": "bad remote"})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"], "revoked");
    assert_eq!(r.json()["status_reason"], "bad remote");
    assert_eq!(
        r.json()["card"],
        card(SERVER, "1.1.0", json!([read_tool()])),
        "status never touches the document"
    );
    assert_eq!(
        app.get(&latest, &app.admin()).await.json()["version"],
        "1.0.0"
    );
    // Revoked is terminal.
    let r = app
        .send(
            "POST",
            &format!("{}/review", vpath(&app, SERVER, "1.1.0")),
            Some(&reviewer(&app)),
            Some(json!({"decision": "approve"})),
        )
        .await;
    assert_eq!(
        r.problem(409, "invalid_transition")["current_status"],
        "revoked"
    );
    // Deprecate 1.0.0: not latest any more.
    let r = app
        .send(
            "POST",
            &status("1.0.0"),
            Some(&app.admin()),
            Some(json!({"status": "deprecated", "reason": "use 2.x"})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        app.get(&latest, &app.admin()).await.json()["version"],
        "2.0.0-rc.1"
    );
    app.send(
        "POST",
        &status("1.0.0"),
        Some(&app.admin()),
        Some(json!({"status": "deprecated", "reason": "again"})),
    )
    .await
    .problem(409, "invalid_transition");
    // Reject then approve is allowed; approve an approved one is not.
    let summary = app
        .get(
            &format!("/v1/tenants/{}/servers/{}", app.tenant, enc(SERVER)),
            &app.admin(),
        )
        .await
        .json();
    let versions: Vec<(&str, &str)> = summary["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["version"].as_str().unwrap(),
                v["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        versions,
        [
            ("2.0.0-rc.1", "approved"),
            ("1.1.0", "revoked"),
            ("1.0.0", "deprecated")
        ]
    );
    assert_eq!(summary["latest"], "2.0.0-rc.1");
    // Reviews and status changes can't address `latest`.
    app.send(
        "POST",
        &format!("{latest}/review"),
        Some(&reviewer(&app)),
        Some(json!({"decision": "reject"})),
    )
    .await
    .problem(422, "validation_failed");
}

#[tokio::test]
async fn auto_approval_when_the_policy_says_so() {
    let app = TestApp::new().await;
    let r = app
        .send(
            "PUT",
            &format!("/v1/tenants/{}/policy", app.tenant),
            Some(&app.admin()),
            Some(json!({"enforcement_mode": "strict", "approval_required": false})),
        )
        .await;
    assert_eq!(r.status, 200);
    let r = publish(
        &app,
        &publisher(&app),
        &card(SERVER, "1.0.0", json!([read_tool()])),
    )
    .await;
    assert_eq!(r.status, 201);
    let rec = r.json();
    assert_eq!(rec["status"], "approved");
    assert_eq!(
        rec["status_reason"],
        "approved on publish: the tenant policy requires no review"
    );
    assert_eq!(rec["approved_at"], rec["published_at"]);
    assert!(
        rec.get("approved_by").is_none(),
        "nobody reviewed it: {rec}"
    );
    assert_eq!(
        app.get(&vpath(&app, SERVER, "1.0.0"), &app.admin())
            .await
            .json(),
        rec,
        "what publish answers is what was stored"
    );
    assert_eq!(
        app.get(&vpath(&app, SERVER, "latest"), &app.admin())
            .await
            .json()["version"],
        "1.0.0"
    );
    let audit = app
        .get(
            &format!("/v1/tenants/{}/audit?kind=version.published", app.tenant),
            &app.admin(),
        )
        .await
        .json();
    assert_eq!(
        audit["items"][0]["data"],
        json!({
            "digest": rec["digest"],
            "tools": 1,
            "approval_required": false,
            "status": "approved",
        })
    );
}

#[tokio::test]
async fn conditional_gets_answer_304() {
    let app = TestApp::new().await;
    publish(
        &app,
        &publisher(&app),
        &card(SERVER, "1.0.0", json!([read_tool()])),
    )
    .await;
    let t = app.as_roles("reader", &["reader"]);
    let path = vpath(&app, SERVER, "1.0.0");
    let r = app.get(&path, &t).await;
    let etag = r.header("etag").unwrap();
    assert!(
        etag.starts_with('"') && etag.ends_with('"'),
        "strong ETag {etag}"
    );
    for inm in [
        etag.clone(),
        format!("W/{etag}"),
        format!("\"nope\", {etag}"),
        "*".to_owned(),
    ] {
        let r = app
            .send_raw("GET", &path, Some(&t), None, &[("if-none-match", &inm)])
            .await;
        assert_eq!(r.status, 304, "{inm}");
        assert!(r.bytes.is_empty());
        assert_eq!(r.header("etag").as_deref(), Some(etag.as_str()));
    }
    let r = app
        .send_raw(
            "GET",
            &path,
            Some(&t),
            None,
            &[("if-none-match", "\"other\"")],
        )
        .await;
    assert_eq!(r.status, 200);
    // A status change changes the record's ETag (and evicts the index).
    approve(&app, SERVER, "1.0.0").await;
    let r = app
        .send_raw("GET", &path, Some(&t), None, &[("if-none-match", &etag)])
        .await;
    assert_eq!(r.status, 200, "stale ETag must not match after approval");
    let new_tag = r.header("etag").unwrap();
    assert_ne!(new_tag, etag);
    // `latest` resolves through the index too.
    let r = app
        .send_raw(
            "GET",
            &vpath(&app, SERVER, "latest"),
            Some(&t),
            None,
            &[("if-none-match", &new_tag)],
        )
        .await;
    assert_eq!(r.status, 304);
    // No token: 401 even with a matching ETag.
    app.send_raw("GET", &path, None, None, &[("if-none-match", &new_tag)])
        .await
        .problem(401, "unauthenticated");
}

/// The server answers an unchanged record's `304` before routing when the
/// token, the tenant and the index are all in memory. Its answers must be
/// the router's, header for header, and everything it cannot decide alone
/// (another tenant, a platform token, a name in another spelling, a cold
/// index) must reach the router.
#[tokio::test]
async fn the_304_fast_path_answers_exactly_as_the_router() {
    let app = TestApp::new().await;
    publish(
        &app,
        &publisher(&app),
        &card(SERVER, "1.0.0", json!([read_tool()])),
    )
    .await;
    let t = app.as_roles("reader", &["reader"]);
    let path = vpath(&app, SERVER, "1.0.0");
    app.settle().await;
    // Cold: the router answers; a first conditional read loads the index.
    let etag = app.get(&path, &t).await.header("etag").unwrap();
    let fast = || app.router.fast_answers();
    let before = fast();
    let r = app
        .send_raw("GET", &path, Some(&t), None, &[("if-none-match", &etag)])
        .await;
    assert_eq!(r.status, 304);
    assert_eq!(fast(), before, "a cold index is the router's");
    let inm = [("if-none-match", etag.as_str()), ("x-request-id", "req-1")];
    let quick = app.send_raw("GET", &path, Some(&t), None, &inm).await;
    assert_eq!(fast(), before + 1, "the fast path answered");
    // A query string sends the same request through the router.
    let routed = app
        .send_raw("GET", &format!("{path}?via=router"), Some(&t), None, &inm)
        .await;
    assert_eq!(fast(), before + 1, "the router answered");
    assert_eq!(quick.status, 304);
    assert_eq!(routed.status, 304);
    assert!(quick.bytes.is_empty());
    let headers = |r: &Resp| {
        let mut h: Vec<(String, String)> = r
            .headers
            .iter()
            .filter(|(k, _)| *k != "date")
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
            .collect();
        h.sort();
        h
    };
    assert_eq!(headers(&quick), headers(&routed));
    assert_eq!(quick.header("x-request-id").as_deref(), Some("req-1"));
    // Without an inbound id, a fresh one (as the router gives).
    let r = app
        .send_raw("GET", &path, Some(&t), None, &[("if-none-match", &etag)])
        .await;
    assert_eq!(r.status, 304);
    assert_eq!(r.header("x-request-id").map(|v| v.len()), Some(36));
    assert_eq!(fast(), before + 2);
    // What the fast path leaves to the router, each answered as before.
    let other = token("mallory", Some("someone-else"), &["reader"]);
    let platform = token("ops", None, &["platform"]);
    let upper = path.replace("acme", "ACME");
    let cases: [(&str, &str, u16); 4] = [
        (&path, &other, 404),
        (&path, &platform, 404),
        (&upper, &t, 304),
        (&path, "not-a-token", 401),
    ];
    for (p, tok, status) in cases {
        let r = app
            .send_raw("GET", p, Some(tok), None, &[("if-none-match", &etag)])
            .await;
        assert_eq!(r.status.as_u16(), status, "{p}");
    }
    assert_eq!(fast(), before + 2, "none of those took the fast path");
    // A stale ETag is the router's 200.
    approve(&app, SERVER, "1.0.0").await;
    let r = app
        .send_raw("GET", &path, Some(&t), None, &[("if-none-match", &etag)])
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(fast(), before + 2);
    // Both paths count under the route's template.
    let text = String::from_utf8(app.send("GET", "/metrics", None, None).await.bytes).unwrap();
    let line = "pinfold_http_requests_total{route=\"/v1/tenants/{tenant}/servers/{server}/versions/{version}\",method=\"GET\",status=\"304\"} 5";
    assert!(text.contains(line), "{text}");
}

/// Every document answer is read with a bearer token, so no shared cache may
/// keep it: `private` (never `public`) and `Vary: Authorization`, for the
/// signature and the card, exact and `latest`, 200 and 304 alike.
#[tokio::test]
async fn authenticated_documents_are_never_publicly_cacheable() {
    let app = TestApp::new().await;
    let doc = card(SERVER, "1.0.0", json!([read_tool()]));
    publish(&app, &publisher(&app), &doc).await;
    approve(&app, SERVER, "1.0.0").await;
    let t = app.as_roles("client", &["client"]);
    for version in ["1.0.0", "latest"] {
        for view in ["signature", "card"] {
            let path = format!("{}/{view}", vpath(&app, SERVER, version));
            let ok = app.get(&path, &t).await;
            assert_eq!(ok.status, 200, "{path}");
            let tag = ok.header("etag").unwrap();
            let not_modified = app
                .send_raw("GET", &path, Some(&t), None, &[("if-none-match", &tag)])
                .await;
            assert_eq!(not_modified.status, 304, "{path}");
            for r in [&ok, &not_modified] {
                let cc = r.header("cache-control").unwrap_or_default();
                let directives: Vec<&str> = cc.split(',').map(str::trim).collect();
                assert!(directives.contains(&"private"), "{path}: {cc}");
                assert!(!directives.contains(&"public"), "{path}: {cc}");
                assert_eq!(
                    directives.contains(&"immutable"),
                    version != "latest",
                    "{path}: {cc}"
                );
                let vary = r.header("vary").unwrap_or_default().to_ascii_lowercase();
                assert!(vary.contains("authorization"), "{path}: vary {vary:?}");
            }
        }
    }
}

#[tokio::test]
async fn signature_card_and_tools_views() {
    let app = TestApp::new().await;
    let doc = card(SERVER, "1.0.0", json!([read_tool(), manage_tool()]));
    publish(&app, &publisher(&app), &doc).await;
    let t = app.as_roles("client", &["client"]);
    let base = vpath(&app, SERVER, "1.0.0");
    // The document: canonical bytes whose SHA-256 is the digest.
    let r = app.get(&format!("{base}/signature"), &t).await;
    assert_eq!(r.status, 200);
    let digest = format!("sha256:{}", hex_of(&Sha256::digest(&r.bytes)));
    assert_eq!(digest, pinfold_core::digest::digest(&doc));
    assert_eq!(
        r.header("cache-control").as_deref(),
        Some("private, max-age=31536000, immutable")
    );
    let tag = r.header("etag").unwrap();
    let r304 = app
        .send_raw(
            "GET",
            &format!("{base}/signature"),
            Some(&t),
            None,
            &[("if-none-match", &tag)],
        )
        .await;
    assert_eq!(r304.status, 304);
    assert_eq!(
        r304.header("cache-control").as_deref(),
        Some("private, max-age=31536000, immutable")
    );
    // The card: CORS, ETag exposed.
    let r = app.get(&format!("{base}/card"), &t).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("access-control-allow-origin").as_deref(),
        Some("*")
    );
    assert_eq!(
        r.header("access-control-expose-headers").as_deref(),
        Some("ETag")
    );
    assert_eq!(r.json(), doc);
    let pre = app
        .send_raw(
            "OPTIONS",
            &format!("{base}/card"),
            None,
            None,
            &[
                ("origin", "https://app.example"),
                ("access-control-request-method", "GET"),
            ],
        )
        .await;
    assert_eq!(pre.status, 204);
    assert!(
        pre.header("access-control-allow-headers")
            .unwrap()
            .contains("Authorization")
    );
    // `latest` is never marked immutable.
    approve(&app, SERVER, "1.0.0").await;
    let r = app
        .get(&format!("{}/signature", vpath(&app, SERVER, "latest")), &t)
        .await;
    assert_eq!(
        r.header("cache-control").as_deref(),
        Some("private, no-cache")
    );
    // The worst-case tools/list view.
    let r = app.get(&format!("{base}/tools"), &t).await;
    assert_eq!(r.status, 200);
    let tools = r.json();
    let manage = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "manage_file")
        .unwrap();
    assert_eq!(manage["annotations"]["destructiveHint"], true);
    assert_eq!(
        manage["annotations"]
            .as_object()
            .unwrap()
            .get("readOnlyHint"),
        Some(&json!(false))
    );
    assert!(
        manage["annotations"].is_object(),
        "a single object, as tools/list shows"
    );
    let tag = r.header("etag").unwrap();
    assert_eq!(
        app.send_raw(
            "GET",
            &format!("{base}/tools"),
            Some(&t),
            None,
            &[("if-none-match", &tag)]
        )
        .await
        .status,
        304
    );
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn listing_servers_with_search_status_and_pages() {
    let app = TestApp::new().await;
    let p = publisher(&app);
    for (i, name) in [
        "io.github.acme/alpha",
        "io.github.acme/beta",
        "com.example/gamma_100",
        "IO.GitHub.Acme/Delta",
    ]
    .iter()
    .enumerate()
    {
        let mut doc = card(name, "1.0.0", json!([read_tool()]));
        doc["description"] = json!(format!("Demo {i}"));
        doc["title"] = json!(if i == 2 {
            "Done 100% of the time".to_owned()
        } else {
            format!("Server {i}")
        });
        assert_eq!(publish(&app, &p, &doc).await.status, 201, "{name}");
    }
    approve(&app, "io.github.acme/beta", "1.0.0").await;
    let list = |q: &str| {
        let app = &app;
        let q = q.to_owned();
        async move {
            app.get(
                &format!("/v1/tenants/{}/servers{q}", app.tenant),
                &app.admin(),
            )
            .await
        }
    };
    let all = list("").await.json();
    let names: Vec<&str> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "com.example/gamma_100",
            "io.github.acme/alpha",
            "io.github.acme/beta",
            "IO.GitHub.Acme/Delta"
        ]
    );
    let acme = list("?q=ACME").await.json();
    assert_eq!(
        acme["items"].as_array().unwrap().len(),
        3,
        "case-insensitive substring"
    );
    let pct = list("?q=100%25").await.json();
    assert_eq!(pct["items"].as_array().unwrap().len(), 1, "% is a literal");
    let under = list("?q=a_p").await.json();
    assert_eq!(
        under["items"].as_array().unwrap().len(),
        0,
        "_ is a literal"
    );
    let approved = list("?status=approved").await.json();
    assert_eq!(approved["items"][0]["name"], "io.github.acme/beta");
    assert_eq!(approved["items"].as_array().unwrap().len(), 1);
    let page1 = list("?limit=3").await.json();
    assert_eq!(page1["items"].as_array().unwrap().len(), 3);
    let cursor = page1["next_cursor"].as_str().unwrap().to_owned();
    let page2 = list(&format!("?limit=3&cursor={cursor}")).await.json();
    assert_eq!(page2["items"][0]["name"], "IO.GitHub.Acme/Delta");
    assert!(page2["next_cursor"].is_null());
    list("?status=bogus").await.problem(400, "bad_request");
    list("?limit=500").await.problem(422, "validation_failed");
    // Names are case-insensitive identities: another spelling is the same server.
    let r = app
        .get(&vpath(&app, "io.github.acme/delta", "1.0.0"), &app.admin())
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["server"], "IO.GitHub.Acme/Delta");
}

#[tokio::test]
async fn diff_between_versions() {
    let app = TestApp::new().await;
    let p = publisher(&app);
    publish(&app, &p, &card(SERVER, "1.0.0", json!([read_tool()]))).await;
    publish(
        &app,
        &p,
        &card(SERVER, "1.1.0", json!([read_tool(), manage_tool()])),
    )
    .await;
    let base = format!("/v1/tenants/{}/servers/{}/diff", app.tenant, enc(SERVER));
    let d = app
        .get(&format!("{base}?from=1.0.0&to=1.1.0"), &app.admin())
        .await
        .json();
    assert_eq!(d["classification"], "escalation");
    assert_eq!(d["changes"][0]["kind"], "tool_added");
    assert_eq!(d["from"]["version"], "1.0.0");
    let back = app
        .get(&format!("{base}?from=1.1.0&to=1.0.0"), &app.admin())
        .await
        .json();
    assert_eq!(back["classification"], "reduction");
    let same = app
        .get(&format!("{base}?from=1.0.0&to=1.0.0"), &app.admin())
        .await
        .json();
    assert_eq!(same["changes"], json!([]));
    app.get(&format!("{base}?from=1.0.0"), &app.admin())
        .await
        .problem(400, "bad_request");
    app.get(&format!("{base}?from=1.0.0&to=3.0.0"), &app.admin())
        .await
        .problem(404, "version_not_found");
}

/// Verify re-reads the stored document under the limits the server was
/// configured with, not the built-in defaults: a card the configuration
/// accepts at publish stays verifiable.
#[tokio::test]
async fn verify_reads_stored_documents_under_the_configured_limits() {
    let app = TestApp::build(test_issuers(), |cfg| {
        cfg.limits.max_card_description_chars = 400;
    })
    .await;
    let mut doc = card(SERVER, "1.0.0", json!([read_tool()]));
    doc["description"] = json!("d".repeat(300));
    assert_eq!(publish(&app, &publisher(&app), &doc).await.status, 201);
    let path = format!("{}/verify", vpath(&app, SERVER, "1.0.0"));
    let t = app.as_roles("gw", &["client"]);
    let r = app
        .send(
            "POST",
            &path,
            Some(&t),
            Some(json!({"tools": [read_tool()]})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    assert_eq!(r.json()["conformant"], true);
    // The limit itself still holds at publish.
    doc["version"] = json!("1.0.1");
    doc["description"] = json!("d".repeat(401));
    publish(&app, &publisher(&app), &doc)
        .await
        .problem(422, "validation_failed");
}

#[tokio::test]
async fn verify_observations_under_each_mode() {
    let app = TestApp::new().await;
    publish(
        &app,
        &publisher(&app),
        &card(SERVER, "1.0.0", json!([read_tool(), manage_tool()])),
    )
    .await;
    let path = format!("{}/verify", vpath(&app, SERVER, "1.0.0"));
    let t = app.as_roles("gw", &["client"]);
    let good = json!({"tools": [{"name": "read_file", "inputSchema": read_tool()["inputSchema"], "annotations": {"readOnlyHint": true, "openWorldHint": false}}]});
    let r = app.send("POST", &path, Some(&t), Some(good)).await.json();
    assert_eq!(r["conformant"], true);
    assert_eq!(r["mode"], "permissive", "the tenant default");
    let bad = json!({"tools": [{"name": "rm_rf", "inputSchema": {"type": "object"}}]});
    let r = app
        .send("POST", &path, Some(&t), Some(bad.clone()))
        .await
        .json();
    assert_eq!(r["conformant"], false);
    assert_eq!(r["blocking"], false);
    assert_eq!(r["violations"][0]["kind"], "undeclared_tool");
    let r = app
        .send(
            "POST",
            &format!("{path}?mode=strict"),
            Some(&t),
            Some(bad.clone()),
        )
        .await
        .json();
    assert_eq!(r["blocking"], true);
    let mut with_mode = bad.clone();
    with_mode["mode"] = json!("advisory");
    assert_eq!(
        app.send("POST", &path, Some(&t), Some(with_mode))
            .await
            .json()["mode"],
        "advisory"
    );
    // A per-server override in the policy sets the default.
    app.send(
        "PUT",
        &format!("/v1/tenants/{}/policy", app.tenant),
        Some(&app.admin()),
        Some(
            json!({"enforcement_mode": "permissive", "approval_required": true,
            "overrides": {"servers": {SERVER: {"enforcement_mode": "strict"}}}}),
        ),
    )
    .await;
    assert_eq!(
        app.send("POST", &path, Some(&t), Some(bad.clone()))
            .await
            .json()["mode"],
        "strict"
    );
    app.send("POST", &format!("{path}?mode=lax"), Some(&t), Some(bad))
        .await
        .problem(422, "validation_failed");
    let r = app
        .send(
            "POST",
            &path,
            Some(&t),
            Some(json!({"tools": [{"inputSchema": {}}]})),
        )
        .await;
    r.problem(422, "validation_failed");
}

#[tokio::test]
async fn attestations_verify_offline_with_the_tenant_jwks() {
    let app = TestApp::new().await;
    let doc = card(SERVER, "1.0.0", json!([read_tool()]));
    publish(&app, &publisher(&app), &doc).await;
    approve(&app, SERVER, "1.0.0").await;
    let t = app.as_roles("client", &["client"]);
    let r = app
        .get(&format!("{}/attestation", vpath(&app, SERVER, "1.0.0")), &t)
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type").as_deref(), Some("application/jwt"));
    let jws = String::from_utf8(r.bytes).unwrap();
    let jwks: jsonwebtoken::jwk::JwkSet = serde_json::from_value(
        app.get(&format!("/v1/tenants/{}/jwks.json", app.tenant), &t)
            .await
            .json(),
    )
    .unwrap();
    let header = jsonwebtoken::decode_header(&jws).unwrap();
    let jwk = jwks
        .find(header.kid.as_deref().unwrap())
        .expect("kid in JWKS");
    let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::EdDSA);
    v.required_spec_claims.clear();
    v.validate_exp = false;
    v.validate_aud = false;
    v.set_issuer(&[format!("pinfold:tenant:{}", app.tenant)]);
    let claims =
        jsonwebtoken::decode::<Value>(&jws, &jsonwebtoken::DecodingKey::from_jwk(jwk).unwrap(), &v)
            .unwrap()
            .claims;
    assert_eq!(claims["digest"], pinfold_core::digest::digest(&doc));
    assert_eq!(claims["status"], "approved");
    assert_eq!(claims["approved_by"], "rick-reviewer");
    assert_eq!(claims["server"], SERVER);
    assert!(claims["approved_at"].is_i64());
    // The key is stable and sealed at rest, never stored in plain text.
    let again: Value = app
        .get(&format!("/v1/tenants/{}/jwks.json", app.tenant), &t)
        .await
        .json();
    assert_eq!(again["keys"][0]["kid"], header.kid.unwrap());
    let key = app
        .store
        .registry()
        .tenant_key(&app.tenant)
        .await
        .unwrap()
        .unwrap();
    assert!(!key.private_sealed.is_empty());
    assert!(again.to_string().find(&key.private_sealed).is_none());
    // Another tenant's key is different.
    let other = app.new_tenant().await;
    let theirs: Value = app
        .get(
            &format!("/v1/tenants/{other}/jwks.json"),
            &token("o", Some(other.as_str()), &["reader"]),
        )
        .await
        .json();
    assert_ne!(theirs["keys"][0]["x"], again["keys"][0]["x"]);
}

#[tokio::test]
async fn the_attestation_key_is_created_with_the_tenant() {
    let app = TestApp::new().await;
    let fresh = app.new_tenant().await;
    let key = app.store.registry().tenant_key(&fresh).await.unwrap();
    let key = key.expect("key created with the tenant, before any attestation request");
    // Sealed for this tenant: the private half is not the raw PKCS#8.
    assert!(!key.private_sealed.is_empty());
    let jwks = app
        .get(
            &format!("/v1/tenants/{fresh}/jwks.json"),
            &token("r", Some(fresh.as_str()), &["reader"]),
        )
        .await
        .json();
    assert_eq!(jwks["keys"][0]["kid"], key.kid.as_str());
}

#[tokio::test]
async fn documents_are_immutable_in_the_database() {
    let app = TestApp::new().await;
    publish(
        &app,
        &publisher(&app),
        &card(SERVER, "1.0.0", json!([read_tool()])),
    )
    .await;
    let update = "UPDATE versions SET document = '{}'";
    let digest = "UPDATE versions SET digest = 'sha256:0000000000000000000000000000000000000000000000000000000000000000'";
    let delete = "DELETE FROM versions";
    for sql in [update, digest, delete] {
        let e = match &app.store {
            pinfold_server::store::Store::Sqlite(s) => {
                sqlx::query(sql).execute(s.pool()).await.unwrap_err()
            }
            pinfold_server::store::Store::Postgres(_) => sqlx::query(sql)
                .execute(&app.owner_pool().await.unwrap())
                .await
                .unwrap_err(),
        };
        assert!(e.to_string().contains("append-only"), "{sql}: {e}");
    }
    let rec = app
        .get(&vpath(&app, SERVER, "1.0.0"), &app.admin())
        .await
        .json();
    assert_eq!(rec["card"]["signature"]["tools"][0]["name"], "read_file");
}

#[tokio::test]
async fn the_audit_log_tells_the_whole_story_in_order() {
    let app = TestApp::new().await;
    let p = publisher(&app);
    publish(&app, &p, &card(SERVER, "1.0.0", json!([read_tool()]))).await;
    publish(&app, &p, &card(SERVER, "1.0.0", json!([read_tool()]))).await; // idempotent: no event
    publish(&app, &p, &card(SERVER, "1.0.1", json!([read_tool()]))).await;
    approve(&app, SERVER, "1.0.0").await;
    app.send(
        "POST",
        &format!("{}/review", vpath(&app, SERVER, "1.0.1")),
        Some(&reviewer(&app)),
        Some(json!({"decision": "reject", "note": "no"})),
    )
    .await;
    app.send(
        "POST",
        &format!("{}/status", vpath(&app, SERVER, "1.0.0")),
        Some(&app.admin()),
        Some(json!({"status": "revoked", "reason": "gone"})),
    )
    .await;
    let audit = app
        .get(
            &format!("/v1/tenants/{}/audit?server={}", app.tenant, enc(SERVER)),
            &app.admin(),
        )
        .await
        .json();
    let events: Vec<(String, String, String)> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap().into(),
                e["version"].as_str().unwrap().into(),
                e["actor"].as_str().unwrap().into(),
            )
        })
        .collect();
    let expect = [
        ("version.published", "1.0.0", "paula-publisher"),
        ("version.published", "1.0.1", "paula-publisher"),
        ("version.approved", "1.0.0", "rick-reviewer"),
        ("version.rejected", "1.0.1", "rick-reviewer"),
        ("version.revoked", "1.0.0", "alice-admin"),
    ];
    assert_eq!(events.len(), expect.len(), "{events:?}");
    for (got, want) in events.iter().zip(expect) {
        assert_eq!((got.0.as_str(), got.1.as_str(), got.2.as_str()), want);
    }
    assert_eq!(audit["items"][4]["data"]["from"], "approved");
    assert_eq!(audit["items"][4]["data"]["note"], "gone");
    let published = &audit["items"][0]["data"];
    assert_eq!(published["status"], "pending");
    assert_eq!(published["approval_required"], true);
    assert_eq!(published["tools"], 1);
    assert!(published["digest"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(
        audit["items"][2]["data"],
        json!({"from": "pending", "to": "approved", "note": "looks right"})
    );
    assert_eq!(
        audit["items"][3]["data"],
        json!({"from": "pending", "to": "rejected", "note": "no"})
    );
    assert_eq!(
        audit["items"][4]["data"],
        json!({"from": "approved", "to": "revoked", "note": "gone"})
    );
    // Revoking keeps who approved it; the reason replaces the review note.
    let rec = app
        .get(&vpath(&app, SERVER, "1.0.0"), &app.admin())
        .await
        .json();
    assert_eq!(rec["status"], "revoked");
    assert_eq!(rec["status_reason"], "gone");
    assert_eq!(rec["approved_by"], "rick-reviewer");
    assert_eq!(rec["reviews"][0]["decision"], "approve");
    assert_eq!(rec["reviews"][0]["note"], "looks right");
    assert_eq!(rec["reviews"].as_array().unwrap().len(), 1);
    let ids: Vec<i64> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_i64().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
}

#[tokio::test]
async fn import_server_json_creates_an_empty_signature() {
    let app = TestApp::new().await;
    let path = format!("/v1/tenants/{}/import/server-json", app.tenant);
    let doc = json!({
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-09-29/server.schema.json",
        "name": "io.github.acme/weather", "version": "0.3.0", "description": "Weather for agents",
        "remotes": [{"type": "streamable-http", "url": "https://weather.example/mcp"}]
    });
    let r = app
        .send("POST", &path, Some(&publisher(&app)), Some(doc.clone()))
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    let rec = r.json();
    assert_eq!(
        rec["card"]["signature"],
        json!({"tools": [], "prompts": [], "resources": [], "resourceTemplates": []})
    );
    assert!(rec["card"].get("$schema").is_none());
    assert_eq!(rec["card"]["remotes"], doc["remotes"]);
    assert_eq!(
        app.send("POST", &path, Some(&publisher(&app)), Some(doc))
            .await
            .status,
        200
    );
    let bad = json!({"name": "no-slash", "version": "latest", "description": "x".repeat(101)});
    let p = app
        .send("POST", &path, Some(&publisher(&app)), Some(bad))
        .await
        .problem(422, "validation_failed");
    let pointers: Vec<&str> = p["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["pointer"].as_str().unwrap())
        .collect();
    assert_eq!(pointers, ["/description", "/name", "/version"]);
    app.send("POST", &path, Some(&publisher(&app)), Some(json!([1])))
        .await
        .problem(422, "validation_failed");
    let audit = app
        .get(
            &format!("/v1/tenants/{}/audit?kind=version.imported", app.tenant),
            &app.admin(),
        )
        .await
        .json();
    assert_eq!(audit["items"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn another_replica_sees_status_changes_at_once() {
    // Two Pinfold processes over one PostgreSQL: the second's ETag index must
    // not answer 304 for a version whose status changed on the first
    // (LISTEN/NOTIFY eviction, not the 30 s TTL).
    if backend() == Backend::Sqlite {
        eprintln!(
            "notice: cross-replica invalidation needs PostgreSQL; SQLite runs as one process"
        );
        return;
    }
    let a = TestApp::new().await;
    publish(
        &a,
        &publisher(&a),
        &card(SERVER, "1.0.0", json!([read_tool()])),
    )
    .await;
    approve(&a, SERVER, "1.0.0").await;
    // B starts after those writes and waits until LISTEN is in effect (its
    // cache cleared for the gap before it): from then on only a notification
    // evicts what B caches, short of the TTL.
    let b = a.replica().await;
    let mut listener = b.registry_listener().expect("a PostgreSQL store");
    tokio::time::timeout(
        std::time::Duration::from_secs(5),
        listener.wait_for(|s| s.listening),
    )
    .await
    .expect("replica B listens within 5 s")
    .expect("replica B's listener runs");
    let path = vpath(&a, SERVER, "latest");
    let t = a.admin();
    // Warm B's index and take the ETag.
    let tag = b.get(&path, &t).await.header("etag").unwrap();
    assert_eq!(
        b.send_raw("GET", &path, Some(&t), None, &[("if-none-match", &tag)])
            .await
            .status,
        304
    );
    let r = a
        .send(
            "POST",
            &format!("{}/status", vpath(&a, SERVER, "1.0.0")),
            Some(&t),
            Some(json!({"status": "revoked", "reason": "x"})),
        )
        .await;
    assert_eq!(r.status, 200);
    // Look again each time B's listener delivers a notification (other
    // tests' changes arrive too: channels are database-wide).
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        listener.borrow_and_update();
        let r = b
            .send_raw("GET", &path, Some(&t), None, &[("if-none-match", &tag)])
            .await;
        if r.status != 304 {
            // `latest` now resolves to nothing trusted.
            r.problem(404, "no_trusted_version");
            break;
        }
        tokio::time::timeout_at(deadline, listener.changed())
            .await
            .expect("replica B still answers 304 after 5 s")
            .expect("replica B's listener runs");
    }
}

/// A version record carries its reviews, oldest first, read with the
/// version in one statement (the reviews aggregated as JSON): notes with
/// quotes, backslashes and non-ASCII text, and a review without a note,
/// come back exactly as written.
#[tokio::test]
async fn a_record_lists_every_review_oldest_first_exactly_as_written() {
    let app = TestApp::new().await;
    publish(
        &app,
        &publisher(&app),
        &card(SERVER, "1.0.0", json!([read_tool()])),
    )
    .await;
    let review = format!("{}/review", vpath(&app, SERVER, "1.0.0"));
    let note = "needs a \"path\" check \\ über ✓";
    let r = app
        .send(
            "POST",
            &review,
            Some(&reviewer(&app)),
            Some(json!({"decision": "reject", "note": note})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    let r = app
        .send(
            "POST",
            &review,
            Some(&app.as_roles("rosa-reviewer", &["reviewer"])),
            Some(json!({"decision": "approve"})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    let rec = app.get(&vpath(&app, SERVER, "1.0.0"), &app.admin()).await;
    assert_eq!(rec.status, 200);
    let rec = rec.json();
    let reviews = rec["reviews"].as_array().unwrap();
    assert_eq!(reviews.len(), 2, "{rec}");
    assert_eq!(reviews[0]["decision"], "reject");
    assert_eq!(reviews[0]["note"], note);
    assert_eq!(reviews[0]["reviewer"], "rick-reviewer");
    assert_eq!(reviews[1]["decision"], "approve");
    assert_eq!(reviews[1]["reviewer"], "rosa-reviewer");
    assert!(reviews[1].get("note").is_none(), "{rec}");
    // Timestamps are RFC 3339 and in order.
    let at = |i: usize| reviews[i]["at"].as_str().unwrap().to_owned();
    assert!(at(0) <= at(1), "{} then {}", at(0), at(1));
    // `latest` now points at it and shows the same reviews.
    let latest = app
        .get(&vpath(&app, SERVER, "latest"), &app.admin())
        .await
        .json();
    assert_eq!(latest["reviews"], rec["reviews"]);
}
