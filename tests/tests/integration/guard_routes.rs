//! Guard routes (`/v1/tenants/{tenant}/servers/{server}/guard`) on both
//! databases: create, read, replace, delete; upstream headers sealed at rest
//! and never shown; `If-Match`; the body's checks and the edge's; the
//! egress policy; the upstream taken from the approved card; concurrent
//! writers; drifts recorded once; and, on PostgreSQL, row-level security
//! on the new tables.

use std::sync::Arc;

use pinfold_core::audit::NewAuditEvent;
use pinfold_core::ids::Timestamp;
use pinfold_guard::model::headers_context;
use pinfold_server::store::Store;
use pinfold_tests::*;
use serde_json::{Value, json};

const SERVER: &str = "io.github.acme/notes";
const SECRET: &str = "Bearer guard-upstream-secret-91c2";
const UPSTREAM: &str = "http://127.0.0.1:9/mcp";

fn enc(server: &str) -> String {
    server.replace('/', "%2F")
}

fn guard_path(app: &TestApp) -> String {
    format!("/v1/tenants/{}/servers/{}/guard", app.tenant, enc(SERVER))
}

fn card(version: &str, remotes: Value) -> Value {
    json!({
        "name": SERVER, "version": version, "description": "Notes",
        "remotes": remotes,
        "signature": {"tools": [{"name": "read_note", "description": "Read a note",
            "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}},
            "annotations": {"readOnlyHint": true, "openWorldHint": false}}],
            "prompts": [], "resources": [], "resourceTemplates": []}
    })
}

