//! `/metrics` protection: the scrape token, the client address allow-list
//! (against a real listener, whose TCP peer is the address checked), the
//! same settings from the environment of a real `pinfold serve`, and the
//! counters of scrapes and renderings.

use pinfold_tests::*;

/// A scrape token of the right shape, unique to each test.
fn scrape_token() -> String {
    format!("scrape-{}", uuid::Uuid::new_v4().simple())
}

/// The value of an unlabelled counter in a `/metrics` text.
fn counter(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

#[tokio::test]
async fn a_configured_scrape_token_is_required() {
    let token = scrape_token();
    let t = token.clone();
    let app = TestApp::build(test_issuers(), move |c| c.metrics.token = Some(t)).await;
    let r = app.send("GET", "/metrics", None, None).await;
    r.problem(401, "unauthenticated");
    let challenge = r.header("www-authenticate").unwrap();
    assert!(
        challenge.starts_with("Bearer realm=\"pinfold-metrics\""),
        "{challenge}"
    );
    // An API token is not the scrape token, nor is a near miss.
    for wrong in [app.admin(), format!("{token}x"), token[1..].to_owned()] {
        let r = app.get("/metrics", &wrong).await;
        r.problem(401, "invalid_token");
        let text = String::from_utf8_lossy(&r.bytes);
        assert!(!text.contains(&token), "the answer shows the token: {text}");
    }
    let r = app.get("/metrics", &token).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    let text = String::from_utf8(r.bytes).unwrap();
    assert!(text.contains("pinfold_build_info{"), "{text}");
    // The metrics record the refusals like any request; the other
    // operational routes need no token.
    assert!(
        text.contains(
            r#"pinfold_http_requests_total{route="/metrics",method="GET",status="401"} 4"#
        ),
        "{text}"
    );
    assert_eq!(app.send("GET", "/healthz", None, None).await.status, 200);
}

#[tokio::test]
async fn scrapes_and_renderings_are_counted_and_a_finished_rendering_is_not_reused() {
    let app = TestApp::new().await;
    let mut last = (0, 0);
    for i in 1..=3u64 {
        let r = app.send("GET", "/metrics", None, None).await;
        assert_eq!(r.status, 200);
        let text = String::from_utf8(r.bytes).unwrap();
        let now = (
            counter(&text, "pinfold_metrics_scrapes_total"),
            counter(&text, "pinfold_metrics_renders_total"),
        );
        // One after another, each scrape renders afresh.
        assert_eq!(now, (i, i), "{text}");
        assert!(now > last);
        last = now;
    }
}

/// A server listening on loopback with `[metrics]` tweaked.
async fn serve_with(
    tweak: impl FnOnce(&mut pinfold_server::config::Config),
) -> (pinfold_server::serve::Running, FreshDb) {
    let db = fresh_db().await;
    let mut cfg = config_for(&db);
    cfg.listen = "127.0.0.1:0".into();
    tweak(&mut cfg);
    let running = pinfold_server::serve::start(cfg, None)
        .await
        .expect("start");
    (running, db)
}

#[tokio::test]
async fn the_client_address_must_be_in_the_allow_list() {
    let http = reqwest::Client::new();
    // Loopback is not in the list: refused whatever the token.
    let token = scrape_token();
    let t = token.clone();
    let (running, _db) = serve_with(move |c| {
        c.metrics.allow_from = vec!["192.0.2.0/24".into(), "2001:db8::/32".into()];
        c.metrics.token = Some(t);
    })
    .await;
    let url = format!("http://{}/metrics", running.addr);
    for auth in [None, Some(token.as_str()), Some("not-the-token-at-all")] {
        let mut req = http.get(&url);
        if let Some(t) = auth {
            req = req.bearer_auth(t);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 403, "{auth:?}");
        assert_eq!(
            r.headers()["content-type"].to_str().unwrap(),
            "application/problem+json"
        );
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["code"], "address_not_allowed");
    }
    // The other routes do not care about the list.
    let r = http
        .get(format!("http://{}/healthz", running.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    running.shutdown().await.unwrap();

    // Loopback in the list: then the token decides.
    let t = token.clone();
    let (running, _db) = serve_with(move |c| {
        c.metrics.allow_from = vec!["10.0.0.0/8".into(), "127.0.0.0/8".into()];
        c.metrics.token = Some(t);
    })
    .await;
    let url = format!("http://{}/metrics", running.addr);
    assert_eq!(http.get(&url).send().await.unwrap().status(), 401);
    let r = http.get(&url).bearer_auth(&token).send().await.unwrap();
    assert_eq!(r.status(), 200);
    running.shutdown().await.unwrap();

    // An allow-list alone: no token needed from a listed address.
    let (running, _db) = serve_with(|c| c.metrics.allow_from = vec!["127.0.0.1".into()]).await;
    let url = format!("http://{}/metrics", running.addr);
    assert_eq!(http.get(&url).send().await.unwrap().status(), 200);
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn without_a_known_peer_an_allow_list_refuses() {
    // In-process requests carry no peer address: never admitted by a list.
    let app = TestApp::build(test_issuers(), |c| {
        c.metrics.allow_from = vec!["0.0.0.0/0".into(), "::/0".into()];
    })
    .await;
    app.send("GET", "/metrics", None, None)
        .await
        .problem(403, "address_not_allowed");
}

/// `PINFOLD_METRICS__TOKEN` and `PINFOLD_METRICS__ALLOW_FROM` protect a real
/// `pinfold serve`, which never writes the token to its output.
#[tokio::test]
async fn the_environment_protects_a_served_binary() {
    let dir = tempfile::tempdir().unwrap();
    let token = scrape_token();
    let log = dir.path().join("serve.log");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_pinfold-under-test"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env_clear()
        .env("RUST_LOG", "info")
        .env("PINFOLD_METRICS__TOKEN", &token)
        .env("PINFOLD_METRICS__ALLOW_FROM", "127.0.0.0/8, ::1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn pinfold serve");
    let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
    let banner = read_banner(&mut reader);
    let drain = std::thread::spawn(move || {
        let mut rest = Vec::new();
        let _ = std::io::copy(&mut reader, &mut rest);
        rest
    });
    let base = banner
        .lines()
        .find_map(|l| l.split_once(" listening on ").map(|(_, b)| b.trim()))
        .expect("listening line")
        .to_owned();
    let http = reqwest::Client::new();
    let url = format!("{base}/metrics");
    let r = http.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = http
        .get(&url)
        .bearer_auth("x".repeat(40))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = http.get(&url).bearer_auth(&token).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let _ = child.kill();
    let _ = child.wait();
    let out = drain.join().unwrap();
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("/metrics is protected"),
        "startup says so: {logged}"
    );
    for text in [
        banner.as_str(),
        logged.as_str(),
        &String::from_utf8_lossy(&out),
    ] {
        assert!(!text.contains(&token), "the scrape token was written out");
    }
}
