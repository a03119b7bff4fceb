//! Operational endpoints, request ids, problem rendering, OpenAPI and docs.

use pinfold_tests::TestApp;
use serde_json::Value;

#[tokio::test]
async fn healthz_and_readyz_answer() {
    let app = TestApp::new().await;
    let r = app.send("GET", "/healthz", None, None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"], "ok");
    let r = app.send("GET", "/readyz", None, None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"], "ready");
}

#[tokio::test]
async fn readyz_fails_when_the_database_is_gone() {
    let app = TestApp::new().await;
    app.store.close().await;
    let r = app.send("GET", "/readyz", None, None).await;
    r.problem(503, "database_unavailable");
    assert_eq!(r.header("retry-after").as_deref(), Some("2"));
}

#[tokio::test]
async fn metrics_count_requests_by_route_template() {
    let app = TestApp::new().await;
    let t = app.admin();
    let path = format!("/v1/tenants/{}", app.tenant);
    for _ in 0..3 {
        assert_eq!(app.get(&path, &t).await.status, 200);
    }
    app.send("GET", "/no/such/route", None, None).await;
    let r = app.send("GET", "/metrics", None, None).await;
    assert_eq!(r.status, 200);
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let text = String::from_utf8(r.bytes).unwrap();
    assert!(
        text.contains(r#"pinfold_http_requests_total{route="/v1/tenants/{tenant}",method="GET",status="200"} 3"#),
        "{text}"
    );
    assert!(
        text.contains(r#"route="unmatched",method="GET",status="404""#),
        "{text}"
    );
    assert!(
        !text.contains(app.tenant.as_str()),
        "raw tenant ids must not become labels"
    );
    assert!(text.contains("pinfold_http_request_duration_seconds_bucket{"));
}

#[tokio::test]
async fn request_ids_are_kept_when_sane_and_replaced_otherwise() {
    let app = TestApp::new().await;
    let r = app
        .send_raw(
            "GET",
            "/healthz",
            None,
            None,
            &[("x-request-id", "abc-123")],
        )
        .await;
    assert_eq!(r.header("x-request-id").as_deref(), Some("abc-123"));
    let r = app
        .send_raw(
            "GET",
            "/healthz",
            None,
            None,
            &[("x-request-id", "bad id with spaces")],
        )
        .await;
    let rid = r.header("x-request-id").unwrap();
    assert_ne!(rid, "bad id with spaces");
    assert_eq!(rid.len(), 36, "a generated UUID");
    // Problems carry the same id in the body.
    let r = app
        .send_raw(
            "GET",
            "/v1/tenants/x1",
            None,
            None,
            &[("x-request-id", "trace-me")],
        )
        .await;
    let body = r.problem(401, "unauthenticated");
    assert_eq!(body["request_id"], "trace-me");
}

#[tokio::test]
async fn unknown_routes_and_methods_are_problems() {
    let app = TestApp::new().await;
    app.send("GET", "/v1/nothing", None, None)
        .await
        .problem(404, "route_not_found");
    app.send("DELETE", "/healthz", None, None)
        .await
        .problem(405, "method_not_allowed");
}

#[tokio::test]
async fn openapi_is_3_1_and_every_documented_path_is_routed() {
    let app = TestApp::new().await;
    let r = app.send("GET", "/openapi.json", None, None).await;
    assert_eq!(r.status, 200);
    let doc = r.json();
    assert!(
        doc["openapi"].as_str().unwrap().starts_with("3.1"),
        "{}",
        doc["openapi"]
    );
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    let paths = doc["paths"].as_object().unwrap();
    for p in [
        "/healthz",
        "/readyz",
        "/metrics",
        "/v1/tenants",
        "/v1/tenants/{tenant}",
        "/v1/tenants/{tenant}/policy",
        "/v1/tenants/{tenant}/audit",
    ] {
        assert!(
            paths.contains_key(p),
            "{p} missing from the OpenAPI document"
        );
    }
    // Every documented operation reaches a handler (never the router's 404/405).
    for (path, item) in paths {
        let concrete = path.replace("{tenant}", app.tenant.as_str());
        for method in ["get", "put", "post", "delete"] {
            if item.get(method).is_none() {
                continue;
            }
            let r = app
                .send_raw(&method.to_uppercase(), &concrete, None, Some(b"{}"), &[])
                .await;
            let code = if r.status.as_u16() >= 400 {
                r.json()["code"].clone()
            } else {
                Value::Null
            };
            assert_ne!(code, "route_not_found", "{method} {path}");
            assert_ne!(code, "method_not_allowed", "{method} {path}");
        }
    }
    // The served document is the one `pinfold openapi` prints.
    assert_eq!(
        doc,
        serde_json::from_str::<Value>(&pinfold_server::app::openapi_json()).unwrap()
    );
}

#[tokio::test]
async fn committed_openapi_matches_the_generated_document() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../openapi/openapi.json");
    let committed = std::fs::read_to_string(&path).expect("openapi/openapi.json is committed");
    let generated = pinfold_server::app::openapi_json();
    if committed != generated {
        let line = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .map_or_else(|| "the end".to_owned(), |i| format!("line {}", i + 1));
        panic!(
            "openapi/openapi.json drifted (first difference at {line}): run `cargo run -q --bin pinfold -- openapi > openapi/openapi.json`"
        );
    }
}

#[tokio::test]
async fn docs_page_is_served_offline() {
    let app = TestApp::new().await;
    let r = app.send("GET", "/docs/", None, None).await;
    assert_eq!(r.status, 200);
    let html = String::from_utf8(r.bytes).unwrap();
    assert!(html.contains("swagger-ui"), "{html}");
    // Every script and stylesheet the page names is served by us.
    for needle in ["http://", "https://"] {
        for line in html
            .lines()
            .filter(|l| l.contains("src=") || l.contains("href="))
        {
            assert!(!line.contains(needle), "external asset in /docs: {line}");
        }
    }
    let r = app
        .send("GET", "/docs/swagger-initializer.js", None, None)
        .await;
    assert_eq!(r.status, 200);
    let js = String::from_utf8(r.bytes).unwrap();
    assert!(js.contains("/openapi.json"), "{js}");
    assert!(js.contains(r#""validatorUrl": "none""#), "{js}");
    for asset in [
        "swagger-ui.css",
        "swagger-ui-bundle.js",
        "swagger-ui-standalone-preset.js",
    ] {
        let r = app.send("GET", &format!("/docs/{asset}"), None, None).await;
        assert_eq!(r.status, 200, "{asset}");
    }
}

/// Sends `head` (and `body`) on a raw connection and reads the whole answer
/// (the server closes or the answer is complete when `Content-Length` bytes
/// of body arrived).
async fn raw_exchange(addr: std::net::SocketAddr, head: &str, body: &[u8]) -> (u16, String) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).await.unwrap();
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf);
        if let Some((headers, rest)) = text.split_once("\r\n\r\n") {
            let len = headers
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if rest.len() >= len {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

#[tokio::test]
async fn stalled_bodies_time_out_and_declared_oversize_bodies_are_refused_as_problems() {
    let db = pinfold_tests::fresh_db().await;
    let mut cfg = pinfold_tests::config_for(&db);
    cfg.listen = "127.0.0.1:0".into();
    cfg.request_timeout_secs = 1;
    cfg.body_limit_bytes = 4096;
    let running = pinfold_server::serve::start(cfg, None)
        .await
        .expect("start");
    let token = running.dev_tokens.clone().expect("dev mode").admin;
    // A body announced as 100 bytes of which 10 arrive: the handler waits
    // for the rest until the request timeout answers.
    let head = format!(
        "PUT /v1/tenants/dev/policy HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\nx-request-id: slow-1\r\n\r\n"
    );
    let (status, text) = raw_exchange(running.addr, &head, b"{\"enforce").await;
    assert_eq!(status, 408, "{text}");
    assert!(text.contains("application/problem+json"), "{text}");
    assert!(text.contains("\"code\":\"request_timeout\""), "{text}");
    assert!(text.contains("\"request_id\":\"slow-1\""), "{text}");
    // A declared length over the limit is refused before the body is read.
    let head = format!(
        "PUT /v1/tenants/dev/policy HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: 5000\r\nx-request-id: big-1\r\n\r\n"
    );
    let (status, text) = raw_exchange(running.addr, &head, b"").await;
    assert_eq!(status, 413, "{text}");
    assert!(text.contains("\"code\":\"body_too_large\""), "{text}");
    assert!(text.contains("\"request_id\":\"big-1\""), "{text}");
    running.shutdown().await.unwrap();
}
