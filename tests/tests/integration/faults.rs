//! Fault injection: the database stopped under a running app, `kill -9`
//! during a burst of publishes, and upstream MCP servers that hang,
//! trickle, stream without end or answer too much.
//!
//! The database faults run on a throwaway PostgreSQL cluster
//! ([`signet_tests::pgcluster`]) on a spare port, never on the cluster of
//! `SIGNET_TEST_DATABASE_URL`.

use std::time::Duration;

use serde_json::{Value, json};
use signet_example_upstream::{Running, Switches};
use signet_tests::pgcluster::Cluster;
use signet_tests::*;

const CARD: &str = include_str!("../../../examples/manage-files-1.0.0.json");

fn card() -> Value {
    serde_json::from_str(CARD).unwrap()
}

fn server() -> String {
    card()["name"].as_str().unwrap().to_owned()
}

fn version_path(app: &TestApp, version: &str) -> String {
    format!(
        "/v1/tenants/{}/servers/{}/versions/{version}",
        app.tenant,
        server().replace('/', "%2F")
    )
}

fn client(app: &TestApp) -> String {
    app.as_roles("carl-client", &["client"])
}

/// Publishes the reference card as `version`; the response.
async fn put_version(app: &TestApp, version: &str) -> Resp {
    let mut c = card();
    c["version"] = json!(version);
    app.send(
        "PUT",
        &version_path(app, version),
        Some(&app.as_roles("pat", &["publisher"])),
        Some(c),
    )
    .await
}

/// Publishes and approves the reference card as 1.0.0.
async fn publish_approved(app: &TestApp) {
    let r = put_version(app, "1.0.0").await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    let r = app
        .send(
            "POST",
            &format!("{}/review", version_path(app, "1.0.0")),
            Some(&app.as_roles("rita", &["reviewer"])),
            Some(json!({"decision": "approve"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
}

/// Opens a resolve session on the upstream at `url`; its path.
async fn session(app: &TestApp, url: &str) -> String {
    let r = app
        .send(
            "POST",
            &format!("/v1/tenants/{}/sessions", app.tenant),
            Some(&client(app)),
            Some(json!({"server": server(), "upstream": {"url": url}})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    format!(
        "/v1/tenants/{}/sessions/{}",
        app.tenant,
        r.json()["id"].as_str().unwrap()
    )
}

async fn resolve(app: &TestApp, session: &str, arguments: Value) -> Resp {
    app.send(
        "POST",
        &format!("{session}/resolve"),
        Some(&client(app)),
        Some(json!({"name": "manage_files", "arguments": arguments})),
    )
    .await
}

/// Asserts a 503 `database_unavailable` with `Retry-After: 2`.
#[track_caller]
fn assert_db_unavailable(r: &Resp) {
    r.problem(503, "database_unavailable");
    assert_eq!(r.header("retry-after").as_deref(), Some("2"));
}

#[tokio::test]
async fn postgres_stopped_mid_run_answers_503_serves_what_is_cached_and_recovers() {
    let Some(pg) = Cluster::start() else {
        return;
    };
    let url = pg.url();
    let app = TestApp::build(test_issuers(), |cfg| {
        cfg.database_url = url.clone();
        cfg.postgres.acquire_timeout_secs = 1;
    })
    .await;
    let mut listener = app.registry_listener().expect("a PostgreSQL app");
    listener
        .wait_for(|s| s.listening)
        .await
        .expect("listener runs");
    publish_approved(&app).await;
    // Warm a 304 and a cached resolve hit.
    let reader = app.as_roles("reader", &["reader"]);
    let path = version_path(&app, "1.0.0");
    let etag = app.get(&path, &reader).await.header("etag").unwrap();
    let inm = [("if-none-match", etag.as_str())];
    let conditional = || app.send_raw("GET", &path, Some(&reader), None, &inm);
    assert_eq!(conditional().await.status, 304);
    let up = Running::start("127.0.0.1:0".parse().unwrap(), Switches::default())
        .await
        .expect("reference upstream starts");
    let s = session(&app, &up.url()).await;
    let args = json!({"path": "/notes.txt", "action": "read"});
    let first = resolve(&app, &s, args.clone()).await;
    assert_eq!(
        first.status,
        200,
        "{}",
        String::from_utf8_lossy(&first.bytes)
    );
    assert_eq!(first.json()["source"], "upstream");
    let hit = resolve(&app, &s, args.clone()).await.json();
    assert_eq!(hit["source"], "cache");

    pg.stop();
    listener
        .wait_for(|s| !s.listening)
        .await
        .expect("the listener sees the connection go");
    // Writes: 503 with Retry-After and a clear code, not a 500.
    assert_db_unavailable(&put_version(&app, "1.0.1").await);
    assert_db_unavailable(
        &app.send(
            "POST",
            &format!("/v1/tenants/{}/sessions", app.tenant),
            Some(&client(&app)),
            Some(json!({"server": server(), "upstream": {"url": up.url()}})),
        )
        .await,
    );
    // Readiness fails.
    assert_db_unavailable(&app.send("GET", "/readyz", None, None).await);
    // What was cached is still served: the 304 and the resolve hit.
    assert_eq!(conditional().await.status, 304);
    let during = resolve(&app, &s, args.clone()).await;
    assert_eq!(
        during.status,
        200,
        "{}",
        String::from_utf8_lossy(&during.bytes)
    );
    assert_eq!(during.json()["source"], "cache");
    assert_eq!(during.json()["tool"], hit["tool"]);

    // Back up: everything recovers without restarting the app.
    pg.start_again();
    let mut ready = false;
    for _ in 0..120 {
        if app.send("GET", "/readyz", None, None).await.status == 200 {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(ready, "/readyz recovers once PostgreSQL is back");
    listener
        .wait_for(|s| s.listening)
        .await
        .expect("the listener listens again");
    let r = put_version(&app, "1.0.1").await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(conditional().await.status, 304);
    let s2 = session(&app, &up.url()).await;
    let again = resolve(&app, &s2, args).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.json()["source"], "upstream");
}
