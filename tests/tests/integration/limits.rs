//! Rate limits: token buckets per tenant and per caller, per route class,
//! charged on tenant admission. The limiter runs on the harness's manual
//! clock, so refills are driven by advancing it, never by sleeping.

use std::time::Duration;

use signet_server::config::{ClassLimits, Config};
use signet_tests::*;

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

fn servers(t: &signet_core::ids::TenantId) -> String {
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
        text.contains("signet_rate_limited_total{class=\"reads\",scope=\"tenant\"} 2"),
        "{text}"
    );
    assert!(text.contains("signet_rate_limited_total{class=\"publish\",scope=\"principal\"} 0"));
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
            signet_http::ratelimit::RouteClass::Reads,
            signet_http::ratelimit::LimitScope::Tenant
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
            .contains("signet_rate_limited_total")
    );
}
