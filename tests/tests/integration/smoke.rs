//! Real-TCP smoke tests: startup in dev mode, tokens, graceful shutdown.

use std::time::{Duration, Instant};

use pinfold_tests::*;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn start_dev() -> (pinfold_server::serve::Running, FreshDb) {
    let db = fresh_db().await;
    let mut cfg = config_for(&db);
    cfg.listen = "127.0.0.1:0".into();
    let running = pinfold_server::serve::start(cfg, None)
        .await
        .expect("start");
    (running, db)
}

#[tokio::test]
async fn dev_mode_starts_prints_working_tokens_and_stops() {
    let (running, db) = start_dev().await;
    assert_eq!(
        running.backend,
        match backend() {
            Backend::Sqlite => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    );
    let base = format!("http://{}", running.addr);
    let tokens = running.dev_tokens.clone().expect("dev tokens");
    let http = reqwest::Client::new();
    let r = http.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = http.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    // The admin token works on the ready-made tenant.
    let r = http
        .get(format!("{base}/v1/tenants/dev"))
        .bearer_auth(&tokens.admin)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["id"], "dev");
    // The platform token creates tenants; the client token cannot.
    let r = http
        .post(format!("{base}/v1/tenants"))
        .bearer_auth(&tokens.platform)
        .json(&serde_json::json!({"id": "smoke", "name": "Smoke"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let r = http
        .get(format!("{base}/v1/tenants/dev/policy"))
        .bearer_auth(&tokens.client)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = http
        .put(format!("{base}/v1/tenants/dev/policy"))
        .bearer_auth(&tokens.client)
        .json(&serde_json::json!({"enforcement_mode": "strict", "approval_required": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    // `pinfold token` mints with the same key.
    let mut out = Vec::new();
    pinfold_server::cli::token(
        pinfold_server::cli::TokenArgs {
            data_dir: db.dir.path().to_path_buf(),
            sub: "script".into(),
            tenant: Some("dev".into()),
            roles: vec!["reader".into()],
            ttl: "5m".into(),
        },
        &mut out,
    )
    .unwrap();
    let minted = String::from_utf8(out).unwrap();
    let r = http
        .get(format!("{base}/v1/tenants/dev"))
        .bearer_auth(minted.trim())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    running.shutdown().await.unwrap();
    assert!(
        http.get(format!("{base}/healthz")).send().await.is_err(),
        "stopped"
    );
}

#[tokio::test]
async fn a_restart_reuses_the_dev_key_and_tenant() {
    let db = fresh_db().await;
    let mut cfg = config_for(&db);
    cfg.listen = "127.0.0.1:0".into();
    let first = pinfold_server::serve::start(cfg.clone(), None)
        .await
        .unwrap();
    let token = first.dev_tokens.clone().unwrap().admin;
    first.shutdown().await.unwrap();
    let second = pinfold_server::serve::start(cfg, None).await.unwrap();
    let r = reqwest::Client::new()
        .get(format!("http://{}/v1/tenants/dev", second.addr))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "a token from the first run still verifies");
    second.shutdown().await.unwrap();
}

#[tokio::test]
async fn shutdown_lets_in_flight_requests_finish() {
    let (running, _db) = start_dev().await;
    let token = running.dev_tokens.clone().unwrap().platform;
    let addr = running.addr;
    let body = br#"{"id":"inflight","name":"Finished after shutdown began"}"#;
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    // `Expect: 100-continue` makes the server say when the handler starts
    // reading the body: from then on the request is in flight.
    let head = format!(
        "POST /v1/tenants HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n",
        body.len()
    );
    sock.write_all(head.as_bytes()).await.unwrap();
    sock.flush().await.unwrap();
    let interim = read_head(&mut sock).await;
    assert!(interim.starts_with("HTTP/1.1 100"), "{interim}");
    sock.write_all(&body[..10]).await.unwrap();
    sock.flush().await.unwrap();
    // Begin shutdown while the request body is still arriving, and wait
    // until the server has stopped accepting connections.
    let stopping = tokio::spawn(running.shutdown());
    let deadline = Instant::now() + Duration::from_secs(5);
    while tokio::net::TcpStream::connect(addr).await.is_ok() {
        assert!(Instant::now() < deadline, "still accepting after 5 s");
        tokio::task::yield_now().await;
    }
    sock.write_all(&body[10..]).await.unwrap();
    let mut resp = String::new();
    sock.read_to_string(&mut resp).await.unwrap();
    assert!(resp.starts_with("HTTP/1.1 201"), "{resp}");
    stopping.await.unwrap().unwrap();
    // New connections are still refused once stopped.
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

/// Reads one response head (up to the blank line) from `sock`.
async fn read_head(sock: &mut tokio::net::TcpStream) -> String {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        let n = sock.read(&mut byte).await.unwrap();
        assert_eq!(n, 1, "connection closed after {head:?}");
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

#[tokio::test]
async fn non_loopback_without_issuers_is_refused() {
    let db = fresh_db().await;
    let mut cfg = config_for(&db);
    cfg.listen = "0.0.0.0:0".into();
    let err = pinfold_server::serve::start(cfg, None)
        .await
        .err()
        .expect("refused");
    assert!(format!("{err:#}").contains("--dev"), "{err:#}");
}
