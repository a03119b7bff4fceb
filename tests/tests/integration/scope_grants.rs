//! The scope service: provider profiles (revisions, discovery, sealed
//! secret, bad input), grants (authorization URL, single-use state, no
//! redirect following, the ledger), and Pinfold as an RFC 9728 protected
//! resource. The end to end against a real authorization server is in
//! `scope_oidc.rs`; the planner routes in `scope.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use pinfold_tests::*;
use serde_json::{Value, json};

/// The client secret the tests write; it must never come back.
pub const SECRET: &str = "very-secret-client-secret-1234567890";

pub fn provider_path(app: &TestApp, name: &str) -> String {
    format!("/v1/tenants/{}/providers/{name}", app.tenant)
}

pub fn profile(auth: &str, token: &str) -> Value {
    json!({
        "issuer": "https://as.example",
        "authorization_endpoint": auth,
        "token_endpoint": token,
        "client_id": "pinfold",
        "client_secret": SECRET,
        "redirect_uris": ["https://app.example/callback"],
        "default_scopes": ["notes:read"],
        "preset": "github",
        "hierarchy": {"notes:admin": ["notes:write"], "notes:write": ["notes:read"]},
        "resources": {"io.github.acme/notes": "https://notes.example/mcp"}
    })
}

pub async fn put(app: &TestApp, name: &str, body: &Value, headers: &[(&str, &str)]) -> Resp {
    let bytes = body.to_string().into_bytes();
    app.send_raw(
        "PUT",
        &provider_path(app, name),
        Some(&app.admin()),
        Some(&bytes),
        headers,
    )
    .await
}

fn no_secret(r: &Resp) {
    assert!(
        !String::from_utf8_lossy(&r.bytes).contains(SECRET),
        "the client secret came back"
    );
}

#[tokio::test]
async fn provider_profiles_have_revisions_and_never_return_the_secret() {
    let app = TestApp::new().await;
    let body = profile("https://as.example/authorize", "https://as.example/token");
    let r = put(&app, "notes-idp", &body, &[]).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(r.header("etag").as_deref(), Some("\"r1\""));
    no_secret(&r);
    let v = r.json();
    assert_eq!(v["client_secret_set"], true);
    assert_eq!(v["endpoints_from"], "configured");
    assert_eq!(v["hierarchy"], body["hierarchy"]);
    assert_eq!(v["preset"], "github");
    assert!(v.get("client_secret").is_none());

    let r = app
        .get(&provider_path(&app, "notes-idp"), &app.admin())
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("etag").as_deref(), Some("\"r1\""));
    no_secret(&r);
    assert_eq!(r.json()["resources"], body["resources"]);

    // Replacing needs If-Match; creating over it fails.
    put(&app, "notes-idp", &body, &[])
        .await
        .problem(428, "precondition_required");
    put(&app, "notes-idp", &body, &[("if-none-match", "*")])
        .await
        .problem(412, "precondition_failed");
    let mut changed = body.clone();
    changed.as_object_mut().unwrap().remove("client_secret");
    changed["default_scopes"] = json!(["notes:write"]);
    let r = put(&app, "notes-idp", &changed, &[("if-match", "\"r1\"")]).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(r.header("etag").as_deref(), Some("\"r2\""));
    // An omitted secret is kept.
    assert_eq!(r.json()["client_secret_set"], true);
    let p = put(&app, "notes-idp", &changed, &[("if-match", "\"r1\"")])
        .await
        .problem(412, "precondition_failed");
    assert_eq!(p["current_revision"], 2);
    put(&app, "notes-idp", &changed, &[("if-match", "r2")])
        .await
        .problem(412, "precondition_failed");
    put(&app, "nope", &changed, &[("if-match", "\"r1\"")])
        .await
        .problem(412, "precondition_failed");

    app.get(&provider_path(&app, "absent"), &app.admin())
        .await
        .problem(404, "provider_not_found");
    app.get(&provider_path(&app, "Not_A_Name"), &app.admin())
        .await
        .problem(404, "provider_not_found");

    // Neither the audit log nor the database holds the secret in clear.
    let audit = app
        .get(
            &format!("/v1/tenants/{}/audit?kind=provider.updated", app.tenant),
            &app.admin(),
        )
        .await;
    assert_eq!(audit.json()["items"].as_array().unwrap().len(), 2);
    no_secret(&audit);
    let stored: String = match &app.store {
        pinfold_server::store::Store::Sqlite(s) => sqlx::query_scalar(
            "SELECT client_secret_sealed FROM scope_providers WHERE tenant_id = ? AND name = ?",
        )
        .bind(app.tenant.as_str())
        .bind("notes-idp")
        .fetch_one(s.pool())
        .await
        .unwrap(),
        pinfold_server::store::Store::Postgres(_) => sqlx::query_scalar(
            "SELECT client_secret_sealed FROM scope_providers WHERE tenant_id = $1 AND name = $2",
        )
        .bind(app.tenant.as_str())
        .bind("notes-idp")
        .fetch_one(&app.owner_pool().await.unwrap())
        .await
        .unwrap(),
    };
    assert!(!stored.contains(SECRET) && stored.len() > SECRET.len());
}

