//! Rate limits: token buckets per tenant and per caller, per route class,
//! charged on tenant admission. The limiter runs on the harness's manual
//! clock, so refills are driven by advancing it, never by sleeping.

use std::time::Duration;

use pinfold_server::config::{ClassLimits, Config};
use pinfold_tests::*;

/// An app whose `reads` allow `tenant` and `principal` bursts at one
/// request per second each; every other class is generous.
async fn limited(tenant_burst: u32, principal_burst: u32) -> TestApp {
    TestApp::build(test_issuers(), |c: &mut Config| {
        c.rate_limits.enabled = true;
        c.rate_limits.reads = ClassLimits {
            tenant_rate: 1.0,
            tenant_burst,
            principal_rate: 1.0,
            principal_burst,
        };
    })
    .await
}

fn servers(t: &pinfold_core::ids::TenantId) -> String {
    format!("/v1/tenants/{t}/servers")
}

#[tokio::test]
async fn a_burst_past_the_tenant_limit_is_429_with_retry_after_and_a_problem() {
    let app = limited(3, 100).await;
    let path = servers(&app.tenant);
    for i in 0..3 {
        let r = app.get(&path, &app.admin()).await;
        assert_eq!(r.status, 200, "request {i}");
    }
    let r = app.get(&path, &app.admin()).await;
    let body = r.problem(429, "rate_limited");
    assert_eq!(r.header("retry-after").as_deref(), Some("1"));
    assert_eq!(body["class"], "reads");
    assert_eq!(body["scope"], "tenant");
    assert_eq!(body["retry_after"], 1);
    // Other callers of the same tenant share its bucket.
    let other = app.as_roles("bob", &["reader"]);
    app.get(&path, &other).await.problem(429, "rate_limited");
    // Another class has buckets of its own.
    let r = app
        .get(&format!("/v1/tenants/{}/grants", app.tenant), &app.admin())
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    // The refusals are counted by class and scope.
    let r = app.send("GET", "/metrics", None, None).await;
    let text = String::from_utf8(r.bytes).unwrap();
    assert!(
        text.contains("pinfold_rate_limited_total{class=\"reads\",scope=\"tenant\"} 2"),
        "{text}"
    );
    assert!(text.contains("pinfold_rate_limited_total{class=\"publish\",scope=\"principal\"} 0"));
}

#[tokio::test]
async fn the_bucket_refills_as_time_passes() {
    let app = limited(2, 100).await;
    let path = servers(&app.tenant);
    let limiter = app.rate_limiter.clone().expect("limits are on");
    for _ in 0..2 {
        assert_eq!(app.get(&path, &app.admin()).await.status, 200);
    }
    app.get(&path, &app.admin())
        .await
        .problem(429, "rate_limited");
    // Just short of one token: still refused, and told to wait one second.
    limiter.clock().advance(Duration::from_millis(999));
    let r = app.get(&path, &app.admin()).await;
    r.problem(429, "rate_limited");
    assert_eq!(r.header("retry-after").as_deref(), Some("1"));
    limiter.clock().advance(Duration::from_millis(1));
    assert_eq!(app.get(&path, &app.admin()).await.status, 200);
    app.get(&path, &app.admin())
        .await
        .problem(429, "rate_limited");
    // After a long pause the bucket holds its burst again, no more.
    limiter.clock().advance(Duration::from_secs(3600));
    for _ in 0..2 {
        assert_eq!(app.get(&path, &app.admin()).await.status, 200);
    }
    app.get(&path, &app.admin())
        .await
        .problem(429, "rate_limited");
}

#[tokio::test]
async fn one_tenant_exhausted_leaves_another_untouched() {
    let app = limited(2, 100).await;
    let other = app.new_tenant().await;
    let other_token = token("carol", Some(other.as_str()), &["reader"]);
    for _ in 0..2 {
        assert_eq!(
            app.get(&servers(&app.tenant), &app.admin()).await.status,
            200
        );
    }
    for _ in 0..3 {
        app.get(&servers(&app.tenant), &app.admin())
            .await
            .problem(429, "rate_limited");
    }
    // A token of the exhausted tenant on the other tenant's path is refused
    // as before (404) and charges nothing there.
    for _ in 0..5 {
        app.get(&servers(&other), &app.admin())
            .await
            .problem(404, "tenant_not_found");
    }
    for _ in 0..2 {
        let r = app.get(&servers(&other), &other_token).await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    }
    app.get(&servers(&other), &other_token)
        .await
        .problem(429, "rate_limited");
}

