//! Hostile clients over real TCP: slowloris headers, too many connections,
//! lying `Content-Length`s. Each test starts `pinfold serve` with tight
//! connection limits and checks that the server bounds the client (closes
//! it, answers 4xx, or makes it wait) and keeps answering others.
//!
//! The outer timeouts are upper bounds so that a regression fails instead
//! of hanging; nothing asserts how fast the server is.

use std::time::Duration;

use pinfold_tests::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Generous bound on anything the server must do "soon".
const BOUND: Duration = Duration::from_secs(30);

async fn start(
    tweak: impl FnOnce(&mut pinfold_server::config::Config),
) -> (pinfold_server::serve::Running, FreshDb) {
    let db = fresh_db().await;
    let mut cfg = config_for(&db);
    cfg.listen = "127.0.0.1:0".into();
    cfg.connections.header_read_timeout_secs = 1;
    cfg.request_timeout_secs = 1;
    cfg.body_limit_bytes = 4096;
    tweak(&mut cfg);
    let running = pinfold_server::serve::start(cfg, None)
        .await
        .expect("start");
    (running, db)
}

/// Reads until the server closes the connection (or `BOUND` passes: a
/// failure); returns what it sent.
async fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let read = tokio::time::timeout(BOUND, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the server kept the connection open");
    out
}

/// The status of the first response on `stream`.
async fn first_status(stream: &mut TcpStream) -> u16 {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    tokio::time::timeout(BOUND, async {
        while !got.windows(2).any(|w| w == b"\r\n") {
            let n = stream.read(&mut buf).await.expect("read");
            assert!(n > 0, "closed before a status line");
            got.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .expect("no answer from the server");
    let line = String::from_utf8_lossy(&got);
    line.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a status line: {line}"))
}

async fn healthz_ok(addr: std::net::SocketAddr) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(first_status(&mut s).await, 200);
}

#[tokio::test]
async fn a_client_sending_half_a_header_is_disconnected() {
    let (running, _db) = start(|_| {}).await;
    let mut slow = TcpStream::connect(running.addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: ")
        .await
        .unwrap();
    let sent = read_to_close(&mut slow).await;
    // Closed, with at most a 408 explaining why; never a 200.
    assert!(
        sent.is_empty() || sent.starts_with(b"HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&sent)
    );
    healthz_ok(running.addr).await;
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_header_trickled_a_byte_at_a_time_is_cut_off() {
    let (running, _db) = start(|_| {}).await;
    let mut slow = TcpStream::connect(running.addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nX-Slow: ")
        .await
        .unwrap();
    // One byte every 100 ms, without end: each byte arrives well within any
    // per-read timeout, so only a bound on the whole header stops it.
    let cut = tokio::time::timeout(BOUND, async {
        loop {
            if slow.write_all(b"a").await.is_err() {
                break;
            }
            let mut buf = [0u8; 256];
            let read = tokio::time::timeout(Duration::from_millis(100), slow.read(&mut buf)).await;
            if let Ok(Ok(0) | Err(_)) = read {
                break;
            }
        }
    })
    .await;
    assert!(cut.is_ok(), "a trickled header held the connection");
    healthz_ok(running.addr).await;
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_idle_connection_is_closed() {
    let (running, _db) = start(|_| {}).await;
    let mut idle = TcpStream::connect(running.addr).await.unwrap();
    let sent = read_to_close(&mut idle).await;
    assert!(
        sent.is_empty() || sent.starts_with(b"HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&sent)
    );
    // A kept-alive connection after its answer is idle too.
    let mut kept = TcpStream::connect(running.addr).await.unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    let sent = read_to_close(&mut kept).await;
    assert!(
        sent.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&sent)
    );
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn max_connections_makes_the_next_client_wait_its_turn() {
    let (running, _db) = start(|c| {
        c.connections.max_connections = 2;
        c.connections.header_read_timeout_secs = 60;
    })
    .await;
    let holder_a = TcpStream::connect(running.addr).await.unwrap();
    let _holder_b = TcpStream::connect(running.addr).await.unwrap();
    let mut third = TcpStream::connect(running.addr).await.unwrap();
    third
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 64];
    // Not served while both slots are taken (if the limit were ignored the
    // answer would be here at once).
    let early = tokio::time::timeout(Duration::from_millis(500), third.read(&mut buf)).await;
    assert!(early.is_err(), "answered past max_connections: {early:?}");
    // One holder leaves: the waiting client is accepted and answered.
    drop(holder_a);
    assert_eq!(first_status(&mut third).await, 200);
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_body_longer_than_its_content_length_is_not_read_as_the_body() {
    let (running, db) = start(|_| {}).await;
    let platform = running.dev_tokens.clone().unwrap().platform;
    let mut s = TcpStream::connect(running.addr).await.unwrap();
    let body = br#"{"id":"lying-length","name":"Declared ten bytes, sent many more"}"#;
    let head = format!(
        "POST /v1/tenants HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {platform}\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    // The first ten bytes are the body (not JSON: 400); the rest is not a
    // request.
    assert_eq!(first_status(&mut s).await, 400);
    read_to_close(&mut s).await;
    // Nothing was created from the longer text: a reader of that tenant
    // finds none (the platform token holds no role inside a tenant).
    let reader = pinfold_server::devkeys::DevKey::load(db.dir.path())
        .unwrap()
        .mint(
            "r",
            Some("lying-length"),
            &["reader"],
            Duration::from_secs(60),
        )
        .unwrap();
    let r = reqwest::Client::new()
        .get(format!("http://{}/v1/tenants/lying-length", running.addr))
        .bearer_auth(&reader)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    healthz_ok(running.addr).await;
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_huge_declared_length_is_413_before_any_body_is_read() {
    let (running, _db) = start(|_| {}).await;
    let platform = running.dev_tokens.clone().unwrap().platform;
    let mut s = TcpStream::connect(running.addr).await.unwrap();
    let head = format!(
        "POST /v1/tenants HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {platform}\r\nContent-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(b"{\"id\":").await.unwrap();
    assert_eq!(first_status(&mut s).await, 413);
    healthz_ok(running.addr).await;
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_body_that_stops_arriving_is_408_after_the_request_timeout() {
    let (running, _db) = start(|_| {}).await;
    let platform = running.dev_tokens.clone().unwrap().platform;
    let mut s = TcpStream::connect(running.addr).await.unwrap();
    // Under the body limit, so it is waited for, but only 6 bytes come.
    let head = format!(
        "POST /v1/tenants HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {platform}\r\nContent-Type: application/json\r\nContent-Length: 3000\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(b"{\"id\":").await.unwrap();
    assert_eq!(first_status(&mut s).await, 408);
    // And the connection is not kept for a body that never ends.
    read_to_close(&mut s).await;
    healthz_ok(running.addr).await;
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_chunked_body_over_the_limit_is_413_and_not_kept() {
    let (running, _db) = start(|_| {}).await;
    let platform = running.dev_tokens.clone().unwrap().platform;
    let mut s = TcpStream::connect(running.addr).await.unwrap();
    let head = format!(
        "POST /v1/tenants HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {platform}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    // 16 KiB in 1 KiB chunks against a 4 KiB limit; the server may stop
    // reading (and close) before all of it is written.
    let chunk = format!("400\r\n{}\r\n", "a".repeat(1024));
    for _ in 0..16 {
        if s.write_all(chunk.as_bytes()).await.is_err() {
            break;
        }
    }
    let _ = s.write_all(b"0\r\n\r\n").await;
    assert_eq!(first_status(&mut s).await, 413);
    healthz_ok(running.addr).await;
    running.shutdown().await.unwrap();
}
