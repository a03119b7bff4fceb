//! The egress policy end to end, on both databases: a client token cannot
//! make Pinfold connect to loopback, private or link-local addresses
//! (whatever spelling of the address, or a name resolving to one), a
//! tenant's `egress_allow` opens exactly what it names, redirects are not
//! followed, and provider discovery reads the same for a refused address as
//! for a closed port. These apps run with loopback *refused* (the rest of
//! the suite allows it by configuration).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use pinfold_example_upstream::{Running, Switches};
use pinfold_tests::*;
use serde_json::{Value, json};

const CARD: &str = include_str!("../../../examples/manage-files-1.0.0.json");

fn server() -> String {
    let card: Value = serde_json::from_str(CARD).unwrap();
    card["name"].as_str().unwrap().to_owned()
}

/// An app whose operator has not allowed loopback.
async fn strict_app() -> TestApp {
    TestApp::build(test_issuers(), |c| c.egress.allow_loopback = Some(false)).await
}

async fn publish(app: &TestApp) {
    let base = format!(
        "/v1/tenants/{}/servers/{}/versions/1.0.0",
        app.tenant,
        server().replace('/', "%2F")
    );
    let card: Value = serde_json::from_str(CARD).unwrap();
    let r = app
        .send(
            "PUT",
            &base,
            Some(&app.as_roles("pat", &["publisher"])),
            Some(card),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    let r = app
        .send(
            "POST",
            &format!("{base}/review"),
            Some(&app.as_roles("rita", &["reviewer"])),
            Some(json!({"decision": "approve"})),
        )
        .await;
    assert_eq!(r.status, 200);
}

/// Sets the tenant's `egress_allow`.
async fn allow(app: &TestApp, entries: &[&str]) -> Resp {
    let path = format!("/v1/tenants/{}/policy", app.tenant);
    let current = app.get(&path, &app.admin()).await;
    let etag = current.header("etag").unwrap();
    let mut body = current.json();
    for k in ["revision", "updated_at", "updated_by"] {
        body.as_object_mut().unwrap().remove(k);
    }
    body["egress_allow"] = json!(entries);
    app.send_raw(
        "PUT",
        &path,
        Some(&app.admin()),
        Some(body.to_string().as_bytes()),
        &[("if-match", &etag)],
    )
    .await
}

async fn open(app: &TestApp, url: &str, headers: Value) -> Resp {
    app.send(
        "POST",
        &format!("/v1/tenants/{}/sessions", app.tenant),
        Some(&app.as_roles("carl-client", &["client"])),
        Some(json!({"server": server(), "upstream": {"url": url, "headers": headers}})),
    )
    .await
}

/// A TCP listener on loopback that counts the connections made to it.
async fn counting_listener() -> (u16, Arc<AtomicUsize>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let n = Arc::new(AtomicUsize::new(0));
    let seen = n.clone();
    tokio::spawn(async move {
        while let Ok((_s, _)) = l.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
        }
    });
    (port, n)
}

/// A name of this machine that resolves to loopback (its host name, on
/// most systems), if there is one.
fn name_resolving_to_loopback() -> Option<String> {
    use std::net::ToSocketAddrs as _;
    let name = std::fs::read_to_string("/etc/hostname")
        .ok()?
        .trim()
        .to_owned();
    let addrs: Vec<_> = (name.as_str(), 80).to_socket_addrs().ok()?.collect();
    (!addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback())).then_some(name)
}

#[tokio::test]
async fn sessions_to_internal_addresses_are_refused_and_nothing_is_sent() {
    let app = strict_app().await;
    publish(&app).await;
    let (port, connections) = counting_listener().await;
    let mut urls = vec![
        format!("http://127.0.0.1:{port}/mcp"),
        "http://10.0.0.1/mcp".to_owned(),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        format!("http://[::1]:{port}/mcp"),
        format!("http://[::ffff:127.0.0.1]:{port}/mcp"),
        format!("http://0.0.0.0:{port}/mcp"),
        format!("http://2130706433:{port}/mcp"),
        format!("http://127.1:{port}/mcp"),
        format!("http://localhost:{port}/mcp"),
        "https://100.64.0.1/mcp".to_owned(),
        "https://[fd00::1]/mcp".to_owned(),
    ];
    match name_resolving_to_loopback() {
        Some(name) => urls.push(format!("http://{name}:{port}/mcp")),
        None => eprintln!("notice: no host name resolves to loopback here; that case is skipped"),
    }
    for url in &urls {
        let r = open(&app, url, json!({})).await;
        let p = r.problem(422, "upstream_not_allowed");
        assert!(
            p["detail"].as_str().unwrap().contains("egress_allow"),
            "{url}: {p}"
        );
    }
    // Credentials or not: the same.
    let r = open(
        &app,
        &format!("http://127.0.0.1:{port}/mcp"),
        json!({"Authorization": "Bearer k"}),
    )
    .await;
    r.problem(422, "upstream_not_allowed");
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(connections.load(Ordering::SeqCst), 0, "nothing was sent");
}