/// Publishes `version` with `remotes` and, when `approve`, approves it.
async fn publish(app: &TestApp, version: &str, remotes: Value, approve: bool) {
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
            Some(card(version, remotes)),
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

fn remote(url: &str) -> Value {
    json!({"type": "streamable-http", "url": url})
}

fn body() -> Value {
    json!({"upstream": {"url": UPSTREAM,
        "headers": {"Authorization": SECRET, "X-Team": "blue"}}})
}

async fn put(app: &TestApp, body: Value, if_match: Option<&str>) -> Resp {
    let bytes = body.to_string().into_bytes();
    let headers: Vec<(&str, &str)> = if_match.map(|m| ("if-match", m)).into_iter().collect();
    app.send_raw(
        "PUT",
        &guard_path(app),
        Some(&app.admin()),
        Some(&bytes),
        &headers,
    )
    .await
}

async fn audit_text(app: &TestApp) -> String {
    let r = app
        .get(
            &format!("/v1/tenants/{}/audit?limit=100", app.tenant),
            &app.admin(),
        )
        .await;
    assert_eq!(r.status, 200);
    String::from_utf8_lossy(&r.bytes).into_owned()
}

/// The stored row of the route, every column as text, read beside the
/// store (on PostgreSQL as the owner).
async fn raw_row(app: &TestApp) -> Option<String> {
    let sql = "SELECT coalesce(upstream_url, '') || ' ' || header_names || ' ' || \
               coalesce(headers_sealed, '') || ' ' || version_pin || ' ' || \
               coalesce(mode, '') || ' ' || calls || ' ' || updated_by \
               FROM guard_routes WHERE tenant_id = $1 AND server = $2";
    match &app.store {
        Store::Sqlite(s) => sqlx::query_scalar(sqlx::AssertSqlSafe(
            sql.replace("$1", "?1").replace("$2", "?2"),
        ))
        .bind(app.tenant.as_str())
        .bind(SERVER)
        .fetch_optional(s.pool())
        .await
        .unwrap(),
        Store::Postgres(_) => {
            let owner = app.owner_pool().await.unwrap();
            sqlx::query_scalar(sqlx::AssertSqlSafe(
                sql.replace("header_names ||", "header_names::text ||"),
            ))
            .bind(app.tenant.as_str())
            .bind(SERVER)
            .fetch_optional(&owner)
            .await
            .unwrap()
        }
    }
}

#[tokio::test]
async fn a_route_is_created_read_replaced_and_deleted() {
    let app = TestApp::new().await;
    publish(&app, "1.0.0", json!([]), true).await;
    let path = guard_path(&app);

    // None yet.
    app.get(&path, &app.admin())
        .await
        .problem(404, "guard_route_not_found");

    let r = put(&app, body(), None).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(r.header("etag").as_deref(), Some("\"r1\""));
    let created = r.json();
    assert_eq!(created["server"], SERVER);
    assert_eq!(created["upstream"]["url"], UPSTREAM);
    assert_eq!(
        created["upstream"]["header_names"],
        json!(["Authorization", "X-Team"])
    );
    assert_eq!(created["version"], "latest");
    assert_eq!(created["mode"], Value::Null);
    assert_eq!(created["calls"], "all");
    assert_eq!(created["revision"], 1);
    assert_eq!(created["updated_by"], "alice-admin");

    // Read by each role that may, under any spelling of the name.
    for roles in [&["admin"][..], &["reviewer"], &["client"]] {
        let token = app.as_roles("someone", roles);
        let r = app.get(&path, &token).await;
        assert_eq!(r.status, 200, "{roles:?}");
        assert_eq!(r.header("etag").as_deref(), Some("\"r1\""));
        assert_eq!(r.json(), created);
    }
    let upper = format!(
        "/v1/tenants/{}/servers/{}/guard",
        app.tenant,
        enc(&SERVER.to_ascii_uppercase())
    );
    assert_eq!(app.get(&upper, &app.admin()).await.json(), created);

    // Replaced: 200, the revision bumped, created_at kept.
    let r = put(
        &app,
        json!({"upstream": {"url": "http://127.0.0.1:10/other"}, "version": "1.0.0",
            "mode": "strict", "calls": "read_only"}),
        Some("\"r1\""),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(r.header("etag").as_deref(), Some("\"r2\""));
    let replaced = r.json();
    assert_eq!(replaced["revision"], 2);
    assert_eq!(replaced["version"], "1.0.0");
    assert_eq!(replaced["mode"], "strict");
    assert_eq!(replaced["calls"], "read_only");
    assert_eq!(replaced["upstream"]["header_names"], json!([]));
    assert_eq!(replaced["created_at"], created["created_at"]);
    assert_eq!(app.get(&path, &app.admin()).await.json(), replaced);
    // A replacement without headers stores none.
    let row = app
        .store
        .guard()
        .route(&app.tenant, SERVER)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.headers_sealed, None);

    // Deleted: 204, then 404 for a read and a second delete.
    let admin = app.admin();
    let r = app.send("DELETE", &path, Some(&admin), None).await;
    assert_eq!(r.status, 204);
    app.get(&path, &admin)
        .await
        .problem(404, "guard_route_not_found");
    app.send("DELETE", &path, Some(&admin), None)
        .await
        .problem(404, "guard_route_not_found");
    assert_eq!(raw_row(&app).await, None);

    // Each write appended its event.
    let audit = audit_text(&app).await;
    assert_eq!(audit.matches("\"guard.route.put\"").count(), 2, "{audit}");
    assert_eq!(
        audit.matches("\"guard.route.deleted\"").count(),
        1,
        "{audit}"
    );
    assert!(audit.contains("X-Team"));
    assert!(!audit.contains("guard-upstream-secret"));

    // Created again after a delete: 201 at revision 1.
    assert_eq!(put(&app, body(), None).await.status, 201);
}

#[tokio::test]
async fn header_values_are_sealed_at_rest_and_never_shown() {
    let app = TestApp::new().await;
    publish(&app, "1.0.0", json!([]), true).await;
    let r = put(&app, body(), None).await;
    assert_eq!(r.status, 201);
    assert!(!String::from_utf8_lossy(&r.bytes).contains("guard-upstream-secret"));
    let read = app.get(&guard_path(&app), &app.admin()).await;
    let text = String::from_utf8_lossy(&read.bytes).into_owned();
    assert!(text.contains("Authorization") && !text.contains("guard-upstream-secret"));
    assert!(!text.contains("blue"), "{text}");

    // The row holds neither value in plain.
    let row = raw_row(&app).await.expect("the row");
    assert!(
        !row.contains("guard-upstream-secret") && !row.contains("blue"),
        "{row}"
    );
    assert!(
        row.contains("Authorization") && row.contains(UPSTREAM),
        "{row}"
    );

    // Sealed with the keyring, for the tenant and the route's server.
    let route = app
        .store
        .guard()
        .route(&app.tenant, SERVER)
        .await
        .unwrap()
        .unwrap();
    let sealed = route.headers_sealed.expect("headers are stored sealed");
    let ring = app.keyring();
    let plain = ring
        .open_bound(&app.tenant, &headers_context(SERVER), &sealed)
        .unwrap();
    let pairs: Vec<(String, String)> = serde_json::from_slice(&plain).unwrap();
    assert_eq!(
        pairs,
        [
            ("Authorization".to_owned(), SECRET.to_owned()),
            ("X-Team".to_owned(), "blue".to_owned())
        ]
    );
    assert!(
        ring.open_bound(
            &app.tenant,
            &headers_context("io.github.acme/other"),
            &sealed
        )
        .is_err()
    );
    let other = app.new_tenant().await;
    assert!(
        ring.open_bound(&other, &headers_context(SERVER), &sealed)
            .is_err()
    );
}

#[tokio::test]
async fn if_match_guards_a_replacement() {
    let app = TestApp::new().await;
    publish(&app, "1.0.0", json!([]), true).await;
    // No route yet: any revision is stale.
    put(&app, body(), Some("\"r1\""))
        .await
        .problem(412, "precondition_failed");
    assert_eq!(raw_row(&app).await, None);
    assert_eq!(put(&app, body(), None).await.status, 201);
    let p = put(&app, body(), Some("\"r7\""))
        .await
        .problem(412, "precondition_failed");
    assert_eq!(p["current_revision"], 1);
    put(&app, body(), Some("r1"))
        .await
        .problem(412, "precondition_failed");
    let r = put(&app, body(), Some("\"r1\"")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("etag").as_deref(), Some("\"r2\""));
    put(&app, body(), Some("\"r1\""))
        .await
        .problem(412, "precondition_failed");
    // `*` is no condition.
    assert_eq!(put(&app, body(), Some("*")).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_conflicting_puts_with_if_match_have_one_winner() {
    let app = Arc::new(TestApp::new().await);
    publish(&app, "1.0.0", json!([]), true).await;
    assert_eq!(put(&app, body(), None).await.status, 201);
    let mut tasks = Vec::new();
    for i in 0..8 {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            let mut b = body();
            b["calls"] = json!(if i % 2 == 0 {
                "read_only"
            } else {
                "non_destructive"
            });
            put(&app, b, Some("\"r1\"")).await.status.as_u16()
        }));
    }
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 412, 412, 412, 412, 412, 412, 412]);
    let r = app.get(&guard_path(&app), &app.admin()).await;
    assert_eq!(r.json()["revision"], 2);
    assert_eq!(
        audit_text(&app)
            .await
            .matches("\"guard.route.put\"")
            .count(),
        2
    );
}