#[tokio::test]
async fn one_caller_exhausted_leaves_other_callers_of_the_tenant_untouched() {
    let app = limited(100, 2).await;
    let path = servers(&app.tenant);
    let alice = app.as_roles("alice", &["reader"]);
    let bob = app.as_roles("bob", &["reader"]);
    for _ in 0..2 {
        assert_eq!(app.get(&path, &alice).await.status, 200);
    }
    let r = app.get(&path, &alice).await;
    let body = r.problem(429, "rate_limited");
    assert_eq!(body["scope"], "principal");
    assert!(r.header("retry-after").is_some());
    for _ in 0..2 {
        assert_eq!(app.get(&path, &bob).await.status, 200);
    }
    app.get(&path, &bob).await.problem(429, "rate_limited");
    // The same subject from another issuer is another caller.
    let alice_hs = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &serde_json::json!({
            "iss": HS_ISSUER, "aud": AUDIENCE, "sub": "alice", "roles": ["reader"],
            "tenant": app.tenant.as_str(), "iat": now(), "exp": now() + 600,
        }),
        &jsonwebtoken::EncodingKey::from_secret(HS_SECRET.as_bytes()),
    )
    .unwrap();
    assert_eq!(app.get(&path, &alice_hs).await.status, 200);
    // A caller refused by its own limit spent nothing of the tenant's: 100
    // in the tenant's burst, 5 admitted so far.
    let limiter = app.rate_limiter.clone().unwrap();
    assert_eq!(
        limiter.refused(
            pinfold_http::ratelimit::RouteClass::Reads,
            pinfold_http::ratelimit::LimitScope::Tenant
        ),
        0
    );
}

#[tokio::test]
async fn publishing_has_its_own_class() {
    let app = TestApp::build(test_issuers(), |c: &mut Config| {
        c.rate_limits.enabled = true;
        c.rate_limits.publish = ClassLimits {
            tenant_rate: 1.0,
            tenant_burst: 1,
            principal_rate: 1.0,
            principal_burst: 1,
        };
    })
    .await;
    let path = format!(
        "/v1/tenants/{}/servers/io.example%2Fx/versions/1.0.0",
        app.tenant
    );
    // Whatever the first publish answers, it was admitted (not 429).
    let first = app
        .send(
            "PUT",
            &path,
            Some(&app.admin()),
            Some(serde_json::json!({})),
        )
        .await;
    assert_ne!(first.status, 429);
    let r = app
        .send(
            "PUT",
            &path,
            Some(&app.admin()),
            Some(serde_json::json!({})),
        )
        .await;
    assert_eq!(r.problem(429, "rate_limited")["class"], "publish");
    // Reads are not held back by publishing.
    assert_eq!(
        app.get(&servers(&app.tenant), &app.admin()).await.status,
        200
    );
}

#[tokio::test]
async fn disabled_limits_never_answer_429() {
    let app = TestApp::build(test_issuers(), |c: &mut Config| {
        c.rate_limits.enabled = false;
        c.rate_limits.reads = ClassLimits {
            tenant_rate: 1.0,
            tenant_burst: 1,
            principal_rate: 1.0,
            principal_burst: 1,
        };
    })
    .await;
    assert!(app.rate_limiter.is_none());
    for i in 0..20 {
        let r = app.get(&servers(&app.tenant), &app.admin()).await;
        assert_eq!(r.status, 200, "request {i}");
    }
    let r = app.send("GET", "/metrics", None, None).await;
    assert!(
        !String::from_utf8(r.bytes)
            .unwrap()
            .contains("pinfold_rate_limited_total")
    );
}

#[test]
fn limits_come_from_the_environment() {
    // Setting variables in-process would race the other test threads: the
    // test re-runs itself in a child process with them set.
    const MARK: &str = "PINFOLD_RATE_LIMITS__READS__TENANT_BURST";
    if std::env::var_os(MARK).is_none() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "limits::limits_come_from_the_environment",
                "--nocapture",
            ])
            .env(MARK, "7")
            .env("PINFOLD_RATE_LIMITS__ENABLED", "false")
            .env("PINFOLD_RATE_LIMITS__PUBLISH__PRINCIPAL_RATE", "0.25")
            .env("PINFOLD_CONNECTIONS__MAX_CONNECTIONS", "3")
            .env("PINFOLD_CONNECTIONS__HEADER_READ_TIMEOUT_SECS", "4")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let cfg = Config::load(None, &Default::default()).expect("loads");
    assert!(!cfg.rate_limits.enabled);
    assert_eq!(cfg.rate_limits.reads.tenant_burst, 7);
    // The class's other numbers keep their defaults.
    assert_eq!(cfg.rate_limits.reads.tenant_rate, 1000.0);
    assert_eq!(cfg.rate_limits.publish.principal_rate, 0.25);
    assert_eq!(cfg.connections.max_connections, 3);
    assert_eq!(cfg.connections.header_read_timeout_secs, 4);
    // Known settings: `serve` does not warn about them.
    let unknown = pinfold_server::config::unknown_env_vars();
    assert!(
        !unknown
            .iter()
            .any(|v| v.starts_with("PINFOLD_RATE_LIMITS") || v.starts_with("PINFOLD_CONNECTIONS")),
        "{unknown:?}"
    );
}

