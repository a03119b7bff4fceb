//! Malformed input is a 4xx problem and never a 500, and loses nothing.

use pinfold_tests::*;
use serde_json::json;

async fn put_policy_raw(app: &TestApp, body: &[u8], headers: &[(&str, &str)]) -> Resp {
    let path = format!("/v1/tenants/{}/policy", app.tenant);
    app.send_raw("PUT", &path, Some(&app.admin()), Some(body), headers)
        .await
}

async fn assert_policy_untouched(app: &TestApp) {
    let p = app
        .get(&format!("/v1/tenants/{}/policy", app.tenant), &app.admin())
        .await
        .json();
    assert_eq!(p["revision"], 1);
}

#[tokio::test]
async fn malformed_json_is_400() {
    let app = TestApp::new().await;
    for body in [
        &b"{"[..],
        b"not json",
        b"{\"enforcement_mode\": }",
        b"",
        b"{} trailing",
        b"\"\\ud800\"",
    ] {
        put_policy_raw(&app, body, &[])
            .await
            .problem(400, "malformed_json");
    }
    put_policy_raw(&app, b"\xff\xfe", &[])
        .await
        .problem(400, "malformed_json");
    put_policy_raw(&app, b"1e400", &[])
        .await
        .problem(400, "malformed_json");
    assert_policy_untouched(&app).await;
}

#[tokio::test]
async fn duplicate_keys_are_400() {
    let app = TestApp::new().await;
    let body =
        br#"{"enforcement_mode":"strict","enforcement_mode":"advisory","approval_required":true}"#;
    let p = put_policy_raw(&app, body, &[])
        .await
        .problem(400, "duplicate_key");
    assert!(p["detail"].as_str().unwrap().contains("enforcement_mode"));
    assert_policy_untouched(&app).await;
}

#[tokio::test]
async fn wrong_types_and_unknown_fields_are_422_with_pointers() {
    let app = TestApp::new().await;
    let cases = [
        (
            json!({"enforcement_mode": "strict", "approval_required": "yes"}),
            "/approval_required",
            "wrong_type",
        ),
        (
            json!({"enforcement_mode": 1, "approval_required": true}),
            "/enforcement_mode",
            "wrong_type",
        ),
        (
            json!({"enforcement_mode": "lax", "approval_required": true}),
            "/enforcement_mode",
            "invalid_value",
        ),
        (json!({"approval_required": true}), "", "missing_field"),
        (
            json!({"enforcement_mode": "strict", "approval_required": true, "color": "red"}),
            "/color",
            "unknown_field",
        ),
        (
            json!({"enforcement_mode": "strict", "approval_required": true, "overrides": {"servers": {"a.b/c": {"tools": {"t": 5}}}}}),
            "/overrides/servers/a.b~1c/tools/t",
            "wrong_type",
        ),
        (json!([1, 2]), "/0", "wrong_type"),
    ];
    for (body, pointer, code) in cases {
        let p = put_policy_raw(&app, body.to_string().as_bytes(), &[])
            .await
            .problem(422, "validation_failed");
        assert_eq!(p["errors"][0]["pointer"], pointer, "{body}");
        assert_eq!(p["errors"][0]["code"], code, "{body}: {p}");
    }
    assert_policy_untouched(&app).await;
}

#[tokio::test]
async fn nesting_deeper_than_64_is_400() {
    let app = TestApp::new().await;
    let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
    put_policy_raw(&app, deep.as_bytes(), &[])
        .await
        .problem(400, "too_deep");
    let very_deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    put_policy_raw(&app, very_deep.as_bytes(), &[])
        .await
        .problem(400, "too_deep");
    assert_policy_untouched(&app).await;
}

#[tokio::test]
async fn oversize_bodies_are_413() {
    let app = TestApp::build(test_issuers(), |c| c.body_limit_bytes = 4096).await;
    let mut big = br#"{"enforcement_mode":"strict","approval_required":true,"overrides":{"servers":{"a.b/c":{"tools":{"t":{"pad":""#.to_vec();
    big.extend(std::iter::repeat_n(b'x', 8192));
    big.extend(br#""}}}}}}"#);
    put_policy_raw(&app, &big, &[])
        .await
        .problem(413, "body_too_large");
    // The same document without a Content-Length header (chunked) is also refused.
    assert_policy_untouched(&app).await;
    // Just under the limit is fine.
    let ok = json!({"enforcement_mode": "strict", "approval_required": true});
    assert_eq!(
        put_policy_raw(&app, ok.to_string().as_bytes(), &[])
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn non_json_content_type_is_415() {
    let app = TestApp::new().await;
    let body = json!({"enforcement_mode": "strict", "approval_required": true}).to_string();
    put_policy_raw(&app, body.as_bytes(), &[("content-type", "text/plain")])
        .await
        .problem(415, "unsupported_media_type");
    let r = put_policy_raw(
        &app,
        body.as_bytes(),
        &[("content-type", "application/json; charset=utf-8")],
    )
    .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn create_tenant_input_errors() {
    let app = TestApp::new().await;
    let p = app.platform();
    app.send_raw("POST", "/v1/tenants", Some(&p), Some(b"{\"id\":"), &[])
        .await
        .problem(400, "malformed_json");
    app.send_raw(
        "POST",
        "/v1/tenants",
        Some(&p),
        Some(br#"{"id":"aa","id":"bb","name":"x"}"#),
        &[],
    )
    .await
    .problem(400, "duplicate_key");
    let r = app
        .send(
            "POST",
            "/v1/tenants",
            Some(&p),
            Some(json!({"id": 5, "name": "x"})),
        )
        .await;
    assert_eq!(
        r.problem(422, "validation_failed")["errors"][0]["pointer"],
        "/id"
    );
    let r = app
        .send(
            "POST",
            "/v1/tenants",
            Some(&p),
            Some(json!({"id": "ok-id", "name": "x", "owner": "me"})),
        )
        .await;
    assert_eq!(
        r.problem(422, "validation_failed")["errors"][0]["code"],
        "unknown_field"
    );
    let r = app.send("GET", "/v1/tenants/ok-id", Some(&p), None).await;
    r.problem(404, "tenant_not_found");
}
