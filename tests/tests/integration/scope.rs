//! The scope service end to end, on both databases: the scope envelope of
//! a published version and least-privilege plans against it.

use pinfold_example_upstream::{Running, Switches, declared_security_schemes};
use pinfold_server::services::Service;
use pinfold_tests::*;
use serde_json::{Value, json};

const SERVER: &str = "io.github.acme/code";

fn card() -> Value {
    let obj = json!({"type": "object"});
    json!({"name": SERVER, "version": "1.0.0", "description": "Code host", "signature": {"tools": [
        {"name": "get_file", "inputSchema": obj,
         "securitySchemes": [{"type": "noauth"}, {"type": "oauth2", "scopes": ["repo"]}]},
        {"name": "get_teams", "inputSchema": obj,
         "securitySchemes": [{"type": "oauth2", "scopes": ["read:org"]}],
         "_meta": {"securitySchemes": [{"type": "oauth2", "scopes": ["admin:org"]}]}},
        {"name": "ui_get", "inputSchema": obj,
         "securitySchemes": [{"type": "oauth2", "scopes": ["repo"]}, {"type": "oauth2", "scopes": ["read:org"]}]},
        {"name": "delete_repository", "inputSchema": obj,
         "securitySchemes": [{"type": "oauth2", "scopes": ["delete_repo", "repo"]}]},
        {"name": "create_gist", "inputSchema": obj,
         "_meta": {"securitySchemes": [{"type": "oauth2", "scopes": ["gist"]}]}},
        {"name": "whoami", "inputSchema": obj}
    ]}})
}

