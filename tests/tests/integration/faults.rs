//! Fault injection: the database stopped under a running app, `kill -9`
//! during a burst of publishes, and upstream MCP servers that hang,
//! trickle, stream without end or answer too much.
//!
//! The database faults run on a throwaway PostgreSQL cluster
//! ([`pinfold_tests::pgcluster`]) on a spare port, never on the cluster of
//! `PINFOLD_TEST_DATABASE_URL`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pinfold_example_upstream::{Running, Switches};
use pinfold_tests::pgcluster::Cluster;
use pinfold_tests::*;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

    let gaps = listener.borrow().gaps;
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
    assert_eq!(
        listener.borrow().gaps,
        gaps,
        "losing the connection empties no cache"
    );

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
    let back = *listener
        .wait_for(|s| s.listening)
        .await
        .expect("the listener listens again");
    assert_eq!(
        back.gaps,
        gaps + 1,
        "once LISTEN is back, what may have been missed is dropped, once"
    );
    let r = put_version(&app, "1.0.1").await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(conditional().await.status, 304);
    let s2 = session(&app, &up.url()).await;
    let again = resolve(&app, &s2, args).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.json()["source"], "upstream");
}

/// How a misbehaving upstream answers every request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Misbehaviour {
    /// Reads the request and never answers.
    Hang,
    /// Sends a JSON answer's head, then one byte every 100 ms.
    Trickle,
    /// An event stream of comments that never carries an answer.
    EndlessPings,
    /// An event stream whose first event never ends.
    EndlessEvent,
    /// A JSON answer of 2 MiB.
    Oversized,
}

/// Which MCP handshake a misbehaving upstream answers properly before it
/// misbehaves on the resolve call itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Handshake {
    /// None: it misbehaves from the first request.
    None,
    /// 2025-11-25: `server/discover` refused as a legacy server would, then
    /// `initialize` and notifications (the call goes through rmcp).
    Legacy,
    /// 2026-07-28: `server/discover` answered, `subscriptions/listen`
    /// refused (the call is Pinfold's own sessionless request).
    Sessionless,
}

/// A raw TCP upstream that misbehaves and counts the connections on which
/// it started misbehaving and those of them Pinfold closed.
struct BadUpstream {
    addr: std::net::SocketAddr,
    stuck: Arc<AtomicUsize>,
    closed: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for BadUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one request (head and `Content-Length` body): its request line
/// and body; `None` when the peer closed first.
async fn read_request(r: &mut (impl AsyncReadExt + Unpin)) -> Option<(String, Value)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                match r.read(&mut chunk).await {
                    Ok(0) | Err(_) => return None,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let line = head.lines().next().unwrap_or_default().to_owned();
            let body = serde_json::from_slice(&buf[end + 4..end + 4 + len]).unwrap_or(Value::Null);
            return Some((line, body));
        }
        match r.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// The proper answer to a handshake request, or `None` for the request to
/// misbehave on.
fn handshake_answer(handshake: Handshake, line: &str, body: &Value) -> Option<String> {
    if handshake == Handshake::None {
        return None;
    }
    let empty = |status: &str| format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n");
    if line.starts_with("GET") {
        return Some(empty("405 Method Not Allowed"));
    }
    if line.starts_with("DELETE") {
        return Some(empty("200 OK"));
    }
    let json = |v: Value| {
        let b = v.to_string();
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{b}",
            b.len()
        )
    };
    match (body["method"].as_str(), body.get("id")) {
        (Some(_), None) => Some(empty("202 Accepted")),
        (Some("initialize"), Some(id)) => Some(json(json!({"jsonrpc": "2.0", "id": id,
            "result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "bad-upstream", "version": "0.0.1"}}}))),
        (Some("server/discover"), Some(id)) if handshake == Handshake::Sessionless => {
            Some(json(json!({"jsonrpc": "2.0", "id": id, "result": {
                "resultType": "complete", "supportedVersions": ["2025-11-25", "2026-07-28"],
                "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "private",
                "_meta": {"io.modelcontextprotocol/serverInfo":
                    {"name": "bad-upstream", "version": "0.0.1"}}}})))
        }
        (Some("tools/resolve" | "tools/annotations"), Some(_)) => None,
        (_, id) => Some(json(json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32601, "message": "Method not found"}}))),
    }
}

async fn misbehave(w: &mut (impl AsyncWriteExt + Unpin), how: Misbehaviour) -> std::io::Result<()> {
    let tick = Duration::from_millis(100);
    match how {
        Misbehaviour::Hang => std::future::pending().await,
        Misbehaviour::Trickle => {
            w.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n",
            )
            .await?;
            loop {
                w.write_all(b" ").await?;
                w.flush().await?;
                tokio::time::sleep(tick).await;
            }
        }
        Misbehaviour::EndlessPings => {
            w.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
                .await?;
            loop {
                w.write_all(b": ping\n\n").await?;
                w.flush().await?;
                tokio::time::sleep(tick).await;
            }
        }
        Misbehaviour::EndlessEvent => {
            w.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: ")
                .await?;
            let filler = vec![b'x'; 64 * 1024];
            loop {
                w.write_all(&filler).await?;
            }
        }
        Misbehaviour::Oversized => {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":0,"result":{{"pad":"{}"}}}}"#,
                "x".repeat(2 * 1024 * 1024)
            );
            w.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    body.len()
                )
                .as_bytes(),
            )
            .await?;
            w.write_all(body.as_bytes()).await?;
            std::future::pending().await
        }
    }
}