#[tokio::test]
async fn bad_bodies_and_bad_callers_are_refused_and_nothing_is_stored() {
    let app = TestApp::new().await;
    publish(&app, "1.0.0", json!([]), true).await;
    let path = guard_path(&app);
    let admin = app.admin();
    let raw = |bytes: &'static [u8]| {
        let app = &app;
        let path = path.clone();
        let admin = admin.clone();
        async move {
            app.send_raw("PUT", &path, Some(&admin), Some(bytes), &[])
                .await
        }
    };
    raw(b"{\"upstream\": ").await.problem(400, "malformed_json");
    raw(br#"{"upstream": {}, "upstream": {}}"#)
        .await
        .problem(400, "duplicate_key");
    for bad in [
        json!({}),
        json!({"upstream": "http://127.0.0.1:9/mcp"}),
        json!({"upstream": {"url": 7}}),
        json!({"upstream": {"url": null}}),
        json!({"upstream": {}, "mode": "lenient"}),
        json!({"upstream": {}, "calls": "some"}),
        json!({"upstream": {}, "calls": null}),
        json!({"upstream": {}, "version": 1}),
        json!({"upstream": {"headers": {"X": 1}}}),
        json!({"upstream": {}, "extra": true}),
        json!({"upstream": {"url": UPSTREAM, "proxy": "x"}}),
    ] {
        let r = put(&app, bad.clone(), None).await;
        assert_eq!(
            r.status,
            422,
            "{bad}: {}",
            String::from_utf8_lossy(&r.bytes)
        );
    }
    // The upstream's own checks, every problem at its pointer.
    let p = put(
        &app,
        json!({"upstream": {"url": "ftp://x/", "headers": {
            "Mcp-Session-Id": "a", "X-Key": "a", "x-key": "b", "bad name": "c"}},
            "version": "one"}),
        None,
    )
    .await
    .problem(422, "validation_failed");
    let codes: Vec<(String, String)> = p["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["pointer"].as_str().unwrap().to_owned(),
                e["code"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for want in [
        ("/upstream/url", "invalid_url"),
        ("/upstream/headers/Mcp-Session-Id", "reserved_header"),
        ("/upstream/headers/x-key", "duplicate_header"),
        ("/upstream/headers/bad name", "invalid_header"),
        ("/version", "invalid_version"),
    ] {
        assert!(
            codes.contains(&(want.0.to_owned(), want.1.to_owned())),
            "{want:?} in {codes:?}"
        );
    }
    assert_eq!(raw_row(&app).await, None, "nothing stored");

    // The edge: no token, a wrong role, another tenant's token.
    let bytes = body().to_string().into_bytes();
    app.send_raw("PUT", &path, None, Some(&bytes), &[])
        .await
        .problem(401, "unauthenticated");
    app.send("GET", &path, None, None)
        .await
        .problem(401, "unauthenticated");
    for roles in [&["client"][..], &["reviewer"], &["publisher"]] {
        app.send_raw(
            "PUT",
            &path,
            Some(&app.as_roles("x", roles)),
            Some(&bytes),
            &[],
        )
        .await
        .problem(403, "forbidden_role");
        app.send("DELETE", &path, Some(&app.as_roles("x", roles)), None)
            .await
            .problem(403, "forbidden_role");
    }
    for roles in [&["publisher"][..], &["reader"]] {
        app.get(&path, &app.as_roles("x", roles))
            .await
            .problem(403, "forbidden_role");
    }
    let other = app.new_tenant().await;
    let outsider = token("eve", Some(other.as_str()), &["admin"]);
    app.send_raw("PUT", &path, Some(&outsider), Some(&bytes), &[])
        .await
        .problem(404, "tenant_not_found");
    app.get(&path, &outsider)
        .await
        .problem(404, "tenant_not_found");
    assert_eq!(raw_row(&app).await, None, "nothing stored");

    // A server the tenant does not have, an exact version it does not have.
    for missing in ["io.github.acme/missing", "not-a-name"] {
        let p = format!("/v1/tenants/{}/servers/{}/guard", app.tenant, enc(missing));
        app.send_raw("PUT", &p, Some(&admin), Some(&bytes), &[])
            .await
            .problem(404, "server_not_found");
        app.get(&p, &admin).await.problem(404, "server_not_found");
        app.send("DELETE", &p, Some(&admin), None)
            .await
            .problem(404, "server_not_found");
    }
    let mut b = body();
    b["version"] = json!("9.9.9");
    put(&app, b, None).await.problem(404, "version_not_found");
    assert_eq!(raw_row(&app).await, None, "nothing stored");
}

#[tokio::test]
async fn oversize_bodies_are_413() {
    let app = TestApp::build(test_issuers(), |c| c.body_limit_bytes = 4096).await;
    publish(&app, "1.0.0", json!([]), true).await;
    let mut b = body();
    b["upstream"]["headers"]["X-Pad"] = json!("x".repeat(8192));
    put(&app, b, None).await.problem(413, "body_too_large");
    assert_eq!(raw_row(&app).await, None);
}

#[tokio::test]
async fn internal_upstreams_are_refused_unless_the_tenant_allows_them() {
    let app = TestApp::build(test_issuers(), |c| c.egress.allow_loopback = Some(false)).await;
    publish(
        &app,
        "1.0.0",
        json!([remote("http://127.0.0.1:8090/mcp")]),
        true,
    )
    .await;
    for url in [
        UPSTREAM,
        "http://10.0.0.7/mcp",
        "http://[::1]:9/mcp",
        "http://127.1:9/",
    ] {
        let r = put(&app, json!({"upstream": {"url": url}}), None).await;
        r.problem(422, "upstream_not_allowed");
    }
    // Taken from the card, the same address is refused the same way.
    put(&app, json!({"upstream": {}}), None)
        .await
        .problem(422, "upstream_not_allowed");
    assert_eq!(raw_row(&app).await, None, "nothing stored");

    // Named in the tenant's egress_allow, it is accepted.
    let policy = format!("/v1/tenants/{}/policy", app.tenant);
    let current = app.get(&policy, &app.admin()).await;
    let etag = current.header("etag").unwrap();
    let mut p = current.json();
    for k in ["revision", "updated_at", "updated_by"] {
        p.as_object_mut().unwrap().remove(k);
    }
    p["egress_allow"] = json!(["127.0.0.1"]);
    let r = app
        .send_raw(
            "PUT",
            &policy,
            Some(&app.admin()),
            Some(p.to_string().as_bytes()),
            &[("if-match", &etag)],
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    let r = put(&app, json!({"upstream": {}}), None).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
}

#[tokio::test]
async fn the_url_comes_from_the_approved_card_only_when_it_names_one_remote() {
    let app = TestApp::new().await;
    let omitted = json!({"upstream": {"headers": {"Authorization": SECRET}}});
    // No approved version yet: nothing to take it from.
    publish(&app, "1.0.0", json!([remote(UPSTREAM)]), false).await;
    put(&app, omitted.clone(), None)
        .await
        .problem(422, "upstream_url_required");
    // An exact pin on an unapproved version neither.
    let mut exact = omitted.clone();
    exact["version"] = json!("1.0.0");
    put(&app, exact.clone(), None)
        .await
        .problem(422, "upstream_url_required");

    // One streamable-http remote (beside an SSE one): taken.
    publish(
        &app,
        "1.1.0",
        json!([remote(UPSTREAM), {"type": "sse", "url": "http://127.0.0.1:9/sse"}]),
        true,
    )
    .await;
    let r = put(&app, omitted.clone(), None).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(r.json()["upstream"]["url"], Value::Null);

    // `latest` now selects a card with two: refused, the route unchanged.
    publish(
        &app,
        "1.2.0",
        json!([remote(UPSTREAM), remote("http://127.0.0.1:10/mcp")]),
        true,
    )
    .await;
    let p = put(&app, omitted.clone(), None)
        .await
        .problem(422, "upstream_url_required");
    assert!(
        p["detail"].as_str().unwrap().contains("2 streamable-http"),
        "{p}"
    );
    // An exact pin on the one with one remote: accepted.
    let mut pinned = omitted.clone();
    pinned["version"] = json!("1.1.0");
    assert_eq!(put(&app, pinned, None).await.status, 200);

    // A card with none.
    publish(&app, "1.3.0", json!([]), true).await;
    let p = put(&app, omitted.clone(), None)
        .await
        .problem(422, "upstream_url_required");
    assert!(
        p["detail"].as_str().unwrap().contains("no streamable-http"),
        "{p}"
    );
    // A URL given needs no card.
    assert_eq!(put(&app, body(), None).await.status, 200);
    assert_eq!(
        app.get(&guard_path(&app), &app.admin()).await.json()["revision"],
        3
    );
}

#[tokio::test]
async fn a_drift_is_recorded_once_across_replicas() {
    let app = TestApp::new().await;
    publish(&app, "1.0.0", json!([]), true).await;
    let replica = app.replica().await;
    let event = |at| NewAuditEvent {
        server: Some(SERVER.to_owned()),
        ..NewAuditEvent::new(
            "guard.drift",
            "guard",
            Timestamp::from_millis(at),
            json!({"pinned": "sha256:a", "upstream": "sha256:b"}),
        )
    };
    let store = app.store.guard();
    assert!(
        store
            .record_drift(&app.tenant, SERVER, "sha256:a", "sha256:b", &event(1))
            .await
            .unwrap()
    );
    assert!(
        !store
            .record_drift(&app.tenant, SERVER, "sha256:a", "sha256:b", &event(2))
            .await
            .unwrap()
    );
    assert!(
        !replica
            .store
            .guard()
            .record_drift(
                &app.tenant,
                &SERVER.to_ascii_uppercase(),
                "sha256:a",
                "sha256:b",
                &event(3)
            )
            .await
            .unwrap()
    );
    assert_eq!(audit_text(&app).await.matches("\"guard.drift\"").count(), 1);
    // Another upstream list is another drift.
    assert!(
        store
            .record_drift(&app.tenant, SERVER, "sha256:a", "sha256:c", &event(4))
            .await
            .unwrap()
    );
    assert_eq!(audit_text(&app).await.matches("\"guard.drift\"").count(), 2);
}

#[tokio::test]
async fn on_postgres_another_tenants_routes_and_drifts_are_invisible_and_unwritable() {
    let app = TestApp::new().await;
    let Store::Postgres(pg) = &app.store else {
        eprintln!("notice: row-level security is PostgreSQL's; skipped on SQLite");
        return;
    };
    publish(&app, "1.0.0", json!([]), true).await;
    assert_eq!(put(&app, body(), None).await.status, 201);
    let event = NewAuditEvent::new("guard.drift", "guard", Timestamp::from_millis(1), json!({}));
    assert!(
        app.store
            .guard()
            .record_drift(&app.tenant, SERVER, "sha256:a", "sha256:b", &event)
            .await
            .unwrap()
    );
    let b = app.new_tenant().await;
    let mut tx = pg.pool().begin().await.unwrap();
    sqlx::query("SELECT set_config('app.tenant_id', $1, true)")
        .bind(b.as_str())
        .execute(&mut *tx)
        .await
        .unwrap();
    for table in ["guard_routes", "guard_drifts"] {
        let n: i64 =
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
                .fetch_one(&mut *tx)
                .await
                .unwrap();
        assert_eq!(n, 0, "{table}: A's rows visible to B");
    }
    let gone = sqlx::query("DELETE FROM guard_routes WHERE tenant_id = $1")
        .bind(app.tenant.as_str())
        .execute(&mut *tx)
        .await
        .unwrap()
        .rows_affected();
    assert_eq!(gone, 0);
    let denied = sqlx::query(
        "INSERT INTO guard_drifts (tenant_id, server, pinned_digest, upstream_digest, first_seen)
         VALUES ($1, $2, 'x', 'y', 0)",
    )
    .bind(app.tenant.as_str())
    .bind(SERVER)
    .execute(&mut *tx)
    .await
    .unwrap_err();
    assert!(
        denied.to_string().contains("row-level security"),
        "{denied}"
    );
    tx.rollback().await.unwrap();
    // A drift is never changed or removed by the runtime role.
    let mut tx = pg.pool().begin().await.unwrap();
    sqlx::query("SELECT set_config('app.tenant_id', $1, true)")
        .bind(app.tenant.as_str())
        .execute(&mut *tx)
        .await
        .unwrap();
    let denied = sqlx::query("DELETE FROM guard_drifts")
        .execute(&mut *tx)
        .await
        .unwrap_err();
    assert!(denied.to_string().contains("permission denied"), "{denied}");
    tx.rollback().await.unwrap();
}