#[tokio::test]
async fn concurrent_conflicting_provider_writes_one_wins_the_other_is_412() {
    let app = Arc::new(TestApp::new().await);
    let body = profile("https://as.example/authorize", "https://as.example/token");
    // Two creations.
    let (a, b) = tokio::join!(
        put(&app, "race", &body, &[("if-none-match", "*")]),
        put(&app, "race", &body, &[("if-none-match", "*")])
    );
    let mut codes = [a.status.as_u16(), b.status.as_u16()];
    codes.sort();
    assert_eq!(codes, [201, 412]);
    // Two replacements of revision 1.
    let mut one = body.clone();
    one["default_scopes"] = json!(["a"]);
    let mut two = body.clone();
    two["default_scopes"] = json!(["b"]);
    let (a, b) = tokio::join!(
        put(&app, "race", &one, &[("if-match", "\"r1\"")]),
        put(&app, "race", &two, &[("if-match", "\"r1\"")])
    );
    let mut codes = [a.status.as_u16(), b.status.as_u16()];
    codes.sort();
    assert_eq!(codes, [200, 412]);
    let winner = if a.status == 200 { &one } else { &two };
    let now = app
        .get(&provider_path(&app, "race"), &app.admin())
        .await
        .json();
    assert_eq!(now["revision"], 2);
    assert_eq!(now["default_scopes"], winner["default_scopes"]);
}