impl BadUpstream {
    async fn start(how: Misbehaviour, handshake: Handshake) -> BadUpstream {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (stuck, closed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (s, c) = (stuck.clone(), closed.clone());
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = l.accept().await {
                let (s, c) = (s.clone(), c.clone());
                tokio::spawn(async move {
                    let (mut r, mut w) = sock.into_split();
                    while let Some((line, body)) = read_request(&mut r).await {
                        if let Some(answer) = handshake_answer(handshake, &line, &body) {
                            if w.write_all(answer.as_bytes()).await.is_err() {
                                return;
                            }
                            continue;
                        }
                        s.fetch_add(1, Ordering::SeqCst);
                        // Answer badly while watching for the close: a read
                        // of 0 bytes (or an error) means Pinfold let go.
                        let watch = async {
                            let mut b = [0u8; 1024];
                            loop {
                                match r.read(&mut b).await {
                                    Ok(0) | Err(_) => return,
                                    Ok(_) => {}
                                }
                            }
                        };
                        tokio::select! {
                            _ = watch => {}
                            _ = misbehave(&mut w, how) => {}
                        }
                        c.fetch_add(1, Ordering::SeqCst);
                        return;
                    }
                });
            }
        });
        BadUpstream {
            addr,
            stuck,
            closed,
            task,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Waits (bounded) until every connection it misbehaved on was closed
    /// by the client; whether they all were.
    async fn all_closed(&self) -> bool {
        for _ in 0..200 {
            let (a, c) = (
                self.stuck.load(Ordering::SeqCst),
                self.closed.load(Ordering::SeqCst),
            );
            if a > 0 && a == c {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }
}

#[tokio::test]
async fn upstreams_that_hang_trickle_stream_forever_or_answer_too_much_get_a_fallback() {
    let app = TestApp::build(test_issuers(), |cfg| {
        cfg.resolve.upstream_timeout_ms = 1_500;
    })
    .await;
    publish_approved(&app).await;
    // Misbehaving from the first request (the handshake), and only on the
    // resolve call of an established MCP connection.
    for handshake in [Handshake::None, Handshake::Legacy, Handshake::Sessionless] {
        for (how, reason) in [
            (Misbehaviour::Hang, "timeout"),
            (Misbehaviour::Trickle, "timeout"),
            (Misbehaviour::EndlessPings, "timeout"),
            // Cut by the size cap, not by the clock: bounded memory.
            (Misbehaviour::EndlessEvent, "upstream_error"),
            (Misbehaviour::Oversized, "upstream_error"),
        ] {
            misbehaving_upstream(&app, how, handshake, reason).await;
        }
    }
}

/// One session on an upstream misbehaving `how`: a fallback for `reason`,
/// and every connection it misbehaved on closed by Pinfold.
async fn misbehaving_upstream(
    app: &TestApp,
    how: Misbehaviour,
    handshake: Handshake,
    reason: &str,
) {
    let case = (how, handshake);
    let up = BadUpstream::start(how, handshake).await;
    let s = session(app, &up.url()).await;
    let r = resolve(app, &s, json!({"path": "/r", "action": "read"})).await;
    assert_eq!(
        r.status,
        200,
        "{case:?}: {}",
        String::from_utf8_lossy(&r.bytes)
    );
    let body = r.json();
    assert_eq!(body["source"], "fallback", "{case:?}: {body}");
    assert_eq!(body["reason"], reason, "{case:?}: {body}");
    assert_eq!(
        body["tool"]["annotations"]["destructiveHint"], true,
        "{case:?}: the worst case"
    );
    assert!(
        up.all_closed().await,
        "{case:?}: Pinfold closed its connections ({} misbehaved on, {} closed)",
        up.stuck.load(Ordering::SeqCst),
        up.closed.load(Ordering::SeqCst)
    );
}

/// A `pinfold serve` child process (the real binary) in dev mode.
struct Served {
    child: std::process::Child,
    base: String,
    token: String,
}

/// Starts `pinfold serve` on `database_url` with its data in `data_dir`, and
/// reads its banner (the address and the dev admin token).
fn serve_binary(data_dir: &std::path::Path, database_url: &str) -> Served {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(data_dir.join("serve.log"))
        .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_pinfold-under-test"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .args(["--database-url", database_url])
        .env_clear()
        .env("RUST_LOG", "warn")
        // One caller's burst of publishes is what this test is about, not
        // the per-caller publish limit (which would refuse most of it).
        .env("PINFOLD_RATE_LIMITS__ENABLED", "false")
        .stdout(std::process::Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("spawn pinfold serve");
    let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
    let banner = read_banner(&mut reader);
    // Keep draining stdout so the child never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    let base = banner
        .lines()
        .find_map(|l| l.split_once(" listening on ").map(|(_, b)| b.trim()))
        .expect("listening line")
        .to_owned();
    let token = banner
        .lines()
        .find_map(|l| l.trim().strip_prefix("export PINFOLD_TOKEN="))
        .and_then(|l| l.split_whitespace().next())
        .expect("dev admin token")
        .to_owned();
    Served { child, base, token }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const BURST: usize = 48;

/// Publishes `BURST` versions at once to a served binary, `kill -9`s it
/// once a quarter of them were acknowledged, restarts it on the same
/// database, and checks that every acknowledged version is there with its
/// digest and that every version there is whole.
async fn kill_during_a_burst_of_publishes(database_url: &str) {
    let data = tempfile::tempdir().unwrap();
    let mut served = serve_binary(data.path(), database_url);
    let http = reqwest::Client::new();
    let server = "io.github.acme/burst";
    let version_url = |base: &str, v: &str| {
        format!(
            "{base}/v1/tenants/dev/servers/{}/versions/{v}",
            server.replace('/', "%2F")
        )
    };
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let mut tasks = Vec::new();
    for i in 0..BURST {
        let version = format!("1.0.{i}");
        let url = version_url(&served.base, &version);
        let (http, token, done) = (http.clone(), served.token.clone(), done_tx.clone());
        let doc = json!({
            "name": server, "version": version, "description": format!("burst {i}"),
            "signature": {"tools": [{
                "name": format!("tool_{i}"), "description": "A tool",
                "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
                "annotations": {"readOnlyHint": i % 2 == 0}
            }], "prompts": [], "resources": [], "resourceTemplates": []}
        });
        tasks.push(tokio::spawn(async move {
            let r = http.put(url).bearer_auth(token).json(&doc).send().await;
            let _ = done.send(());
            match r {
                Ok(r) if r.status() == 201 => {
                    let body: Value = r.json().await.ok()?;
                    Some((version, body["digest"].as_str()?.to_owned()))
                }
                _ => None,
            }
        }));
    }
    drop(done_tx);
    for _ in 0..BURST / 4 {
        done_rx.recv().await;
    }
    served.child.kill().expect("kill -9");
    served.child.wait().unwrap();
    let mut acknowledged = Vec::new();
    for t in tasks {
        if let Some(v) = t.await.unwrap() {
            acknowledged.push(v);
        }
    }
    assert!(
        !acknowledged.is_empty(),
        "some publishes were acknowledged before the kill"
    );
    drop(served);

    let served = serve_binary(data.path(), database_url);
    let get = |url: String| {
        let (http, token) = (http.clone(), served.token.clone());
        async move { http.get(url).bearer_auth(token).send().await.unwrap() }
    };
    for (version, digest) in &acknowledged {
        let r = get(version_url(&served.base, version)).await;
        assert_eq!(r.status(), 200, "acknowledged {version} is present");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["digest"], digest.as_str(), "{version}: same digest");
    }
    // Every version that exists is whole: record, signature, card and tools.
    let list = get(format!(
        "{}/v1/tenants/dev/servers/{}",
        served.base,
        server.replace('/', "%2F")
    ))
    .await;
    assert_eq!(list.status(), 200);
    let list: Value = list.json().await.unwrap();
    let versions: Vec<String> = list["versions"]
        .as_array()
        .unwrap_or_else(|| panic!("versions in {list}"))
        .iter()
        .map(|v| v["version"].as_str().unwrap().to_owned())
        .collect();
    assert!(versions.len() >= acknowledged.len(), "{list}");
    for v in &versions {
        for view in ["", "/signature", "/card", "/tools"] {
            let r = get(format!("{}{view}", version_url(&served.base, v))).await;
            assert_eq!(r.status(), 200, "{v}{view} is readable");
        }
    }
    eprintln!(
        "kill -9 during {BURST} publishes: {} acknowledged, {} present, all whole",
        acknowledged.len(),
        versions.len()
    );
}

#[tokio::test]
async fn kill_9_during_publishes_loses_no_acknowledged_version_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("pinfold.db").display());
    kill_during_a_burst_of_publishes(&url).await;
}

#[tokio::test]
async fn kill_9_during_publishes_loses_no_acknowledged_version_on_postgres() {
    let Some(pg) = Cluster::start() else {
        return;
    };
    kill_during_a_burst_of_publishes(&pg.url()).await;
}
