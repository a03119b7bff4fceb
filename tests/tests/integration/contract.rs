//! The OpenAPI document says what a request needs: for the bodies whose
//! rules go beyond their members' types (an upstream URL, `server` or
//! `session`, a `server.json`, a grant's `plan` or `scopes`, a guard
//! route's upstream and version pin), every case
//! here is checked against the served document's request schema (JSON
//! Schema 2020-12, formats asserted, as schemathesis checks them) and sent
//! to the handler, with the state arranged so that nothing but the body
//! decides: the schema admits a body exactly when the handler accepts it.

use pinfold_tests::*;
use serde_json::{Value, json};

const SERVER: &str = "io.github.acme/notes";

/// The request body schema of `operation` in the served document, as a
/// validator (its `$ref`s resolve against the document's components).
async fn request_schema(app: &TestApp, operation: &str) -> jsonschema::Validator {
    let doc = app.send("GET", "/openapi.json", None, None).await.json();
    let schema = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|item| item.as_object().unwrap().values())
        .find(|op| op["operationId"] == operation)
        .unwrap_or_else(|| panic!("no operation {operation}"))["requestBody"]["content"]
        ["application/json"]["schema"]
        .clone();
    let root = json!({"$ref": schema["$ref"], "components": doc["components"]});
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .build(&root)
        .unwrap()
}

/// Sends every case and checks that the schema and the handler agree.
async fn agree(app: &TestApp, operation: &str, method: &str, path: &str, cases: Vec<Value>) {
    let schema = request_schema(app, operation).await;
    let token = app.as_roles("carl", &["admin", "client"]);
    for body in cases {
        let valid = schema.is_valid(&body);
        let r = app
            .send(method, path, Some(&token), Some(body.clone()))
            .await;
        let text = String::from_utf8_lossy(&r.bytes).into_owned();
        if valid {
            assert!(
                r.status.is_success(),
                "{operation}: the schema admits {body} but the handler answered {}: {text}",
                r.status
            );
        } else {
            assert_eq!(
                r.status, 422,
                "{operation}: the schema refuses {body} but the handler answered {}: {text}",
                r.status
            );
        }
    }
}