/// Every secured tenant operation of the OpenAPI document is charged: with
/// a burst of one per tenant, the second call of each (in a tenant of its
/// own) is a 429 naming the operation's class. The operations come from
/// the document, so a route added later is covered at once.
#[tokio::test]
async fn every_tenant_operation_is_charged_to_its_class() {
    let app = TestApp::build(test_issuers(), |c: &mut Config| {
        c.rate_limits.enabled = true;
        let one = ClassLimits {
            tenant_rate: 0.001,
            tenant_burst: 1,
            principal_rate: 1000.0,
            principal_burst: 1000,
        };
        c.rate_limits.publish = one;
        c.rate_limits.resolve = one;
        c.rate_limits.plan = one;
        c.rate_limits.grants = one;
        c.rate_limits.reads = one;
    })
    .await;
    let doc = app.send("GET", "/openapi.json", None, None).await.json();
    let mut checked = 0;
    for (template, item) in doc["paths"].as_object().unwrap() {
        if !template.contains("{tenant}") {
            continue;
        }
        for (method, op) in item.as_object().unwrap() {
            let Ok(m) = method.to_ascii_uppercase().parse::<axum::http::Method>() else {
                continue;
            };
            if op
                .get("security")
                .is_none_or(|s| s == &serde_json::json!([]))
            {
                continue;
            }
            let tenant = app.new_tenant().await;
            let mut path = template.clone();
            for (param, value) in [
                ("{tenant}", tenant.as_str()),
                ("{id}", "0196a0c4-7d3e-7a71-9d6b-2f8e4c1a5b3d"),
                ("{grant}", "0196a0c4-7d3e-7a71-9d6b-2f8e4c1a5b3e"),
                ("{provider}", "acme-idp"),
                ("{server}", "io.example%2Fx"),
                ("{serverName}", "io.example%2Fx"),
                ("{version}", "1.0.0"),
            ] {
                path = path.replace(param, value);
            }
            assert!(!path.contains('{'), "teach this test a value for {path}");
            let required: Vec<String> = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "query" && p["required"] == true)
                .map(|p| format!("{}=1.0.0", p["name"].as_str().unwrap()))
                .collect();
            if !required.is_empty() {
                path = format!("{path}?{}", required.join("&"));
            }
            let body = op.get("requestBody").map(|_| serde_json::json!({}));
            let token = token(
                "every-op",
                Some(tenant.as_str()),
                &["admin", "publisher", "reviewer", "reader", "client"],
            );
            let first = app
                .send(m.as_str(), &path, Some(&token), body.clone())
                .await;
            assert_ne!(first.status, 429, "{method} {template}: first call");
            let second = app.send(m.as_str(), &path, Some(&token), body).await;
            let want = pinfold_server::rate_limits::classify(&m, template)
                .unwrap_or_else(|| panic!("{method} {template} has no class"));
            let problem = second.problem(429, "rate_limited");
            assert_eq!(problem["class"], want.name(), "{method} {template}");
            assert_eq!(problem["scope"], "tenant", "{method} {template}");
            checked += 1;
        }
    }
    // 34 today (the CORS preflight takes no token).
    assert!(checked >= 34, "only {checked} operations checked");
}

/// A `304` answered before routing is charged like any other read, and
/// refused with the same problem.
#[tokio::test]
async fn the_304_fast_path_is_charged_and_refused_like_the_router() {
    let app = limited(100, 4).await;
    let doc = serde_json::json!({
        "name": "io.github.acme/limits", "version": "1.0.0", "description": "d",
        "signature": {"tools": [{"name": "t", "inputSchema": {"type": "object"}}],
            "prompts": [], "resources": [], "resourceTemplates": []}
    });
    let path = format!(
        "/v1/tenants/{}/servers/io.github.acme%2Flimits/versions/1.0.0",
        app.tenant
    );
    let r = app.send("PUT", &path, Some(&app.admin()), Some(doc)).await;
    assert!(
        r.status.is_success(),
        "{}",
        String::from_utf8_lossy(&r.bytes)
    );
    app.settle().await;
    let reader = app.as_roles("rita", &["reader"]);
    // Two reads through the router (the second loads the index): the
    // first two tokens.
    let etag = app.get(&path, &reader).await.header("etag").unwrap();
    let conditional = |id: &'static str| {
        let (path, reader, etag) = (path.clone(), reader.clone(), etag.clone());
        let app = &app;
        async move {
            app.send_raw(
                "GET",
                &path,
                Some(&reader),
                None,
                &[("if-none-match", &etag), ("x-request-id", id)],
            )
            .await
        }
    };
    let before = app.router.fast_answers();
    assert_eq!(conditional("warm").await.status, 304);
    assert_eq!(app.router.fast_answers(), before);
    for i in 0..2 {
        assert_eq!(conditional("fast").await.status, 304, "request {i}");
    }
    let r = conditional("over-1").await;
    let body = r.problem(429, "rate_limited");
    assert_eq!(body["scope"], "principal");
    assert_eq!(body["request_id"], "over-1");
    assert_eq!(r.header("retry-after").as_deref(), Some("1"));
    assert_eq!(
        app.router.fast_answers(),
        before + 3,
        "all three answered before routing"
    );
    let text = String::from_utf8(app.send("GET", "/metrics", None, None).await.bytes).unwrap();
    assert!(
        text.contains("pinfold_rate_limited_total{class=\"reads\",scope=\"principal\"} 1"),
        "{text}"
    );
}
