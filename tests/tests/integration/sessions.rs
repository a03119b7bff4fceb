//! Resolve sessions on both databases: opening, reading, closing, listing,
//! expiry, revocation, ownership, sealing of upstream headers, replicas.

use pinfold_core::ids::Timestamp;
use pinfold_resolve::{AuditNote, CachePolicy, SessionRow};
use pinfold_tests::*;
use serde_json::{Value, json};

const SERVER: &str = "io.github.acme/files";
const SECRET: &str = "Bearer upstream-secret-7f3a";

fn enc(server: &str) -> String {
    server.replace('/', "%2F")
}

fn card(version: &str) -> Value {
    json!({
        "name": SERVER, "version": version, "description": "Files",
        "signature": {"tools": [{"name": "read_file", "description": "Read a file",
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
            "annotations": {"readOnlyHint": true, "openWorldHint": false}}],
            "prompts": [], "resources": [], "resourceTemplates": []}
    })
}

/// Publishes `version` and, when `approve`, approves it.
async fn publish(app: &TestApp, version: &str, approve: bool) {
    let base = format!(
        "/v1/tenants/{}/servers/{}/versions/{version}",
        app.tenant,
        enc(SERVER)
    );
    let r = app
        .send(
            "PUT",
            &base,
            Some(&app.as_roles("pat", &["publisher"])),
            Some(card(version)),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    if approve {
        let r = app
            .send(
                "POST",
                &format!("{base}/review"),
                Some(&app.as_roles("rita", &["reviewer"])),
                Some(json!({"decision": "approve"})),
            )
            .await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    }
}

fn sessions(app: &TestApp) -> String {
    format!("/v1/tenants/{}/sessions", app.tenant)
}

fn client(app: &TestApp) -> String {
    app.as_roles("carl-client", &["client"])
}

fn body() -> Value {
    json!({"server": SERVER, "upstream": {"url": "http://127.0.0.1:9/mcp",
        "headers": {"Authorization": SECRET, "X-Team": "blue"}}})
}

async fn open(app: &TestApp, token: &str, body: Value) -> Value {
    let r = app
        .send("POST", &sessions(app), Some(token), Some(body))
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    r.json()
}

/// A session's read without what applies to it now (`effective_mode`,
/// `effective_resolve_cache`), which its creation does not show.
fn as_created(mut read: Value) -> Value {
    for k in ["effective_mode", "effective_resolve_cache"] {
        read.as_object_mut()
            .unwrap()
            .remove(k)
            .unwrap_or_else(|| panic!("a session's read shows {k}"));
    }
    read
}

#[tokio::test]
async fn open_read_and_close_a_session() {
    let app = TestApp::new().await;
    publish(&app, "1.0.0", true).await;
    publish(&app, "1.1.0", true).await;
    publish(&app, "2.0.0", false).await;
    let c = client(&app);
    let r = app
        .send("POST", &sessions(&app), Some(&c), Some(body()))
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    let s = r.json();
    let id = s["id"].as_str().unwrap();
    assert_eq!(
        r.header("location").unwrap(),
        format!("{}/{id}", sessions(&app))
    );
    // `latest` is the highest approved version, pinned now.
    assert_eq!(s["version"], "1.1.0");
    assert_eq!(s["server"], SERVER);
    assert!(s["digest"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(s["mode"], "permissive");
    assert_eq!(s["resolve_cache"], "session");
    assert_eq!(s["principal"], "carl-client");
    let text = String::from_utf8_lossy(&r.bytes);
    assert!(!text.contains("upstream-secret"), "headers never returned");
    // Default lifetime: one hour.
    let created = s["created_at"].as_str().unwrap();
    let expires = s["expires_at"].as_str().unwrap();
    assert!(expires > created);

    let path = format!("{}/{id}", sessions(&app));
    let got = app.get(&path, &c).await;
    assert_eq!(got.status, 200);
    // The read is the created session plus what applies to it now: the
    // mode and cache policy under the tenant's current policy, and no
    // invalidation channel yet (the upstream has not been reached).
    let read = got.json();
    assert_eq!(read["effective_mode"], "permissive");
    assert_eq!(read["effective_resolve_cache"], "session");
    assert!(read.get("cache_invalidation").is_none(), "{read}");
    assert_eq!(as_created(read), s);
    assert!(!String::from_utf8_lossy(&got.bytes).contains("upstream-secret"));

    // A later approval does not move the pinned version.
    let r = app
        .send(
            "POST",
            &format!(
                "/v1/tenants/{}/servers/{}/versions/2.0.0/review",
                app.tenant,
                enc(SERVER)
            ),
            Some(&app.as_roles("rita", &["reviewer"])),
            Some(json!({"decision": "approve"})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(app.get(&path, &c).await.json()["version"], "1.1.0");

    // An exact version may be asked for.
    let mut b = body();
    b["version"] = json!("1.0.0");
    b["ttl_seconds"] = json!(60);
    let s2 = open(&app, &c, b).await;
    assert_eq!(s2["version"], "1.0.0");

    // The audit log names the headers, never their values.
    let audit = app
        .get(
            &format!("/v1/tenants/{}/audit?limit=100", app.tenant),
            &app.admin(),
        )
        .await;
    let text = String::from_utf8_lossy(&audit.bytes).into_owned();
    assert!(text.contains("session.opened"), "{text}");
    assert!(text.contains("X-Team"));
    assert!(!text.contains("upstream-secret"));

    let del = app.send("DELETE", &path, Some(&c), None).await;
    assert_eq!(del.status, 204);
    // Closed is gone: 404, as docs/RESOLVE.md says (410 is for a session
    // whose time is over), for reading it and for resolving through it.
    app.get(&path, &c).await.problem(404, "session_not_found");
    app.send(
        "POST",
        &format!("{path}/resolve"),
        Some(&c),
        Some(json!({"name": "manage_files", "arguments": {"path": "/a", "action": "read"}})),
    )
    .await
    .problem(404, "session_not_found");
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/RESOLVE.md"),
    )
    .unwrap()
    .split_whitespace()
    .collect::<Vec<_>>()
    .join(" ");
    assert!(
        docs.contains("A closed session (`DELETE`) is gone: it answers `404 session_not_found`"),
        "docs/RESOLVE.md states what a closed session answers"
    );
    app.send("DELETE", &path, Some(&c), None)
        .await
        .problem(404, "session_not_found");
    let audit = app
        .get(
            &format!("/v1/tenants/{}/audit?limit=100", app.tenant),
            &app.admin(),
        )
        .await;
    assert!(String::from_utf8_lossy(&audit.bytes).contains("session.closed"));
}

#[tokio::test]
async fn bad_requests_are_refused_with_pointers() {
    let app = TestApp::new().await;
    publish(&app, "1.0.0", true).await;
    let c = client(&app);
    let p = sessions(&app);
    app.send_raw("POST", &p, Some(&c), Some(b"{\"server\":"), &[])
        .await
        .problem(400, "malformed_json");
    app.send_raw(
        "POST",
        &p,
        Some(&c),
        Some(br#"{"server":"a","server":"b"}"#),
        &[],
    )
    .await
    .problem(400, "duplicate_key");
    let huge = vec![b' '; 3 * 1024 * 1024];
    app.send_raw("POST", &p, Some(&c), Some(&huge), &[])
        .await
        .problem(413, "body_too_large");
    for (bad, pointer) in [
        (json!({"server": SERVER}), ""),
        (
            json!({"server": SERVER, "upstream": {"url": "http://x/"}, "extra": 1}),
            "",
        ),
        (
            json!({"server": 7, "upstream": {"url": "http://x/"}}),
            "/server",
        ),
        (
            json!({"server": SERVER, "upstream": {"url": "http://x/"}, "ttl_seconds": "1h"}),
            "/ttl_seconds",
        ),
        (
            json!({"server": SERVER, "upstream": {"url": "ftp://x/"}}),
            "/upstream/url",
        ),
        (
            json!({"server": SERVER, "upstream": {"url": "http://u:p@x/"}}),
            "/upstream/url",
        ),
        (
            json!({"server": SERVER, "upstream": {"url": "not a url"}}),
            "/upstream/url",
        ),
        (
            json!({"server": SERVER, "upstream": {"url": "http://x/", "headers": {"Host": "y"}}}),
            "/upstream/headers/Host",
        ),
        (
            json!({"server": SERVER, "upstream": {"url": "http://x/", "headers": {"bad name": "y"}}}),
            "/upstream/headers/bad name",
        ),
        (
            json!({"server": SERVER, "upstream": {"url": "http://x/", "headers": {"X-A": "line\nbreak"}}}),
            "/upstream/headers/X-A",
        ),
        (
            json!({"server": SERVER, "upstream": {"url": "http://x/"}, "ttl_seconds": 0}),
            "/ttl_seconds",
        ),
        (
            json!({"server": SERVER, "upstream": {"url": "http://x/"}, "ttl_seconds": 86_401}),
            "/ttl_seconds",
        ),
    ] {
        let r = app.send("POST", &p, Some(&c), Some(bad.clone())).await;
        let problem = r.problem(422, "validation_failed");
        if !pointer.is_empty() {
            let pointers: Vec<&str> = problem["errors"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["pointer"].as_str().unwrap())
                .collect();
            assert!(pointers.contains(&pointer), "{bad}: {pointers:?}");
        }
        // A secret header value is never echoed back.
        assert!(!String::from_utf8_lossy(&r.bytes).contains("line\nbreak"));
    }
    // Unknown server, unknown version, unapproved version.
    let mut b = body();
    b["server"] = json!("io.github.acme/nothing");
    app.send("POST", &p, Some(&c), Some(b))
        .await
        .problem(404, "server_not_found");
    let mut b = body();
    b["version"] = json!("9.9.9");
    app.send("POST", &p, Some(&c), Some(b))
        .await
        .problem(404, "version_not_found");
    publish(&app, "1.1.0", false).await;
    let mut b = body();
    b["version"] = json!("1.1.0");
    app.send("POST", &p, Some(&c), Some(b))
        .await
        .problem(409, "version_not_trusted");
    // Nothing was stored by any refusal.
    let list = app.get(&p, &app.admin()).await.json();
    assert_eq!(list["items"], json!([]));
}

#[tokio::test]
async fn roles_principals_and_tenants() {
    let app = TestApp::new().await;
    publish(&app, "1.0.0", true).await;
    let p = sessions(&app);
    app.send("POST", &p, None, Some(body()))
        .await
        .problem(401, "unauthenticated");
    app.send(
        "POST",
        &p,
        Some(&app.as_roles("rea", &["reader"])),
        Some(body()),
    )
    .await
    .problem(403, "forbidden_role");
    let s = open(&app, &client(&app), body()).await;
    let path = format!("{p}/{}", s["id"].as_str().unwrap());
    // Another principal of the same tenant: as if it did not exist.
    let other = app.as_roles("eve-client", &["client"]);
    app.get(&path, &other)
        .await
        .problem(404, "session_not_found");
    app.send("DELETE", &path, Some(&other), None)
        .await
        .problem(404, "session_not_found");
    // Another tenant's token: the tenant boundary answers first.
    let t2 = app.new_tenant().await;
    let stranger = token("carl-client", Some(t2.as_str()), &["client", "admin"]);
    app.get(&path, &stranger)
        .await
        .problem(404, "tenant_not_found");
    // Malformed ids are plain 404s.
    app.get(&format!("{p}/..%2F..%2Fetc"), &client(&app))
        .await
        .problem(404, "session_not_found");
    // Listing is for admins.
    app.get(&p, &client(&app))
        .await
        .problem(403, "forbidden_role");
    // An admin may close anyone's session (a kill switch), and it is gone.
    assert_eq!(
        app.send("DELETE", &path, Some(&app.admin()), None)
            .await
            .status,
        204
    );
    app.get(&path, &client(&app))
        .await
        .problem(404, "session_not_found");
}

#[tokio::test]
async fn list_sessions_in_pages() {
    let app = TestApp::new().await;
    publish(&app, "1.0.0", true).await;
    let c = client(&app);
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(
            open(&app, &c, body()).await["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    ids.sort();
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut q = format!("{}?limit=2", sessions(&app));
        if let Some(c) = &cursor {
            q.push_str(&format!("&cursor={c}"));
        }
        let page = app.get(&q, &app.admin()).await.json();
        for s in page["items"].as_array().unwrap() {
            assert!(s.get("upstream_sealed").is_none() && s.get("headers").is_none());
            seen.push(s["id"].as_str().unwrap().to_owned());
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, ids);
    app.get(&format!("{}?limit=0", sessions(&app)), &app.admin())
        .await
        .problem(422, "validation_failed");
    app.get(&format!("{}?cursor=zzz", sessions(&app)), &app.admin())
        .await
        .problem(422, "validation_failed");
}

#[tokio::test]
async fn expired_sessions_answer_410() {
    let app = TestApp::new().await;
    publish(&app, "1.0.0", true).await;
    let s = open(&app, &client(&app), body()).await;
    // A session that ended a minute ago, written as the store would.
    let row = SessionRow {
        id: "0123456789abcdef0123456789abcdef".into(),
        principal: "carl-client".into(),
        issuer: test_issuers()[0].issuer.clone(),
        server: SERVER.into(),
        version: "1.0.0".into(),
        digest: s["digest"].as_str().unwrap().into(),
        mode: pinfold_core::Mode::Permissive,
        cache_policy: CachePolicy::Session,
        upstream_url: "http://127.0.0.1:9/mcp".into(),
        upstream_sealed: None,
        created_at: Timestamp::from_millis(1_000),
        expires_at: Timestamp::from_millis(2_000),
    };
    let note = AuditNote {
        at: Timestamp::from_millis(1_000),
        actor: "carl-client".into(),
        kind: "session.opened".into(),
        server: None,
        version: None,
        data: json!({}),
    };
    app.store
        .sessions()
        .insert_session(&app.tenant, &row, &note)
        .await
        .unwrap();
    let path = format!("{}/{}", sessions(&app), row.id);
    app.get(&path, &client(&app))
        .await
        .problem(410, "session_expired");
    // Closing an expired session still works.
    assert_eq!(
        app.send("DELETE", &path, Some(&client(&app)), None)
            .await
            .status,
        204
    );
    // The purge removes what ended, and only that.
    let ended = SessionRow {
        id: "fedcba9876543210fedcba9876543210".into(),
        ..row
    };
    app.store
        .sessions()
        .insert_session(&app.tenant, &ended, &note)
        .await
        .unwrap();
    let now = Timestamp::from_millis(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64,
    );
    assert_eq!(
        app.store.sessions().purge_expired(now, 100).await.unwrap(),
        1
    );
    let live = format!("{}/{}", sessions(&app), s["id"].as_str().unwrap());
    assert_eq!(app.get(&live, &client(&app)).await.status, 200);
    app.get(&format!("{}/{}", sessions(&app), ended.id), &client(&app))
        .await
        .problem(404, "session_not_found");
}

#[tokio::test]
async fn revoking_the_version_ends_its_sessions() {
    let app = TestApp::new().await;
    publish(&app, "1.0.0", true).await;
    let c = client(&app);
    let s = open(&app, &c, body()).await;
    let path = format!("{}/{}", sessions(&app), s["id"].as_str().unwrap());
    assert_eq!(app.get(&path, &c).await.status, 200);
    let r = app
        .send(
            "POST",
            &format!(
                "/v1/tenants/{}/servers/{}/versions/1.0.0/status",
                app.tenant,
                enc(SERVER)
            ),
            Some(&app.admin()),
            Some(json!({"status": "revoked", "reason": "leaked credentials"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    app.get(&path, &c).await.problem(410, "version_revoked");
    // And no new session can pin it.
    let mut b = body();
    b["version"] = json!("1.0.0");
    app.send("POST", &sessions(&app), Some(&c), Some(b))
        .await
        .problem(409, "version_not_trusted");
}

#[tokio::test]
async fn upstream_headers_are_sealed_at_rest() {
    let app = TestApp::new().await;
    publish(&app, "1.0.0", true).await;
    let s = open(&app, &client(&app), body()).await;
    let id = s["id"].as_str().unwrap();
    let row = app
        .store
        .sessions()
        .session(&app.tenant, id)
        .await
        .unwrap()
        .unwrap();
    let sealed = row.upstream_sealed.expect("headers are stored sealed");
    assert!(!sealed.contains("upstream-secret") && !sealed.contains("Authorization"));
    let ring = pinfold_registry::keys::Keyring::from_base64(&app.encryption_key).unwrap();
    let plain = ring.open_bound(&app.tenant, id, &sealed).unwrap();
    let pairs: Vec<(String, String)> = serde_json::from_slice(&plain).unwrap();
    assert!(pairs.contains(&("Authorization".into(), SECRET.into())));
    // Bound to the session: it does not open as another session's.
    assert!(
        ring.open_bound(&app.tenant, "0123456789abcdef0123456789abcdef", &sealed)
            .is_err()
    );
    // A session without headers stores none.
    let s = open(
        &app,
        &client(&app),
        json!({"server": SERVER, "upstream": {"url": "https://files.example.com/mcp"}}),
    )
    .await;
    let row = app
        .store
        .sessions()
        .session(&app.tenant, s["id"].as_str().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.upstream_sealed, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_closes_of_one_session_have_one_winner() {
    let app = std::sync::Arc::new(TestApp::new().await);
    publish(&app, "1.0.0", true).await;
    let c = client(&app);
    let s = open(&app, &c, body()).await;
    let path = format!("{}/{}", sessions(&app), s["id"].as_str().unwrap());
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let (app, path, c) = (app.clone(), path.clone(), c.clone());
        tasks.push(tokio::spawn(async move {
            app.send("DELETE", &path, Some(&c), None)
                .await
                .status
                .as_u16()
        }));
    }
    let mut codes = Vec::new();
    for t in tasks {
        codes.push(t.await.unwrap());
    }
    assert_eq!(codes.iter().filter(|c| **c == 204).count(), 1, "{codes:?}");
    assert_eq!(codes.iter().filter(|c| **c == 404).count(), 19, "{codes:?}");
    let audit = app
        .get(
            &format!("/v1/tenants/{}/audit?limit=100", app.tenant),
            &app.admin(),
        )
        .await
        .json();
    let closed = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "session.closed")
        .count();
    assert_eq!(closed, 1);
}

#[tokio::test]
async fn a_session_opened_on_one_replica_is_served_and_closed_on_another() {
    if backend() == Backend::Sqlite {
        eprintln!("notice: replicas need PostgreSQL; SQLite runs as one process");
        return;
    }
    let a = TestApp::new().await;
    publish(&a, "1.0.0", true).await;
    let b = a.replica().await;
    let mut status = b.registry_listener().expect("a PostgreSQL store");
    tokio::time::timeout(
        std::time::Duration::from_secs(5),
        status.wait_for(|s| s.listening),
    )
    .await
    .expect("replica B listens within 5 s")
    .expect("replica B's listener runs");
    let c = client(&a);
    let s = open(&a, &c, body()).await;
    let path = format!("{}/{}", sessions(&a), s["id"].as_str().unwrap());
    // B loads it from the database and caches it.
    assert_eq!(as_created(b.get(&path, &c).await.json()), s);
    status.mark_unchanged();
    assert_eq!(a.send("DELETE", &path, Some(&c), None).await.status, 204);
    // B answers 404 once the close notification reached it (notifications
    // of other tests may arrive first: check after each), well before the
    // 30 s its copy could otherwise live.
    let gone = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        loop {
            status.changed().await.unwrap();
            if b.get(&path, &c).await.status == 404 {
                return;
            }
        }
    })
    .await;
    assert!(gone.is_ok(), "replica B still serves a closed session");
    b.get(&path, &c).await.problem(404, "session_not_found");
}