#[tokio::test]
async fn bad_provider_bodies_are_refused_with_pointers() {
    let app = TestApp::new().await;
    let path = provider_path(&app, "bad");
    let send = |bytes: Vec<u8>| {
        let app = &app;
        let path = path.clone();
        async move {
            app.send_raw("PUT", &path, Some(&app.admin()), Some(&bytes), &[])
                .await
        }
    };
    send(b"{".to_vec()).await.problem(400, "malformed_json");
    send(br#"{"client_id": "a", "client_id": "b"}"#.to_vec())
        .await
        .problem(400, "duplicate_key");
    let p = send(br#"{"redirect_uris": "https://x"}"#.to_vec())
        .await
        .problem(422, "validation_failed");
    assert_eq!(p["errors"][0]["pointer"], "/redirect_uris");
    send(br#"{"client_id": 7}"#.to_vec())
        .await
        .problem(422, "validation_failed");
    let p = send(br#"{"clientId": "x"}"#.to_vec())
        .await
        .problem(422, "validation_failed");
    assert!(p.to_string().contains("clientId"), "{p}");
    send(br#"{"preset": "myspace"}"#.to_vec())
        .await
        .problem(422, "validation_failed");

    let cases = [
        (
            json!({"hierarchy": {"a": ["b"], "b": ["c"], "c": ["a"]}}),
            "/hierarchy/a",
            "hierarchy_cycle",
        ),
        (
            json!({"hierarchy": {"a b": []}}),
            "/hierarchy/a b",
            "invalid_scope",
        ),
        (
            json!({"default_scopes": ["ok", "ok"]}),
            "/default_scopes/1",
            "duplicate_scope",
        ),
        (
            json!({"default_scopes": ["no\"quote"]}),
            "/default_scopes/0",
            "invalid_scope",
        ),
        (
            json!({"issuer": "http://as.example", "client_id": "c"}),
            "/issuer",
            "url_refused",
        ),
        (
            json!({"authorization_endpoint": "https://as.example/a"}),
            "/token_endpoint",
            "missing",
        ),
        (
            json!({"client_id": "c", "authorization_endpoint": "https://u:p@as.example/a",
                "token_endpoint": "https://as.example/t"}),
            "/authorization_endpoint",
            "url_refused",
        ),
        (json!({"client_id": "c"}), "/issuer", "missing"),
        (json!({"client_secret": "s"}), "/client_id", "missing"),
        (
            json!({"redirect_uris": ["https://app.example/cb#frag"]}),
            "/redirect_uris/0",
            "invalid_url",
        ),
        (
            json!({"redirect_uris": ["relative/cb"]}),
            "/redirect_uris/0",
            "invalid_url",
        ),
        (
            json!({"resources": {"not-a-server": "https://x.example/mcp"}}),
            "/resources/not-a-server",
            "invalid_server_name",
        ),
    ];
    for (body, pointer, code) in cases {
        let r = send(body.to_string().into_bytes()).await;
        let p = r.problem(422, "validation_failed");
        let errors = p["errors"].as_array().unwrap();
        assert!(
            errors
                .iter()
                .any(|e| e["pointer"] == pointer && e["code"] == code),
            "{body}: {p}"
        );
    }
    let p = send(
        json!({"hierarchy": {"x": ["y"], "y": ["x"]}})
            .to_string()
            .into_bytes(),
    )
    .await
    .problem(422, "validation_failed");
    assert_eq!(p["cycle"], json!(["x", "y", "x"]));
    assert!(
        p["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("x → y → x")
    );
    // A bad provider name in the path.
    app.send_raw(
        "PUT",
        &provider_path(&app, "Bad%20Name"),
        Some(&app.admin()),
        Some(b"{}"),
        &[],
    )
    .await
    .problem(422, "validation_failed");
    // Nothing was stored.
    app.get(&path, &app.admin())
        .await
        .problem(404, "provider_not_found");
}

#[tokio::test]
async fn oversize_provider_bodies_are_413() {
    let app = TestApp::build(test_issuers(), |c| c.body_limit_bytes = 4096).await;
    let big = json!({"default_scopes": (0..1000).map(|i| format!("scope{i}")).collect::<Vec<_>>()});
    put(&app, "big", &big, &[])
        .await
        .problem(413, "body_too_large");
    let r = app
        .send(
            "POST",
            &format!("/v1/tenants/{}/grants", app.tenant),
            Some(&app.admin()),
            Some(json!({"provider": "x", "scopes": (0..1000).map(|i| format!("s{i}")).collect::<Vec<_>>(),
                "redirect_uri": "https://a/cb"})),
        )
        .await;
    r.problem(413, "body_too_large");
}

#[tokio::test]
async fn scope_routes_need_a_token_the_right_role_and_say_where_to_authenticate() {
    let app = TestApp::new().await;
    let t = &app.tenant;
    for (method, path) in [
        ("GET", format!("/v1/tenants/{t}/providers/p")),
        ("PUT", format!("/v1/tenants/{t}/providers/p")),
        ("POST", format!("/v1/tenants/{t}/grants")),
        ("GET", format!("/v1/tenants/{t}/grants")),
        (
            "POST",
            format!("/v1/tenants/{t}/grants/{}/exchange", "0".repeat(32)),
        ),
    ] {
        let r = app.send(method, &path, None, Some(json!({}))).await;
        r.problem(401, "unauthenticated");
        let challenge = r.header("www-authenticate").unwrap();
        assert!(
            challenge.starts_with("Bearer ")
                && challenge.contains(
                    "resource_metadata=\"http://localhost/.well-known/oauth-protected-resource\""
                ),
            "{challenge}"
        );
    }
    let reader = app.as_roles("rita", &["reader", "publisher"]);
    for (method, path, body) in [
        ("GET", format!("/v1/tenants/{t}/providers/p"), None),
        (
            "PUT",
            format!("/v1/tenants/{t}/providers/p"),
            Some(json!({})),
        ),
        ("GET", format!("/v1/tenants/{t}/grants"), None),
        (
            "POST",
            format!("/v1/tenants/{t}/grants"),
            Some(json!({"provider": "p",
            "scopes": ["a"], "redirect_uri": "https://a/cb"})),
        ),
    ] {
        app.send(method, &path, Some(&reader), body)
            .await
            .problem(403, "forbidden_role");
    }
}

#[tokio::test]
async fn protected_resource_metadata_follows_rfc9728() {
    let app = TestApp::build(test_issuers(), |c| {
        c.public_url = "https://pinfold.example/".into();
    })
    .await;
    let r = app
        .send("GET", "/.well-known/oauth-protected-resource", None, None)
        .await;
    assert_eq!(r.status, 200);
    let doc = r.json();
    assert_eq!(doc["resource"], "https://pinfold.example");
    assert_eq!(doc["bearer_methods_supported"], json!(["header"]));
    // An invalid token's challenge keeps its error and gains the metadata URL.
    let r = app
        .send(
            "GET",
            &format!("/v1/tenants/{}", app.tenant),
            Some("not.a.jwt"),
            None,
        )
        .await;
    r.problem(401, "invalid_token");
    let c = r.header("www-authenticate").unwrap();
    assert!(c.contains("error=\"invalid_token\""), "{c}");
    assert!(
        c.ends_with(
            ", resource_metadata=\"https://pinfold.example/.well-known/oauth-protected-resource\""
        ),
        "{c}"
    );
    // Without public_url the Host names the resource.
    let app = TestApp::new().await;
    let r = app
        .send_raw(
            "GET",
            "/.well-known/oauth-protected-resource",
            None,
            None,
            &[("host", "127.0.0.1:8080")],
        )
        .await;
    assert_eq!(r.json()["resource"], "http://127.0.0.1:8080");
    let r = app
        .send_raw(
            "GET",
            "/.well-known/oauth-protected-resource",
            None,
            None,
            &[("host", "evil\"host")],
        )
        .await;
    assert_eq!(r.json()["resource"], "http://localhost");
}

/// A metadata document for `base` (S256 unless `s256` is false).
fn metadata(base: &str, s256: bool) -> Value {
    let mut m = json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "response_types_supported": ["code"],
    });
    if s256 {
        m["code_challenge_methods_supported"] = json!(["plain", "S256"]);
    } else {
        m["code_challenge_methods_supported"] = json!(["plain"]);
    }
    m
}

#[tokio::test]
async fn endpoints_are_discovered_and_metadata_without_s256_is_refused() {
    let app = TestApp::new().await;
    // Only OpenID Connect discovery, with S256.
    let oidc = serve_local(axum::Router::new().route(
        "/.well-known/openid-configuration",
        get(|headers: HeaderMap| async move {
            let host = headers[header::HOST].to_str().unwrap().to_owned();
            Json(metadata(&format!("http://{host}"), true))
        }),
    ))
    .await;
    let r = put(
        &app,
        "oidc",
        &json!({"issuer": oidc, "client_id": "c"}),
        &[],
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    let v = r.json();
    assert_eq!(v["endpoints_from"], "openid_configuration");
    assert_eq!(v["token_endpoint"], format!("{oidc}/token"));
    // RFC 8414 first; metadata that does not list S256 is refused.
    let plain = serve_local(axum::Router::new().route(
        "/.well-known/oauth-authorization-server",
        get(|headers: HeaderMap| async move {
            let host = headers[header::HOST].to_str().unwrap().to_owned();
            Json(metadata(&format!("http://{host}"), false))
        }),
    ))
    .await;
    let p = put(
        &app,
        "plain",
        &json!({"issuer": plain, "client_id": "c"}),
        &[],
    )
    .await
    .problem(422, "validation_failed");
    assert_eq!(p["errors"][0]["code"], "pkce_s256_unsupported", "{p}");
    // Metadata naming another issuer is refused (RFC 8414 §3.3).
    let liar = serve_local(axum::Router::new().route(
        "/.well-known/oauth-authorization-server",
        get(|| async { Json(metadata("https://someone.else", true)) }),
    ))
    .await;
    let p = put(
        &app,
        "liar",
        &json!({"issuer": liar, "client_id": "c"}),
        &[],
    )
    .await
    .problem(422, "validation_failed");
    assert_eq!(p["errors"][0]["code"], "invalid_metadata", "{p}");
    // Nothing there at all.
    let empty = serve_local(axum::Router::new()).await;
    let p = put(
        &app,
        "empty",
        &json!({"issuer": empty, "client_id": "c"}),
        &[],
    )
    .await
    .problem(422, "validation_failed");
    assert_eq!(p["errors"][0]["code"], "discovery_failed", "{p}");
    assert!(
        p["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("HTTP 404")
    );
}

async fn grant(app: &TestApp, body: Value) -> Resp {
    app.send(
        "POST",
        &format!("/v1/tenants/{}/grants", app.tenant),
        Some(&app.as_roles("carl", &["client"])),
        Some(body),
    )
    .await
}

async fn exchange(app: &TestApp, id: &str, body: Value) -> Resp {
    app.send(
        "POST",
        &format!("/v1/tenants/{}/grants/{id}/exchange", app.tenant),
        Some(&app.as_roles("carl", &["client"])),
        Some(body),
    )
    .await
}

pub fn query(url: &str, name: &str) -> String {
    url::Url::parse(url)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| panic!("{name} missing in {url}"))
}

#[tokio::test]
async fn grants_build_the_request_and_refuse_bad_input() {
    let app = TestApp::new().await;
    let r = put(
        &app,
        "notes",
        &profile("https://as.example/authorize", "https://as.example/token"),
        &[],
    )
    .await;
    assert_eq!(r.status, 201);
    let r = grant(
        &app,
        json!({"provider": "notes", "plan": {"required": ["notes:read", "notes:write"], "request": ["notes:write"]},
               "redirect_uri": "https://app.example/callback", "resource": "io.github.acme/notes"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(r.header("cache-control").as_deref(), Some("no-store"));
    let g = r.json();
    let url = g["authorization_url"].as_str().unwrap();
    assert!(url.starts_with("https://as.example/authorize?"), "{url}");
    assert_eq!(query(url, "scope"), "notes:write");
    assert_eq!(query(url, "code_challenge_method"), "S256");
    assert_eq!(query(url, "code_challenge").len(), 43);
    assert_eq!(query(url, "resource"), "https://notes.example/mcp");
    assert_eq!(query(url, "client_id"), "pinfold");
    assert_eq!(query(url, "redirect_uri"), "https://app.example/callback");
    let state = query(url, "state");
    assert!(state.len() >= 22, "state of at least 128 bits: {state}");
    assert_eq!(g["needed"], json!(["notes:read", "notes:write"]));
    assert_eq!(g["requested"], json!(["notes:write"]));
    assert!(!url.contains(SECRET));

    let cases = [
        (
            json!({"provider": "notes", "scopes": ["a"], "redirect_uri": "https://app.example/callback/"}),
            "/redirect_uri",
            "redirect_uri_not_registered",
        ),
        (
            json!({"provider": "nobody", "scopes": ["a"], "redirect_uri": "https://app.example/callback"}),
            "/provider",
            "unknown_provider",
        ),
        (
            json!({"provider": "notes", "redirect_uri": "https://app.example/callback"}),
            "",
            "plan_or_scopes",
        ),
        (
            json!({"provider": "notes", "scopes": ["a"], "plan": {"required": ["a"]}, "redirect_uri": "https://app.example/callback"}),
            "",
            "plan_or_scopes",
        ),
        (
            json!({"provider": "notes", "scopes": ["a b"], "redirect_uri": "https://app.example/callback"}),
            "/scopes/0",
            "invalid_scope",
        ),
        (
            json!({"provider": "notes", "scopes": [], "redirect_uri": "https://app.example/callback"}),
            "/scopes",
            "nothing_to_request",
        ),
        (
            json!({"provider": "notes", "scopes": ["a"], "resource": "https://elsewhere.example/mcp", "redirect_uri": "https://app.example/callback"}),
            "/resource",
            "unknown_resource",
        ),
    ];
    for (body, pointer, code) in cases {
        let p = grant(&app, body.clone())
            .await
            .problem(422, "validation_failed");
        assert!(
            p["errors"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["pointer"] == pointer && e["code"] == code),
            "{body}: {p}"
        );
    }
    grant(
        &app,
        json!({"provider": "notes", "scopes": ["a"], "redirect_uri": "x", "extra": 1}),
    )
    .await
    .problem(422, "validation_failed");
    grant(
        &app,
        json!({"provider": "notes", "scopes": "a", "redirect_uri": "x"}),
    )
    .await
    .problem(422, "validation_failed");
    app.send_raw(
        "POST",
        &format!("/v1/tenants/{}/grants", app.tenant),
        Some(&app.admin()),
        Some(b"{\"provider\":"),
        &[],
    )
    .await
    .problem(400, "malformed_json");
    // A provider that only holds a hierarchy cannot grant.
    put(&app, "plan-only", &json!({"hierarchy": {"a": ["b"]}}), &[]).await;
    grant(
        &app,
        json!({"provider": "plan-only", "scopes": ["a"], "redirect_uri": "https://x/cb"}),
    )
    .await
    .problem(422, "validation_failed");
    let no_client = json!({"hierarchy": {"a": ["b"]}, "redirect_uris": ["https://x/cb"]});
    put(&app, "no-client", &no_client, &[]).await;
    grant(
        &app,
        json!({"provider": "no-client", "scopes": ["a"], "redirect_uri": "https://x/cb"}),
    )
    .await
    .problem(409, "provider_not_ready");

    // Exchange: bad ids, bad bodies, wrong state, someone else's grant.
    let id = g["id"].as_str().unwrap();
    exchange(&app, "nope", json!({"code": "c", "state": "s"}))
        .await
        .problem(404, "grant_not_found");
    exchange(&app, &"f".repeat(32), json!({"code": "c", "state": "s"}))
        .await
        .problem(404, "grant_not_found");
    exchange(&app, id, json!({"code": "c"}))
        .await
        .problem(422, "validation_failed");
    exchange(&app, id, json!({"code": "c", "state": "s", "more": 1}))
        .await
        .problem(422, "validation_failed");
    exchange(&app, id, json!({"code": "", "state": state}))
        .await
        .problem(422, "validation_failed");
    exchange(&app, id, json!({"code": "c", "state": "not-the-state"}))
        .await
        .problem(400, "invalid_state");
    app.send(
        "POST",
        &format!("/v1/tenants/{}/grants/{id}/exchange", app.tenant),
        Some(&app.as_roles("mallory", &["client"])),
        Some(json!({"code": "c", "state": state})),
    )
    .await
    .problem(404, "grant_not_found");
    // The ledger shows it pending.
    let ledger = app
        .get(&format!("/v1/tenants/{}/grants", app.tenant), &app.admin())
        .await;
    assert_eq!(ledger.status, 200);
    let items = ledger.json()["items"].as_array().unwrap().clone();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["status"], "pending");
    assert_eq!(items[0]["over_privileged"], false);
    app.get(
        &format!("/v1/tenants/{}/grants?limit=0", app.tenant),
        &app.admin(),
    )
    .await
    .problem(422, "validation_failed");
    app.get(
        &format!("/v1/tenants/{}/grants?cursor=zz", app.tenant),
        &app.admin(),
    )
    .await
    .problem(422, "validation_failed");
}

#[derive(Clone)]
struct Hits(Arc<AtomicUsize>, Arc<AtomicUsize>);

#[tokio::test]
async fn a_token_endpoint_answering_302_is_not_followed_and_the_state_is_single_use() {
    let app = TestApp::new().await;
    let hits = Hits(Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let base = serve_local(
        axum::Router::new()
            .route(
                "/token",
                post(|State(h): State<Hits>, headers: HeaderMap| async move {
                    h.0.fetch_add(1, Ordering::SeqCst);
                    let host = headers[header::HOST].to_str().unwrap().to_owned();
                    (
                        StatusCode::FOUND,
                        [(header::LOCATION, format!("http://{host}/elsewhere"))],
                    )
                        .into_response()
                }),
            )
            .route(
                "/elsewhere",
                post(|State(h): State<Hits>| async move {
                    h.1.fetch_add(1, Ordering::SeqCst);
                    Json(json!({"access_token": "stolen", "token_type": "bearer"}))
                })
                .get(|State(h): State<Hits>| async move {
                    h.1.fetch_add(1, Ordering::SeqCst);
                    "nothing"
                }),
            )
            .with_state(hits.clone()),
    )
    .await;
    let r = put(
        &app,
        "redir",
        &profile(&format!("{base}/authorize"), &format!("{base}/token")),
        &[],
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    let g = grant(
        &app,
        json!({"provider": "redir", "scopes": ["notes:read"],
        "redirect_uri": "https://app.example/callback", "resource": "io.github.acme/notes"}),
    )
    .await
    .json();
    let state = query(g["authorization_url"].as_str().unwrap(), "state");
    let id = g["id"].as_str().unwrap();
    let p = exchange(&app, id, json!({"code": "abc", "state": state}))
        .await
        .problem(502, "token_endpoint_redirect");
    assert!(p["detail"].as_str().unwrap().contains("302"), "{p}");
    assert_eq!(
        hits.0.load(Ordering::SeqCst),
        1,
        "the token endpoint was asked once"
    );
    assert_eq!(
        hits.1.load(Ordering::SeqCst),
        0,
        "the redirect was followed"
    );
    // The state was used: a replay exchanges nothing.
    exchange(&app, id, json!({"code": "abc", "state": state}))
        .await
        .problem(400, "invalid_state");
    assert_eq!(hits.0.load(Ordering::SeqCst), 1);
    let ledger = app
        .get(&format!("/v1/tenants/{}/grants", app.tenant), &app.admin())
        .await
        .json();
    assert_eq!(ledger["items"][0]["status"], "failed");
    assert_eq!(ledger["items"][0]["error"], "token_endpoint_redirect");
}

#[tokio::test]
async fn an_expired_state_is_refused_and_nothing_is_exchanged() {
    let app = TestApp::new().await;
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let base = serve_local(axum::Router::new().route(
        "/token",
        post(move || {
            let h = h.clone();
            async move {
                h.fetch_add(1, Ordering::SeqCst);
                Json(json!({"access_token": "t", "token_type": "bearer"}))
            }
        }),
    ))
    .await;
    put(
        &app,
        "exp",
        &profile(&format!("{base}/authorize"), &format!("{base}/token")),
        &[],
    )
    .await;
    let g = grant(
        &app,
        json!({"provider": "exp", "scopes": ["notes:read"],
        "redirect_uri": "https://app.example/callback", "resource": "io.github.acme/notes"}),
    )
    .await
    .json();
    let state = query(g["authorization_url"].as_str().unwrap(), "state");
    let id = g["id"].as_str().unwrap();
    // The state's time runs out (set in the database, not waited for).
    match &app.store {
        pinfold_server::store::Store::Sqlite(s) => {
            sqlx::query("UPDATE scope_grant_states SET expires_at = 0 WHERE tenant_id = ?")
                .bind(app.tenant.as_str())
                .execute(s.pool())
                .await
                .unwrap();
        }
        pinfold_server::store::Store::Postgres(_) => {
            sqlx::query("UPDATE scope_grant_states SET expires_at = 0 WHERE tenant_id = $1")
                .bind(app.tenant.as_str())
                .execute(&app.owner_pool().await.unwrap())
                .await
                .unwrap();
        }
    }
    exchange(&app, id, json!({"code": "c", "state": state}))
        .await
        .problem(400, "state_expired");
    exchange(&app, id, json!({"code": "c", "state": state}))
        .await
        .problem(400, "invalid_state");
    assert_eq!(hits.load(Ordering::SeqCst), 0, "nothing was exchanged");
    let ledger = app
        .get(&format!("/v1/tenants/{}/grants", app.tenant), &app.admin())
        .await
        .json();
    assert_eq!(ledger["items"][0]["status"], "failed");
    assert_eq!(ledger["items"][0]["error"], "state_expired");
}

/// The background purge deletes expired states (their sealed PKCE
/// verifiers with them) and nothing else; an exchange of a purged state is
/// refused like any unknown state.
#[tokio::test]
async fn expired_states_are_purged_and_live_ones_kept() {
    let app = TestApp::new().await;
    let base = serve_local(axum::Router::new()).await;
    put(
        &app,
        "purge",
        &profile(&format!("{base}/authorize"), &format!("{base}/token")),
        &[],
    )
    .await;
    let mut ids = Vec::new();
    let mut states = Vec::new();
    for _ in 0..2 {
        let g = grant(
            &app,
            json!({"provider": "purge", "scopes": ["notes:read"],
            "redirect_uri": "https://app.example/callback", "resource": "io.github.acme/notes"}),
        )
        .await
        .json();
        states.push(query(g["authorization_url"].as_str().unwrap(), "state"));
        ids.push(g["id"].as_str().unwrap().to_owned());
    }
    // The first state's time ran out long ago. A negative expiry keeps this
    // test's purge (which spans every tenant) clear of other tests' states.
    let count = match &app.store {
        pinfold_server::store::Store::Sqlite(s) => {
            sqlx::query(
                "UPDATE scope_grant_states SET expires_at = -100 WHERE tenant_id = ? AND grant_id = ?",
            )
            .bind(app.tenant.as_str())
            .bind(&ids[0])
            .execute(s.pool())
            .await
            .unwrap();
            "SELECT count(*) FROM scope_grant_states WHERE tenant_id = ?"
        }
        pinfold_server::store::Store::Postgres(_) => {
            sqlx::query(
                "UPDATE scope_grant_states SET expires_at = -100 WHERE tenant_id = $1 AND grant_id = $2",
            )
            .bind(app.tenant.as_str())
            .bind(&ids[0])
            .execute(&app.owner_pool().await.unwrap())
            .await
            .unwrap();
            "SELECT count(*) FROM scope_grant_states WHERE tenant_id = $1"
        }
    };
    let left = || async {
        match &app.store {
            pinfold_server::store::Store::Sqlite(s) => sqlx::query_scalar::<_, i64>(count)
                .bind(app.tenant.as_str())
                .fetch_one(s.pool())
                .await
                .unwrap(),
            pinfold_server::store::Store::Postgres(_) => sqlx::query_scalar::<_, i64>(count)
                .bind(app.tenant.as_str())
                .fetch_one(&app.owner_pool().await.unwrap())
                .await
                .unwrap(),
        }
    };
    assert_eq!(left().await, 2);
    let scope = app.store.scope();
    let before = pinfold_core::ids::Timestamp::from_millis(-50);
    assert_eq!(scope.purge_expired_states(before, 1000).await.unwrap(), 1);
    assert_eq!(left().await, 1, "the live state is kept");
    assert_eq!(scope.purge_expired_states(before, 1000).await.unwrap(), 0);
    exchange(&app, &ids[0], json!({"code": "c", "state": states[0]}))
        .await
        .problem(400, "invalid_state");
}

/// Publishes `name` `version` with `remotes` (as `pat`), approved by `rita`
/// when `approve` is set.
async fn publish_card(app: &TestApp, name: &str, version: &str, remotes: Value, approve: bool) {
    let path = format!(
        "/v1/tenants/{}/servers/{}/versions/{version}",
        app.tenant,
        name.replace('/', "%2F")
    );
    let card = json!({"name": name, "version": version, "description": "Notes elsewhere",
        "remotes": remotes, "signature": {"tools": []}});
    let r = app
        .send(
            "PUT",
            &path,
            Some(&app.as_roles("pat", &["publisher"])),
            Some(card),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    if approve {
        let r = app
            .send(
                "POST",
                &format!("{path}/review"),
                Some(&app.as_roles("rita", &["reviewer"])),
                Some(json!({"decision": "approve"})),
            )
            .await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    }
}

/// A form body as its name and value pairs, in order.
type Form = Vec<(String, String)>;

fn remote(kind: &str, url: &str) -> Value {
    json!({"type": kind, "url": url})
}

/// The MCP authorization specification requires the RFC 8707 `resource`
/// in the authorization and the token request, so a grant whose resource
/// can be found neither in the body, nor through the provider profile's
/// `resources`, nor as the one streamable-http remote of the plan's
/// approved card is not started: `422 resource_required` at `/resource`,
/// and nothing is stored.
#[tokio::test]
async fn a_grant_that_cannot_name_its_resource_is_refused() {
    let app = TestApp::new().await;
    let r = put(
        &app,
        "notes",
        &profile("https://as.example/authorize", "https://as.example/token"),
        &[],
    )
    .await;
    assert_eq!(r.status, 201);
    let other = "io.github.acme/other";
    publish_card(&app, other, "1.0.0", json!([]), true).await;
    publish_card(
        &app,
        other,
        "1.1.0",
        json!([
            remote("streamable-http", "https://a.example/mcp"),
            remote("streamable-http", "https://b.example/mcp")
        ]),
        true,
    )
    .await;
    publish_card(
        &app,
        other,
        "1.2.0",
        json!([remote("streamable-http", "https://other.example/mcp")]),
        false,
    )
    .await;
    publish_card(
        &app,
        other,
        "1.3.0",
        json!([remote(
            "streamable-http",
            "https://{tenant}.other.example/mcp"
        )]),
        true,
    )
    .await;
    let plan = |server: Option<&str>, version: Option<&str>| {
        let mut p = json!({"required": ["notes:read"]});
        if let Some(s) = server {
            p["server"] = json!(s);
        }
        if let Some(v) = version {
            p["version"] = json!(v);
        }
        json!({"provider": "notes", "plan": p, "redirect_uri": "https://app.example/callback"})
    };
    let cases = [
        (
            json!({"provider": "notes", "scopes": ["notes:read"],
                   "redirect_uri": "https://app.example/callback"}),
            "name no MCP server",
        ),
        (plan(None, None), "names no `server`"),
        (
            plan(Some("io.github.acme/nowhere"), None),
            "no trusted card",
        ),
        (plan(Some(other), Some("1.0.0")), "lists no streamable-http"),
        (plan(Some(other), Some("1.1.0")), "lists 2 streamable-http"),
        (plan(Some(other), Some("1.2.0")), "is not approved"),
        (plan(Some(other), Some("1.3.0")), "not an absolute URL"),
        (plan(Some(other), Some("9.9.9")), "no trusted card"),
    ];
    for (body, why) in cases {
        let p = grant(&app, body.clone())
            .await
            .problem(422, "resource_required");
        let err = &p["errors"][0];
        assert_eq!(err["pointer"], "/resource", "{body}: {p}");
        assert_eq!(err["code"], "resource_required", "{body}: {p}");
        let message = err["message"].as_str().unwrap();
        assert!(message.contains(why), "{body}: {message}");
        assert!(message.contains("add `resource`"), "{message}");
        assert!(
            p["detail"]
                .as_str()
                .unwrap()
                .contains("MCP authorization specification"),
            "{p}"
        );
    }
    // Nothing was started.
    let ledger = app
        .get(&format!("/v1/tenants/{}/grants", app.tenant), &app.admin())
        .await
        .json();
    assert_eq!(ledger["items"], json!([]));
}

/// Where a grant's resource comes from, in order: the body's `resource`,
/// the plan's server through the profile's `resources` (server names
/// compare without regard to case), the one streamable-http remote of the
/// plan's approved card (`latest` when the plan names no version). The
/// resource is in the authorization URL and, at the exchange, in the token
/// request's form.
#[tokio::test]
async fn grants_name_their_resource_in_both_requests() {
    let app = TestApp::new().await;
    let seen: Arc<std::sync::Mutex<Vec<Form>>> = Arc::default();
    let record = seen.clone();
    let base = serve_local(axum::Router::new().route(
        "/token",
        post(move |body: String| {
            let record = record.clone();
            async move {
                record.lock().unwrap().push(
                    url::form_urlencoded::parse(body.as_bytes())
                        .into_owned()
                        .collect(),
                );
                Json(json!({"access_token": "t", "token_type": "bearer"}))
            }
        }),
    ))
    .await;
    let r = put(
        &app,
        "notes",
        &profile(&format!("{base}/authorize"), &format!("{base}/token")),
        &[],
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    let remote_server = "io.github.acme/remote";
    publish_card(
        &app,
        remote_server,
        "1.0.0",
        json!([
            remote("sse", "https://remote.example/sse"),
            remote("streamable-http", "https://remote.example/mcp"),
            remote("streamable-http", "https://remote.example/mcp")
        ]),
        true,
    )
    .await;
    let with_plan = |plan: Value| json!({"provider": "notes", "plan": plan, "redirect_uri": "https://app.example/callback"});
    let cases = [
        // The plan's server, through the profile's `resources`.
        (
            with_plan(
                json!({"required": ["notes:read"], "server": "io.github.ACME/notes",
                "version": "1.0.0"}),
            ),
            "https://notes.example/mcp",
        ),
        // The one streamable-http remote of the approved card (`latest`).
        (
            with_plan(json!({"required": ["notes:read"], "server": remote_server})),
            "https://remote.example/mcp",
        ),
        // The body's `resource` comes first.
        (
            {
                let mut b = with_plan(json!({"required": ["notes:read"], "server": remote_server}));
                b["resource"] = json!("io.github.acme/notes");
                b
            },
            "https://notes.example/mcp",
        ),
        // A whole plan response passes through.
        (
            with_plan(
                json!({"provider": "notes", "server": remote_server, "version": "1.0.0",
                "strategy": "exact", "calls": [], "required": ["notes:read"],
                "request": ["notes:read"], "www_authenticate": null,
                "_meta": {"mcp/www_authenticate": []}, "notices": []}),
            ),
            "https://remote.example/mcp",
        ),
    ];
    for (i, (body, resource)) in cases.into_iter().enumerate() {
        let r = grant(&app, body.clone()).await;
        assert_eq!(
            r.status,
            201,
            "{body}: {}",
            String::from_utf8_lossy(&r.bytes)
        );
        let g = r.json();
        assert_eq!(g["resource"], resource, "{body}");
        let url = g["authorization_url"].as_str().unwrap();
        assert_eq!(query(url, "resource"), resource, "{url}");
        let state = query(url, "state");
        let r = exchange(
            &app,
            g["id"].as_str().unwrap(),
            json!({"code": format!("code-{i}"), "state": state}),
        )
        .await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
        let forms = seen.lock().unwrap().clone();
        let form: BTreeMap<_, _> = forms[i].iter().cloned().collect();
        assert_eq!(form["grant_type"], "authorization_code");
        assert_eq!(form["code"], format!("code-{i}"));
        assert_eq!(
            form["resource"], resource,
            "the token request carried {form:?}"
        );
        assert_eq!(form["code_verifier"].len(), 43);
        assert_eq!(
            forms[i].iter().filter(|(k, _)| k == "resource").count(),
            1,
            "one resource in the token request"
        );
    }
    let ledger = app
        .get(&format!("/v1/tenants/{}/grants", app.tenant), &app.admin())
        .await
        .json();
    let mut resources: Vec<&str> = ledger["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["resource"].as_str().unwrap())
        .collect();
    resources.sort();
    assert_eq!(
        resources,
        [
            "https://notes.example/mcp",
            "https://notes.example/mcp",
            "https://remote.example/mcp",
            "https://remote.example/mcp"
        ]
    );
}