#[tokio::test]
async fn the_tenants_allow_list_opens_exactly_what_it_names() {
    let app = strict_app().await;
    publish(&app).await;
    let up = Running::start("127.0.0.1:0".parse().unwrap(), Switches::default())
        .await
        .unwrap();
    // Not named: refused.
    open(&app, &up.url(), json!({"X-Upstream-Key": "k"}))
        .await
        .problem(422, "upstream_not_allowed");
    // Bad entries are refused with their place named.
    let r = allow(&app, &["127.0.0.1", "not a host", "10.0.0.0/33"]).await;
    let p = r.problem(422, "validation_failed");
    let pointers: Vec<&str> = p["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["pointer"].as_str().unwrap())
        .collect();
    assert_eq!(pointers, ["/egress_allow/1", "/egress_allow/2"], "{p}");
    // Named: the session opens, and the upstream answers through it.
    let r = allow(&app, &["127.0.0.1"]).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(r.json()["egress_allow"], json!(["127.0.0.1"]));
    let r = open(&app, &up.url(), json!({"X-Upstream-Key": "k"})).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    let session = r.json()["id"].as_str().unwrap().to_owned();
    let r = app
        .send(
            "POST",
            &format!("/v1/tenants/{}/sessions/{session}/resolve", app.tenant),
            Some(&app.as_roles("carl-client", &["client"])),
            Some(json!({"name": "manage_files", "arguments": {"path": "/a", "action": "read"}})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(r.json()["source"], "upstream", "{}", r.json());
    assert!(up.calls() >= 1);
    // `[::1]` is another address: still refused.
    let port = up.addr().port();
    open(&app, &format!("http://[::1]:{port}/mcp"), json!({}))
        .await
        .problem(422, "upstream_not_allowed");
    // A block, and credentials over plain http to it: allowed, since the
    // list names it.
    assert_eq!(allow(&app, &["127.0.0.0/8"]).await.status, 200);
    let r = open(
        &app,
        &format!("http://127.0.0.2:{port}/mcp"),
        json!({"Authorization": "Bearer k"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
}

#[tokio::test]
async fn credentials_go_over_plain_http_only_to_named_hosts() {
    let app = strict_app().await;
    publish(&app).await;
    // A public address over plain http, with a credential: refused.
    let r = open(
        &app,
        "http://93.184.215.14/mcp",
        json!({"Authorization": "Bearer k"}),
    )
    .await;
    let p = r.problem(422, "upstream_not_allowed");
    assert!(p["detail"].as_str().unwrap().contains("https"), "{p}");
    // Without one it may open (nothing is contacted until a resolve).
    let r = open(&app, "http://93.184.215.14/mcp", json!({})).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
}

#[tokio::test]
async fn a_redirect_to_a_refused_address_is_not_followed() {
    let app = strict_app().await;
    publish(&app).await;
    let (target_port, connections) = counting_listener().await;
    // An allowed upstream that redirects every request to loopback on
    // another port, which the list does not name (127.0.0.1 only, while
    // the redirect names `localhost`).
    let location = format!("http://localhost:{target_port}/mcp");
    let redirector = axum::Router::new().fallback(move || {
        let location = location.clone();
        async move {
            (
                axum::http::StatusCode::TEMPORARY_REDIRECT,
                [(axum::http::header::LOCATION, location)],
            )
        }
    });
    let base = serve_local(redirector).await;
    assert_eq!(allow(&app, &["127.0.0.1"]).await.status, 200);
    let r = open(&app, &format!("{base}/mcp"), json!({})).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    let session = r.json()["id"].as_str().unwrap().to_owned();
    let r = app
        .send(
            "POST",
            &format!("/v1/tenants/{}/sessions/{session}/resolve", app.tenant),
            Some(&app.as_roles("carl-client", &["client"])),
            Some(json!({"name": "manage_files", "arguments": {"path": "/a", "action": "read"}})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(r.json()["source"], "fallback", "{}", r.json());
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(
        connections.load(Ordering::SeqCst),
        0,
        "the redirect was followed"
    );
}

#[tokio::test]
async fn discovery_reads_the_same_for_a_refused_address_and_a_closed_port() {
    let app = strict_app().await;
    // 127.0.0.1 is named (its closed port is merely unreachable); 10.0.0.1
    // and loopback on an open port are refused by the policy.
    assert_eq!(allow(&app, &["127.0.0.1"]).await.status, 200);
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (open_port, connections) = counting_listener().await;
    let attempt = async |issuer: &str| {
        let body = json!({"issuer": issuer, "client_id": "pinfold",
            "redirect_uris": ["https://app.example/callback"]});
        let r = app
            .send_raw(
                "PUT",
                &format!("/v1/tenants/{}/providers/idp", app.tenant),
                Some(&app.admin()),
                Some(body.to_string().as_bytes()),
                &[],
            )
            .await;
        let p = r.problem(422, "validation_failed");
        let e = &p["errors"][0];
        assert_eq!(e["pointer"], "/issuer", "{p}");
        // The message with the issuer's own spelling taken out.
        let origin = issuer.trim_end_matches('/');
        (
            e["code"].as_str().unwrap().to_owned(),
            e["message"].as_str().unwrap().replace(origin, "<issuer>"),
        )
    };
    let unreachable = attempt(&format!("https://127.0.0.1:{closed}")).await;
    let refused = attempt("https://10.0.0.1").await;
    let refused_loopback = attempt(&format!("https://[::1]:{open_port}")).await;
    assert_eq!(unreachable.0, "discovery_failed");
    assert_eq!(unreachable, refused);
    assert_eq!(unreachable, refused_loopback);
    assert!(unreachable.1.contains("unreachable"), "{unreachable:?}");
    assert_eq!(connections.load(Ordering::SeqCst), 0);
}
