//! The scope service end to end, on both databases: the scope envelope of
//! a published version and least-privilege plans against it.

use serde_json::{Value, json};
use signet_tests::*;

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
        json!({"calls": [{"name": "nope"}], "granted": ["not ok"]}),
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
    // No server; a session (not available yet).
    send(json!({"calls": []}))
        .await
        .problem(422, "validation_failed");
    let p = send(json!({"session": "s", "calls": []}))
        .await
        .problem(422, "validation_failed");
    assert_eq!(p["errors"][0]["code"], "session_plans_unavailable");
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