async fn publish(app: &TestApp) {
    let path = format!(
        "/v1/tenants/{}/servers/{}/versions/1.0.0",
        app.tenant,
        SERVER.replace('/', "%2F")
    );
    let r = app
        .send(
            "PUT",
            &path,
            Some(&app.as_roles("pat", &["publisher"])),
            Some(card()),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
}

fn plan_path(app: &TestApp) -> String {
    format!("/v1/tenants/{}/scopes/plan", app.tenant)
}

#[tokio::test]
async fn envelope_per_tool_and_in_total() {
    let app = TestApp::new().await;
    publish(&app).await;
    let reader = app.as_roles("rob", &["reader"]);
    let base = format!(
        "/v1/tenants/{}/servers/{}/versions",
        app.tenant,
        SERVER.replace('/', "%2F")
    );
    let r = app.get(&format!("{base}/1.0.0/scopes"), &reader).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    let v = r.json();
    assert_eq!(v["server"], SERVER);
    assert_eq!(v["version"], "1.0.0");
    assert_eq!(
        v["scopes"],
        json!(["delete_repo", "gist", "read:org", "repo"])
    );
    assert_eq!(v["tools_without_schemes"], json!(["whoami"]));
    assert_eq!(v["tools"]["get_file"]["noauth"], true);
    assert_eq!(v["tools"]["create_gist"]["source"], "meta");
    assert_eq!(v["tools"]["create_gist"]["scopes"], json!(["gist"]));
    assert_eq!(v["tools"]["get_teams"]["scopes"], json!(["read:org"]));
    assert_eq!(
        v["tools"]["get_teams"]["notices"].as_array().unwrap().len(),
        1
    );
    assert_eq!(v["tools"]["whoami"]["declared"], false);
    // `latest` needs an approved version; an unknown version is a 404.
    app.get(&format!("{base}/9.9.9/scopes"), &reader)
        .await
        .problem(404, "version_not_found");
    app.get(&format!("{base}/latest/scopes"), &reader)
        .await
        .problem(404, "no_trusted_version");
    // No token, no envelope.
    let r = app
        .send("GET", &format!("{base}/1.0.0/scopes"), None, None)
        .await;
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn plan_least_privilege_with_step_up_challenge() {
    let app = TestApp::new().await;
    publish(&app).await;
    let client = app.as_roles("carl", &["client"]);
    let r = app
        .send(
            "POST",
            &plan_path(&app),
            Some(&client),
            Some(
                json!({"provider": "github", "server": SERVER, "version": "1.0.0",
                "calls": [
                    {"name": "get_file", "arguments": {"path": "README.md"}},
                    {"name": "get_teams", "arguments": {}},
                    {"name": "ui_get", "arguments": {}},
                    {"name": "create_gist", "arguments": {}},
                    {"name": "whoami", "arguments": {}}
                ],
                "granted": ["gist", "user"]}),
            ),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    let v = r.json();
    assert_eq!(v["strategy"], "exact");
    assert_eq!(v["provider"], "github");
    // get_file: noauth. get_teams: read:org. ui_get: read:org (already
    // needed; repo would add six scopes). create_gist: granted. whoami:
    // no schemes, the github preset has no default scopes.
    assert_eq!(v["calls"][0]["noauth"], true);
    assert_eq!(v["calls"][0]["alternative"], 0);
    assert_eq!(v["calls"][2]["alternative"], 1);
    assert_eq!(v["calls"][2]["scopes"], json!(["read:org"]));
    assert_eq!(v["calls"][4]["defaulted"], true);
    assert_eq!(v["calls"][4]["alternative"], Value::Null);
    assert_eq!(v["required"], json!(["gist", "read:org"]));
    assert_eq!(v["request"], json!(["read:org"]));
    let challenge = "Bearer error=\"insufficient_scope\", scope=\"gist read:org\"";
    assert_eq!(v["www_authenticate"], challenge);
    assert_eq!(v["_meta"]["mcp/www_authenticate"], json!([challenge]));
    assert_eq!(v["notices"][0]["code"], "security_schemes_disagree");
    assert_eq!(v["notices"][0]["call"], 1);

    // Everything granted: nothing to request, no challenge.
    let r = app
        .send(
            "POST",
            &plan_path(&app),
            Some(&client),
            Some(
                json!({"provider": "github", "server": SERVER, "version": "1.0.0",
                "calls": [{"name": "delete_repository"}], "granted": ["repo", "delete_repo"]}),
            ),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    let v = r.json();
    assert_eq!(v["request"], json!([]));
    assert_eq!(v["required"], json!(["delete_repo", "repo"]));
    assert_eq!(v["www_authenticate"], Value::Null);
}

#[tokio::test]
async fn bad_plan_requests_are_clear_problems() {
    let app = TestApp::new().await;
    publish(&app).await;
    let client = app.as_roles("carl", &["client"]);
    let path = plan_path(&app);
    let send = |body: Value| {
        let app = &app;
        let path = path.clone();
        let client = client.clone();
        async move { app.send("POST", &path, Some(&client), Some(body)).await }
    };
    let base = json!({"provider": "github", "server": SERVER, "version": "1.0.0"});
    let with = |extra: Value| {
        let mut b = base.clone();
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    // Unknown tool, bad granted scope: 422 with pointers.
    let p = send(with(
        json!({"calls": [{"name": "nope"}], "granted": ["repo"]}),
    ))
    .await
    .problem(422, "validation_failed");
    assert_eq!(p["errors"][0]["pointer"], "/calls/0/name");
    assert_eq!(p["errors"][0]["code"], "unknown_tool");
    let p = send(with(
        json!({"calls": [{"name": "get_file"}], "granted": ["not ok"]}),
    ))
    .await
    .problem(422, "validation_failed");
    assert_eq!(p["errors"][0]["pointer"], "/granted/0");
    assert_eq!(p["errors"][0]["code"], "invalid_scope");
    // Wrong types and unknown fields.
    send(with(json!({"calls": "get_file"})))
        .await
        .problem(422, "validation_failed");
    send(with(json!({"calls": [], "scopes": []})))
        .await
        .problem(422, "validation_failed");
    // No server; a session that is not one (plans through sessions are
    // tested in `plans_through_a_session_use_resolved_schemes`).
    send(json!({"calls": []}))
        .await
        .problem(422, "validation_failed");
    send(json!({"session": "s", "calls": []}))
        .await
        .problem(404, "session_not_found");
    // Unknown provider; no provider named and none lists the server.
    send(json!({"provider": "gitlab", "server": SERVER, "version": "1.0.0", "calls": []}))
        .await
        .problem(404, "provider_not_found");
    send(json!({"server": SERVER, "version": "1.0.0", "calls": []}))
        .await
        .problem(422, "provider_required");
    // Unknown server.
    send(json!({"provider": "github", "server": "io.github.acme/none", "calls": []}))
        .await
        .problem(404, "server_not_found");
    // Malformed JSON, no token.
    let r = app
        .send_raw("POST", &path, Some(&client), Some(b"{\"calls\": ["), &[])
        .await;
    r.problem(400, "malformed_json");
    let r = app
        .send("POST", &path, None, Some(with(json!({"calls": []}))))
        .await;
    assert_eq!(r.status, 401);
}

const FILES_CARD: &str = include_str!("../../../examples/manage-files-1.0.0.json");

/// The reference upstream's card with `manage_files` declaring every
/// `securitySchemes` alternative its resolutions may narrow to.
fn files_card() -> Value {
    let mut c: Value = serde_json::from_str(FILES_CARD).unwrap();
    c["signature"]["tools"][0]["securitySchemes"] = declared_security_schemes();
    c
}

/// Publishes and approves `files_card()`; returns the server name.
async fn publish_files(app: &TestApp) -> String {
    let card = files_card();
    let server = card["name"].as_str().unwrap().to_owned();
    let base = format!(
        "/v1/tenants/{}/servers/{}/versions/1.0.0",
        app.tenant,
        server.replace('/', "%2F")
    );
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
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    server
}

/// Opens a session for `token` on `up`; returns its id.
async fn open_session(app: &TestApp, token: &str, server: &str, up: &Running) -> String {
    let r = app
        .send(
            "POST",
            &format!("/v1/tenants/{}/sessions", app.tenant),
            Some(token),
            Some(json!({"server": server, "upstream": {"url": up.url()}})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    r.json()["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn plans_through_a_session_use_resolved_schemes() {
    let app = TestApp::new().await;
    let server = publish_files(&app).await;
    let up = Running::start(
        "127.0.0.1:0".parse().unwrap(),
        Switches {
            schemes: true,
            ..Switches::default()
        },
    )
    .await
    .expect("reference upstream starts");
    let client = app.as_roles("carl", &["client"]);
    let session = open_session(&app, &client, &server, &up).await;
    let plan = |token: String, body: Value| {
        let app = &app;
        async move {
            app.send("POST", &plan_path(app), Some(&token), Some(body))
                .await
        }
    };

    // Without a session the planner only sees the declared alternatives
    // and picks the smaller one, `files:read`, even for a delete.
    let r = plan(
        client.clone(),
        json!({"provider": "google", "server": server, "version": "1.0.0",
            "calls": [{"name": "manage_files", "arguments": {"path": "/a", "action": "delete"}}]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(r.json()["required"], json!(["files:read"]));

    // Through the session each call is resolved: `delete` needs
    // `files:write` too, `read` only `files:read`.
    let r = plan(
        client.clone(),
        json!({"provider": "google", "session": session, "calls": [
            {"name": "manage_files", "arguments": {"path": "/a", "action": "read"}},
            {"name": "manage_files", "arguments": {"path": "/a", "action": "delete"}},
            {"name": "list_files", "arguments": {"dir": "/"}}
        ], "granted": ["files:read"]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    let v = r.json();
    assert_eq!(v["server"], server.as_str());
    assert_eq!(v["version"], "1.0.0");
    assert_eq!(v["strategy"], "exact");
    assert_eq!(v["calls"][0]["alternative"], 0);
    assert_eq!(v["calls"][0]["scopes"], json!(["files:read"]));
    assert_eq!(v["calls"][1]["alternative"], 0);
    assert_eq!(
        v["calls"][1]["scopes"],
        json!(["files:read", "files:write"])
    );
    assert_eq!(v["calls"][2]["defaulted"], true);
    assert_eq!(v["required"], json!(["files:read", "files:write"]));
    assert_eq!(v["request"], json!(["files:write"]));
    assert_eq!(
        v["www_authenticate"],
        "Bearer error=\"insufficient_scope\", scope=\"files:read files:write\""
    );
    // The resolutions went through the session's resolve cache: two
    // upstream calls, and resolving `delete` again is a cache hit.
    assert_eq!(up.calls(), 2);
    let r = app
        .send(
            "POST",
            &format!("/v1/tenants/{}/sessions/{session}/resolve", app.tenant),
            Some(&client),
            Some(json!({"name": "manage_files", "arguments": {"path": "/a", "action": "delete"}})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(r.json()["source"], "cache");
    assert_eq!(
        r.json()["tool"]["securitySchemes"],
        json!([{"type": "oauth2", "scopes": ["files:read", "files:write"]}])
    );
    assert_eq!(up.calls(), 2);

    // Another caller's session, an unknown session: 404.
    let other = app.as_roles("dana", &["client"]);
    let calls = json!([{"name": "manage_files", "arguments": {"path": "/a", "action": "read"}}]);
    plan(
        other,
        json!({"provider": "google", "session": session, "calls": calls}),
    )
    .await
    .problem(404, "session_not_found");
    plan(
        client.clone(),
        json!({"provider": "google", "session": "0123456789abcdef0123456789abcdef", "calls": calls}),
    )
    .await
    .problem(404, "session_not_found");

    // Bad calls point at the call.
    let p = plan(
        client.clone(),
        json!({"provider": "google", "session": session, "calls": [
            {"name": "manage_files", "arguments": {"path": "/a", "action": "read"}},
            {"name": "nope", "arguments": {}},
            {"name": "manage_files", "arguments": {"path": "/a"}},
            {"name": "manage_files", "arguments": [1]}
        ]}),
    )
    .await
    .problem(422, "validation_failed");
    let errs = p["errors"].as_array().unwrap();
    assert_eq!(errs[0]["pointer"], "/calls/3/arguments", "{p}");
    assert_eq!(errs[0]["code"], "invalid_type");
    let p = plan(
        client.clone(),
        json!({"provider": "google", "session": session, "calls": [
            {"name": "manage_files", "arguments": {"path": "/a", "action": "read"}},
            {"name": "nope", "arguments": {}},
            {"name": "manage_files", "arguments": {"path": "/a"}}
        ]}),
    )
    .await
    .problem(422, "validation_failed");
    let errs = p["errors"].as_array().unwrap();
    assert_eq!(errs[0]["pointer"], "/calls/1/name", "{p}");
    assert_eq!(errs[0]["code"], "tool_not_declared");
    assert!(
        errs[1]["pointer"]
            .as_str()
            .unwrap()
            .starts_with("/calls/2/arguments"),
        "{p}"
    );
    // A session and a server at once.
    let p = plan(
        client.clone(),
        json!({"provider": "google", "session": session, "server": server, "calls": calls}),
    )
    .await
    .problem(422, "validation_failed");
    assert_eq!(p["errors"][0]["code"], "session_or_server");

    // A process serving the scope service without the resolve service
    // cannot plan through a session.
    let scope_only = app.serving(&[Service::Registry, Service::Scope]);
    let p = plan_on(
        &scope_only,
        &client,
        json!({"provider": "google", "session": session, "calls": calls}),
    )
    .await
    .problem(422, "validation_failed");
    assert_eq!(p["errors"][0]["code"], "session_plans_unavailable");
    assert_eq!(p["errors"][0]["pointer"], "/session");
    up.stop().await;
}

async fn plan_on(app: &TestApp, token: &str, body: Value) -> Resp {
    app.send("POST", &plan_path(app), Some(token), Some(body))
        .await
}