/// An approved version of [`SERVER`] with one tool.
async fn approved(app: &TestApp) {
    let path = format!(
        "/v1/tenants/{}/servers/{}/versions/1.0.0",
        app.tenant,
        SERVER.replace('/', "%2F")
    );
    let card = json!({"name": SERVER, "version": "1.0.0", "signature": {"tools": [
        {"name": "read_note", "inputSchema": {"type": "object"},
         "securitySchemes": [{"type": "oauth2", "scopes": ["notes:read"]}]}]}});
    let r = app
        .send(
            "PUT",
            &path,
            Some(&app.as_roles("pat", &["publisher"])),
            Some(card),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
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

#[tokio::test]
async fn the_session_schema_states_the_upstream_rules() {
    let app = TestApp::new().await;
    approved(&app).await;
    let session = |upstream: Value| json!({"server": SERVER, "upstream": upstream});
    let url = |u: &str| session(json!({"url": u}));
    let headers = |h: Value| session(json!({"url": "http://127.0.0.1:9/mcp", "headers": h}));
    let many = |n: usize| Value::Object((0..n).map(|i| (format!("X-H{i}"), json!("v"))).collect());
    let mut cases = vec![
        url("http://127.0.0.1:9/mcp"),
        url("https://files.example.com/mcp?x=1&y=%20"),
        url("http://[::1]:8080/mcp"),
        url("HTTP://a_b.internal"),
        url("http://localhost:65535/"),
        url(&format!("http://x/{}", "a".repeat(2048 - 9))),
        url(&format!("http://x/{}", "a".repeat(2048 - 8))),
        url("ftp://x/"),
        url("http://u:p@x/"),
        url("http://x/#f"),
        url("http://x:0/"),
        url("http://x:65536/"),
        url("http://x/a b"),
        url("http://x/\u{e9}"),
        url("not a url"),
        url("/relative"),
        url("http://xn--a.example/"),
        url("http://1.2.3.256/"),
        url("http://a.123/"),
        url(""),
        headers(json!({"Authorization": "Bearer x", "X-Api-Key": "k\tv", "x!#$%&'*+.^_`|~": "1"})),
        headers(json!({"x-caf\u{e9}": "1"})),
        headers(json!({"X-Note": "caf\u{e9}".repeat(1024)})),
        headers(json!({"X-Note": "a".repeat(4097)})),
        headers(json!({"Host": "y"})),
        headers(json!({"mcp-SESSION-id": "y"})),
        headers(json!({"bad name": "y"})),
        headers(json!({"X-A": "line\nbreak"})),
        headers(json!({"X-A": "del\u{7f}"})),
        headers(json!({"x".repeat(128): "y"})),
        headers(json!({"x".repeat(129): "y"})),
        headers(many(32)),
        headers(many(33)),
        headers(json!(null)),
        headers(json!({"X-A": 1})),
    ];
    cases.push(json!({"server": SERVER, "upstream": {"url": "http://x/"}, "ttl_seconds": 0}));
    cases.push(json!({"server": SERVER, "upstream": {"url": "http://x/"}, "ttl_seconds": 86_400}));
    // JSON Schema's `integer` is any number without a fractional part.
    cases.push(json!({"server": SERVER, "upstream": {"url": "http://x/"}, "ttl_seconds": 60.0}));
    cases.push(json!({"server": SERVER, "upstream": {"url": "http://x/"}, "ttl_seconds": 60.5}));
    cases.push(json!({"server": SERVER, "upstream": {"url": "http://x/"}, "extra": 1}));
    let path = format!("/v1/tenants/{}/sessions", app.tenant);
    agree(&app, "open_session", "POST", &path, cases).await;
}

#[tokio::test]
async fn the_guard_route_schema_states_the_upstream_and_pin_rules() {
    let app = TestApp::new().await;
    // An approved card with one streamable-http remote, so that a route
    // without a URL is accepted too: only the body decides.
    const GUARDED: &str = "io.github.acme/guarded";
    let path = format!(
        "/v1/tenants/{}/servers/{}/versions/1.0.0",
        app.tenant,
        GUARDED.replace('/', "%2F")
    );
    let card = json!({"name": GUARDED, "version": "1.0.0",
        "remotes": [{"type": "streamable-http", "url": "http://127.0.0.1:9/mcp"}],
        "signature": {"tools": [{"name": "read_note", "inputSchema": {"type": "object"}}]}});
    let r = app
        .send(
            "PUT",
            &path,
            Some(&app.as_roles("pat", &["publisher"])),
            Some(card),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    let r = app
        .send(
            "POST",
            &format!("{path}/review"),
            Some(&app.as_roles("rita", &["reviewer"])),
            Some(json!({"decision": "approve"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    let url = |u: Value| json!({"upstream": {"url": u}});
    let headers = |h: Value| json!({"upstream": {"url": "http://127.0.0.1:9/mcp", "headers": h}});
    let with = |k: &str, v: Value| {
        let mut b = json!({"upstream": {}});
        b[k] = v;
        b
    };
    let cases = vec![
        json!({"upstream": {}}),
        url(json!("http://127.0.0.1:9/mcp")),
        url(json!("https://files.example.com/mcp?x=1&y=%20")),
        url(json!("http://[::1]:8080/mcp")),
        url(json!("ftp://x/")),
        url(json!("http://u:p@x/")),
        url(json!("http://x/#f")),
        url(json!("http://x/a b")),
        url(json!("")),
        url(json!(null)),
        url(json!(7)),
        headers(json!({"Authorization": "Bearer x", "x!#$%&'*+.^_`|~": "1"})),
        headers(json!({"Host": "y"})),
        headers(json!({"mcp-SESSION-id": "y"})),
        headers(json!({"bad name": "y"})),
        headers(json!({"X-A": "line\nbreak"})),
        headers(json!({"X-Note": "a".repeat(4097)})),
        headers(json!(null)),
        headers(json!({"X-A": 1})),
        with("version", json!("latest")),
        with("version", json!("1.0.0")),
        with("version", json!("1.0")),
        with("version", json!("v1.0.0")),
        with("version", json!("01.0.0")),
        with("version", json!("1.0.0+build")),
        with("version", json!("Latest")),
        with("version", json!(null)),
        with("mode", json!("strict")),
        with("mode", json!("advisory")),
        with("mode", json!("Strict")),
        with("mode", json!(null)),
        with("calls", json!("non_destructive")),
        with("calls", json!("read_only")),
        with("calls", json!("none")),
        with("calls", json!(null)),
        with("extra", json!(1)),
        json!({}),
        json!({"upstream": {"url": "http://127.0.0.1:9/mcp", "extra": 1}}),
    ];
    let path = format!(
        "/v1/tenants/{}/servers/{}/guard",
        app.tenant,
        GUARDED.replace('/', "%2F")
    );
    agree(&app, "put_guard_route", "PUT", &path, cases).await;
}

#[tokio::test]
async fn the_plan_schema_states_server_or_session() {
    let app = TestApp::new().await;
    approved(&app).await;
    let call = json!({"name": "read_note"});
    let calls = |n: usize| Value::Array(vec![call.clone(); n]);
    let cases = vec![
        json!({"provider": "github", "server": SERVER, "calls": [call]}),
        json!({"provider": "github", "server": SERVER, "version": "1.0.0", "session": null,
               "calls": [call], "granted": ["notes:read", "notes:read"]}),
        json!({"provider": "github", "server": SERVER, "calls": [{"name": "read_note",
               "arguments": {"id": "n1"}}]}),
        json!({"provider": "github", "server": SERVER, "calls": [{"name": "read_note",
               "arguments": null}]}),
        json!({"provider": "github", "calls": [call]}),
        json!({"provider": "github", "server": null, "session": null, "calls": [call]}),
        json!({"provider": "github", "server": SERVER, "session": "s", "calls": [call]}),
        json!({"provider": "github", "session": "s", "version": "1.0.0", "calls": [call]}),
        json!({"provider": "github", "session": "s", "calls": calls(101)}),
        json!({"provider": "github", "server": SERVER, "calls": [{"name": "read_note",
               "arguments": 5}]}),
        json!({"provider": "github", "server": SERVER, "calls": [call], "granted": ["a b"]}),
        json!({"provider": "github", "server": SERVER, "calls": [call], "granted": [""]}),
        json!({"provider": "github", "server": SERVER, "calls": [call],
               "granted": vec!["g"; 257]}),
        json!({"provider": "github", "server": SERVER, "calls": calls(1025)}),
        json!({"provider": "github", "server": SERVER, "calls": [call], "extra": 1}),
    ];
    let path = format!("/v1/tenants/{}/scopes/plan", app.tenant);
    agree(&app, "plan_scopes", "POST", &path, cases).await;
    // A session the schema admits but this tenant does not hold is state,
    // not a bad body: 404.
    let r = app
        .send(
            "POST",
            &path,
            Some(&app.admin()),
            Some(json!({"provider": "github", "session": "nope", "calls": [call]})),
        )
        .await;
    r.problem(404, "session_not_found");
}

#[tokio::test]
async fn the_server_json_schema_states_the_card_rules() {
    let app = TestApp::new().await;
    let mut n = 0;
    let mut fresh = |extra: Value| {
        n += 1;
        let mut doc = json!({"name": format!("io.github.acme/imported-{n}"), "version": "1.0.0"});
        for (k, v) in extra.as_object().unwrap() {
            if v.is_null() && k != "signature" && k != "_meta" {
                doc.as_object_mut().unwrap().remove(k);
            } else {
                doc[k] = v.clone();
            }
        }
        doc
    };
    let cases = vec![
        fresh(json!({})),
        fresh(
            json!({"$schema": "https://static.modelcontextprotocol.io/schemas/2025-09-29/server.schema.json",
            "title": "Notes", "description": "Notes of a team", "websiteUrl": "https://notes.example",
            "repository": {"url": "https://github.com/acme/notes", "source": "github", "id": "1"},
            "remotes": [{"type": "streamable-http", "url": "https://notes.example/mcp",
                "headers": [{"name": "X-Key"}]}, {"type": "sse", "url": "http://notes.example/sse"}],
            "packages": [{"registryType": "npm", "identifier": "@acme/notes", "version": "1.0.0",
                "transport": {"type": "stdio"},
                "packageArguments": [{"type": "positional", "valueHint": "dir"},
                    {"type": "named", "name": "--port", "value": "1"}],
                "runtimeArguments": [{"type": "positional", "value": null}]}],
            "_meta": {"io.example": {"x": 1}}, "somethingElse": [1, 2]}),
        ),
        fresh(json!({"version": null, "version_detail": {"version": "2.0.0-rc.1"}})),
        fresh(json!({"version_detail": {"version": "latest"}})),
        fresh(json!({"version_detail": 7})),
        fresh(json!({"version": null})),
        fresh(json!({"version": null, "version_detail": {"version": "latest"}})),
        fresh(json!({"version": null, "version_detail": {}})),
        fresh(json!({"name": null})),
        fresh(json!({"name": "a/b/c"})),
        fresh(json!({"name": "ab"})),
        fresh(json!({"version": "latest"})),
        fresh(json!({"version": "1.0.0+build.1"})),
        fresh(json!({"version": "01.0.0"})),
        fresh(json!({"version": "99999999999999999999.0.0"})),
        fresh(json!({"description": "  \u{3000}"})),
        fresh(json!({"description": "d".repeat(100)})),
        fresh(json!({"description": "d".repeat(101)})),
        fresh(json!({"description": null, "title": ""})),
        fresh(json!({"title": "t".repeat(101)})),
        fresh(json!({"websiteUrl": "ftp://notes.example"})),
        fresh(json!({"websiteUrl": "https://notes example"})),
        fresh(json!({"websiteUrl": "HTTPS://notes.example"})),
        fresh(json!({"repository": {"url": "https://github.com/acme/notes"}})),
        fresh(json!({"repository": "https://github.com/acme/notes"})),
        fresh(json!({"remotes": [{"type": "websocket", "url": "https://x.example"}]})),
        fresh(json!({"remotes": [{"type": "sse"}]})),
        fresh(json!({"remotes": {}})),
        fresh(
            json!({"packages": [{"registryType": "npm", "identifier": "x",
            "transport": {"type": "stdio"}, "version": "Latest"}]}),
        ),
        fresh(
            json!({"packages": [{"registryType": "npm", "identifier": "x",
            "transport": {"type": "stdio"}, "version": ""}]}),
        ),
        fresh(json!({"packages": [{"registryType": "npm", "identifier": "x"}]})),
        fresh(
            json!({"packages": [{"registryType": "npm", "identifier": "x",
            "transport": {"type": "stdio"}, "packageArguments": [{"type": "positional"}]}]}),
        ),
        fresh(
            json!({"packages": [{"registryType": "npm", "identifier": "x",
            "transport": {"type": "stdio"}, "runtimeArguments": [{"type": "named", "value": "v"}]}]}),
        ),
        fresh(
            json!({"packages": [{"registryType": "npm", "identifier": "x",
            "transport": {"type": "stdio"}, "packageArguments": [{"type": "flag"}]}]}),
        ),
        fresh(
            json!({"packages": [{"registryType": "npm", "identifier": "x",
            "transport": {"type": "stdio"}, "packageArguments": ["--x"]}]}),
        ),
        fresh(json!({"_meta": 1})),
        fresh(json!({"signature": {"tools": []}})),
        fresh(json!({"signature": null})),
        json!([]),
    ];
    let path = format!("/v1/tenants/{}/import/server-json", app.tenant);
    agree(&app, "import_server_json", "POST", &path, cases).await;
}

#[tokio::test]
async fn the_grant_schema_states_plan_or_scopes() {
    let app = TestApp::new().await;
    let r = app
        .send(
            "PUT",
            &format!("/v1/tenants/{}/providers/notes", app.tenant),
            Some(&app.admin()),
            Some(json!({
                "client_id": "pinfold",
                "authorization_endpoint": "https://as.example/authorize",
                "token_endpoint": "https://as.example/token",
                "redirect_uris": ["https://app.example/callback"],
                "resources": {SERVER: "https://notes.example/mcp"}
            })),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    let grant = |extra: Value| {
        let mut b = json!({"provider": "notes", "redirect_uri": "https://app.example/callback",
            "resource": SERVER});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    let plan = |p: Value| grant(json!({"plan": p}));
    let scopes = |n: usize| (0..n).map(|i| format!("s{i}")).collect::<Vec<_>>();
    let cases = vec![
        grant(json!({"scopes": ["notes:read"]})),
        grant(json!({"scopes": scopes(100), "plan": null})),
        plan(json!({"required": ["notes:read"]})),
        plan(json!({"required": [], "request": ["notes:read"], "server": SERVER})),
        plan(
            json!({"required": ["a"], "request": null, "calls": [1, {}], "_meta": 2,
            "notices": [], "strategy": "exact", "provider": "other", "version": "1.0.0",
            "www_authenticate": null}),
        ),
        grant(json!({"scopes": []})),
        grant(json!({"scopes": ["a", "a"]})),
        grant(json!({"scopes": ["a b"]})),
        grant(json!({"scopes": scopes(101)})),
        grant(json!({})),
        grant(json!({"scopes": null, "plan": null})),
        grant(json!({"scopes": ["a"], "plan": {"required": ["a"]}})),
        grant(json!({"scopes": ["a"], "provider": "Notes"})),
        plan(json!({"required": []})),
        plan(json!({"required": ["a"], "request": []})),
        plan(json!({"required": scopes(101)})),
        plan(json!({"required": ["a"], "request": ["b", "b"]})),
        plan(json!({"required": ["a\"b"]})),
        plan(json!({"required": ["a"], "extra": 1})),
        plan(json!({"request": ["a"]})),
    ];
    let path = format!("/v1/tenants/{}/grants", app.tenant);
    agree(&app, "create_grant", "POST", &path, cases).await;
}
