//! The guard's MCP endpoint, `/t/{tenant}/mcp/{server}`, end to end on both
//! databases: a route bound to the reference upstream (an rmcp server over
//! real HTTP) and its approved signature, driven with JSON-RPC over
//! Streamable HTTP. Rug pulls are played by the upstream's switches and a
//! `notifications/tools/list_changed`; the upstream counts every
//! `tools/call` it receives, so "never reached the upstream" is measured.

use std::collections::BTreeSet;
use std::time::Duration;

use pinfold_example_upstream::Switches;
use pinfold_tests::*;
use serde_json::{Value, json};

use crate::manage_files::{publish, server, upstream};

/// Puts the guard route of the reference server.
async fn route(app: &TestApp, body: Value) {
    let r = app
        .send(
            "PUT",
            &format!(
                "/v1/tenants/{}/servers/{}/guard",
                app.tenant,
                server().replace('/', "%2F")
            ),
            Some(&app.admin()),
            Some(body),
        )
        .await;
    assert!(
        r.status == 200 || r.status == 201,
        "{} {}",
        r.status,
        String::from_utf8_lossy(&r.bytes)
    );
}

fn endpoint(app: &TestApp) -> String {
    format!("/t/{}/mcp/{}", app.tenant, server())
}

/// The JSON-RPC message answering `id` in a body: JSON, or the events of a
/// stream.
fn answer(r: &Resp, id: &Value) -> Value {
    let ct = r.header("content-type").unwrap_or_default();
    if ct.starts_with("text/event-stream") {
        let text = String::from_utf8_lossy(&r.bytes);
        for line in text.lines() {
            if let Some(data) = line.strip_prefix("data: ")
                && let Ok(v) = serde_json::from_str::<Value>(data)
                && v.get("id") == Some(id)
                && v.get("method").is_none()
            {
                return v;
            }
        }
        panic!("no answer to {id} in the stream: {text}");
    }
    serde_json::from_slice(&r.bytes)
        .unwrap_or_else(|_| panic!("{} {}", r.status, String::from_utf8_lossy(&r.bytes)))
}

/// One MCP client session through the guard.
struct Mcp<'a> {
    app: &'a TestApp,
    token: String,
    session: Option<String>,
    next: u64,
}

impl<'a> Mcp<'a> {
    async fn open(app: &'a TestApp, token: String) -> Mcp<'a> {
        let mut m = Mcp {
            app,
            token,
            session: None,
            next: 0,
        };
        let r = m
            .post(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "guard-test", "version": "1"}}}),
            )
            .await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
        let init = answer(&r, &json!(0));
        assert!(init.get("result").is_some(), "{init}");
        m.session = Some(r.header("mcp-session-id").expect("a session id"));
        let r = m
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.bytes));
        m
    }

    async fn post(&self, msg: Value) -> Resp {
        let mut headers = vec![("accept", "application/json, text/event-stream")];
        let session;
        if let Some(s) = &self.session {
            session = s.clone();
            headers.push(("mcp-session-id", &session));
            headers.push(("mcp-protocol-version", "2025-11-25"));
        }
        self.app
            .send_raw(
                "POST",
                &endpoint(self.app),
                Some(&self.token),
                Some(msg.to_string().as_bytes()),
                &headers,
            )
            .await
    }

    async fn rpc(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = json!(self.next);
        let r = self
            .post(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        assert_eq!(
            r.status,
            200,
            "{method}: {}",
            String::from_utf8_lossy(&r.bytes)
        );
        answer(&r, &id)
    }

    async fn tools(&mut self) -> BTreeSet<String> {
        let r = self.rpc("tools/list", json!({})).await;
        r["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }

    async fn call(&mut self, name: &str, arguments: Value) -> Value {
        self.rpc("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }
}

fn client(app: &TestApp) -> String {
    app.as_roles("carl-client", &["client"])
}

/// A strict route of the reference server on an upstream of its own, and
/// what a sessionless client's messages to it are made of.
struct Sessionless {
    up: std::sync::Arc<pinfold_example_upstream::Running>,
    /// The endpoint, as the fast path takes it.
    path: String,
    /// The endpoint with a query string: the router's (the fast path takes
    /// no query).
    routed_path: String,
    /// The per-request `_meta` of a 2026-07-28 request.
    meta: Value,
    /// A client of the tenant.
    carl: String,
    /// A client of another tenant.
    stranger: String,
}

async fn sessionless(app: &TestApp) -> Sessionless {
    publish(app).await;
    let up = upstream(Switches::default()).await;
    route(
        app,
        json!({"upstream": {"url": up.url()}, "mode": "strict"}),
    )
    .await;
    let path = endpoint(app);
    let other = app.new_tenant().await;
    Sessionless {
        up,
        routed_path: format!("{path}?via=router"),
        path,
        meta: json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }),
        carl: client(app),
        stranger: token("eve", Some(other.as_str()), &["client"]),
    }
}

/// One sessionless (2026-07-28) message with `id` to `path` (with `token`,
/// when there is one), its `Mcp-Method` header saying `method` and its
/// `Mcp-Name` header `name`.
async fn modern(
    app: &TestApp,
    path: &str,
    token: Option<&str>,
    id: Value,
    method: &str,
    name: Option<&str>,
    params: Value,
) -> Resp {
    let mut headers = vec![
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", method),
    ];
    if let Some(n) = name {
        headers.push(("mcp-name", n));
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    app.send_raw(
        "POST",
        path,
        token,
        Some(body.to_string().as_bytes()),
        &headers,
    )
    .await
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

/// Waits until `tools/list` through a new session shows `want`.
async fn until_listed(app: &TestApp, want: &BTreeSet<String>) {
    let mut last = BTreeSet::new();
    for _ in 0..100 {
        let mut m = Mcp::open(app, client(app)).await;
        last = m.tools().await;
        if &last == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("tools/list shows {last:?}, not {want:?}");
}

async fn drift_events(app: &TestApp) -> Vec<Value> {
    let a = app
        .get(
            &format!("/v1/tenants/{}/audit?limit=100", app.tenant),
            &app.admin(),
        )
        .await
        .json();
    a["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "guard.drift")
        .cloned()
        .collect()
}

/// Waits until `n` drift events are recorded (they are written off the
/// request path).
async fn until_events(app: &TestApp, n: usize) {
    for _ in 0..100 {
        if drift_events(app).await.len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{n} drift events: {:#?}", drift_events(app).await);
}

const ALL: &[&str] = &["list_files", "manage_files", "manage_files_dynamic"];

#[tokio::test]
async fn the_reviewed_view_is_served_and_refused_calls_never_reach_the_upstream() {
    let app = TestApp::new().await;
    publish(&app).await;
    let up = upstream(Switches {
        require_header: Some(("X-Upstream-Key".into(), "k-guard".into())),
        ..Switches::default()
    })
    .await;
    route(
        &app,
        json!({"upstream": {"url": up.url(), "headers": {"X-Upstream-Key": "k-guard"}},
            "mode": "strict"}),
    )
    .await;
    let mut m = Mcp::open(&app, client(&app)).await;
    assert!(
        m.session.as_deref().unwrap().starts_with("v2."),
        "a sealed session id"
    );
    assert_eq!(m.tools().await, set(ALL));

    // A declared call goes through with the route's header.
    let r = m.call("list_files", json!({"dir": "/"})).await;
    assert_ne!(r["result"]["isError"], true, "{r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("list_files")
    );
    assert_eq!(up.tool_calls("list_files"), 1);

    // Arguments outside the signature's inputSchema: a tool execution
    // error naming the pointer, and nothing upstream.
    let r = m.call("list_files", json!({"dir": 7})).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("/dir"),
        "{r}"
    );
    assert_eq!(up.tool_calls("list_files"), 1);

    // A tool nobody listed: refused with the guard's own code.
    let r = m.call("purge_files", json!({"dir": "/"})).await;
    assert_eq!(r["error"]["code"], -32010, "{r}");
    assert_eq!(r["error"]["data"]["reason"], "undeclared", "{r}");
    assert_eq!(up.all_tool_calls(), 1);
}

#[tokio::test]
async fn rug_pulls_under_strict_are_withheld_refused_and_recorded_once() {
    rug_pulls(false).await;
}

#[tokio::test]
async fn rug_pulls_on_an_upstream_that_speaks_only_2025_11_25() {
    rug_pulls(true).await;
}

/// An upstream that adds a tool, then flips `list_files` to destructive,
/// then rewrites its description, each announced with `list_changed`.
/// `legacy`: the upstream offers only 2025-11-25, so the guard's own
/// connection falls back to `initialize` and hears of changes on its
/// session's `GET` stream (else on a `subscriptions/listen` stream).
async fn rug_pulls(legacy: bool) {
    let app = TestApp::new().await;
    publish(&app).await;
    let up = upstream(Switches {
        legacy_only: legacy,
        ..Switches::default()
    })
    .await;
    route(
        &app,
        json!({"upstream": {"url": up.url()}, "mode": "strict"}),
    )
    .await;
    until_listed(&app, &set(ALL)).await;

    // 1. A tool added after review.
    up.update(|s| s.extra_tool = true);
    up.notify_list_changed().await;
    until_events(&app, 1).await;
    // 2. list_files turned destructive, and 3. its description rewritten.
    for (i, flip) in [
        (|s: &mut Switches| s.flip_destructive = true) as fn(&mut Switches),
        |s: &mut Switches| {
            s.flip_destructive = false;
            s.rewrite_description = true;
        },
    ]
    .into_iter()
    .enumerate()
    {
        up.update(flip);
        up.notify_list_changed().await;
        until_listed(&app, &set(&["manage_files", "manage_files_dynamic"])).await;
        let mut m = Mcp::open(&app, client(&app)).await;
        let r = m.call("list_files", json!({"dir": "/"})).await;
        assert_eq!(r["error"]["code"], -32010, "pull {i}: {r}");
        assert_eq!(r["error"]["data"]["reason"], "drifted", "pull {i}: {r}");
        let r = m.call("purge_files", json!({"dir": "/"})).await;
        assert_eq!(r["error"]["code"], -32010, "pull {i}: {r}");
        assert_eq!(
            up.all_tool_calls(),
            0,
            "pull {i}: nothing reached the upstream"
        );
        until_events(&app, i + 2).await;
    }
    // One audit event per distinct drifted list, however many requests saw
    // it: the added tool, the flip (with the tool), the rewrite (with the
    // tool).
    let events = drift_events(&app).await;
    assert_eq!(events.len(), 3, "{events:#?}");
    let digests: BTreeSet<&str> = events
        .iter()
        .map(|e| e["data"]["upstream_digest"].as_str().unwrap())
        .collect();
    assert_eq!(digests.len(), 3);
    let changes: Vec<String> = events
        .iter()
        .flat_map(|e| e["data"]["drifts"].as_array().unwrap().clone())
        .map(|d| {
            format!(
                "{}:{}",
                d["tool"].as_str().unwrap(),
                d["standing"].as_str().unwrap()
            )
        })
        .collect();
    assert!(
        changes.contains(&"purge_files:undeclared".to_owned()),
        "{changes:?}"
    );
    assert!(
        changes.contains(&"list_files:drifted".to_owned()),
        "{changes:?}"
    );

    // The same list again: no new event.
    up.notify_list_changed().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _ = Mcp::open(&app, client(&app)).await.tools().await;
    assert_eq!(drift_events(&app).await.len(), 3);

    // The same in /metrics.
    assert_eq!(app.metric("pinfold_guard_drifts_total").await, 3.0);
    assert!(app.metric("pinfold_guard_refused_calls_total").await >= 4.0);
}

#[tokio::test]
async fn permissive_serves_a_drift_flagged_and_advisory_serves_it() {
    for mode in ["permissive", "advisory"] {
        let app = TestApp::new().await;
        publish(&app).await;
        let up = upstream(Switches {
            flip_destructive: true,
            ..Switches::default()
        })
        .await;
        route(&app, json!({"upstream": {"url": up.url()}, "mode": mode})).await;
        let mut m = Mcp::open(&app, client(&app)).await;
        let list = m.rpc("tools/list", json!({})).await;
        let tools = list["result"]["tools"].as_array().unwrap();
        let lf = tools
            .iter()
            .find(|t| t["name"] == "list_files")
            .unwrap_or_else(|| panic!("{mode}: list_files served: {list}"));
        let flagged = lf.pointer("/_meta/io.github.pinfold~1guard").is_some();
        assert_eq!(flagged, mode == "permissive", "{mode}: {lf}");
        let r = m.call("list_files", json!({"dir": "/"})).await;
        assert!(r.get("result").is_some(), "{mode}: {r}");
        assert_eq!(up.tool_calls("list_files"), 1, "{mode}");
    }
}

#[tokio::test]
async fn a_route_written_on_this_replica_applies_to_its_next_request() {
    let app = TestApp::new().await;
    publish(&app).await;
    let up = upstream(Switches {
        flip_destructive: true,
        ..Switches::default()
    })
    .await;
    route(
        &app,
        json!({"upstream": {"url": up.url()}, "mode": "strict"}),
    )
    .await;
    let mut m = Mcp::open(&app, client(&app)).await;
    assert!(
        !m.tools().await.contains("list_files"),
        "withheld under strict"
    );
    // Rewritten to advisory: served on the very next request, well within
    // the route check's two seconds.
    route(
        &app,
        json!({"upstream": {"url": up.url()}, "mode": "advisory"}),
    )
    .await;
    let mut m = Mcp::open(&app, client(&app)).await;
    assert!(
        m.tools().await.contains("list_files"),
        "served under advisory"
    );
    // Deleted: the next request finds no route.
    let r = app
        .send(
            "DELETE",
            &format!(
                "/v1/tenants/{}/servers/{}/guard",
                app.tenant,
                server().replace('/', "%2F")
            ),
            Some(&app.admin()),
            None,
        )
        .await;
    assert_eq!(r.status, 204);
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
    .to_string();
    let r = app
        .send_raw(
            "POST",
            &endpoint(&app),
            Some(&client(&app)),
            Some(init.as_bytes()),
            &[],
        )
        .await;
    assert_eq!(r.status, 404, "{}", String::from_utf8_lossy(&r.bytes));
}

#[tokio::test]
async fn a_read_only_route_refuses_a_destructive_resolution_and_forwards_a_read() {
    let app = TestApp::new().await;
    publish(&app).await;
    let up = upstream(Switches::default()).await;
    route(
        &app,
        json!({"upstream": {"url": up.url()}, "mode": "strict", "calls": "read_only"}),
    )
    .await;
    let mut m = Mcp::open(&app, client(&app)).await;
    let r = m
        .call(
            "manage_files",
            json!({"action": "delete", "path": "/notes.txt"}),
        )
        .await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("read_only"),
        "{r}"
    );
    assert_eq!(up.tool_calls("manage_files"), 0);
    let r = m
        .call(
            "manage_files",
            json!({"action": "read", "path": "/notes.txt"}),
        )
        .await;
    assert_ne!(r["result"]["isError"], true, "{r}");
    assert_eq!(up.tool_calls("manage_files"), 1);
    // A static tool is decided on its annotations: list_files is read-only.
    let r = m.call("list_files", json!({"dir": "/"})).await;
    assert_ne!(r["result"]["isError"], true, "{r}");

    // The resolutions come from the resolve engine and its cache: the same
    // calls again are decided without asking the upstream.
    let asked = up.calls();
    assert_eq!(asked, 2, "one resolution per distinct call");
    let delete = json!({"action": "delete", "path": "/notes.txt"});
    let r = m.call("manage_files", delete.clone()).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    let r = m
        .call(
            "manage_files",
            json!({"action": "read", "path": "/notes.txt"}),
        )
        .await;
    assert_ne!(r["result"]["isError"], true, "{r}");
    assert_eq!(up.calls(), asked, "both answered from the cache");
    let hits = app.metric("pinfold_resolve_hits_total").await;
    assert!(hits >= 2.0, "the engine counted the hits: {hits}");
    // Under the tenant's `resolve_cache: none`, every call is resolved
    // upstream, and still decided on its resolution.
    app.put_policy(
        &json!({"enforcement_mode": "strict", "approval_required": true,
        "overrides": {"servers": {server(): {"resolve_cache": "none"}}}}),
    )
    .await;
    for _ in 0..2 {
        let r = m.call("manage_files", delete.clone()).await;
        assert_eq!(r["result"]["isError"], true, "{r}");
    }
    assert_eq!(up.calls(), asked + 2, "no reuse under resolve_cache: none");
    assert_eq!(up.tool_calls("manage_files"), 2);
}

#[tokio::test]
async fn who_may_connect_and_what_a_session_id_opens() {
    let app = TestApp::new().await;
    publish(&app).await;
    let up = upstream(Switches::default()).await;
    route(&app, json!({"upstream": {"url": up.url()}})).await;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
    .to_string();
    let path = endpoint(&app);

    // No token: 401 naming this endpoint's RFC 9728 metadata.
    let r = app
        .send_raw("POST", &path, None, Some(init.as_bytes()), &[])
        .await;
    assert_eq!(r.status, 401);
    let challenge = r.header("www-authenticate").unwrap();
    let want = format!(
        "/.well-known/oauth-protected-resource/t/{}/mcp/{}\"",
        app.tenant,
        server()
    );
    assert!(challenge.contains(&want), "{challenge}");
    let meta = app
        .send(
            "GET",
            &format!(
                "/.well-known/oauth-protected-resource/t/{}/mcp/{}",
                app.tenant,
                server()
            ),
            None,
            None,
        )
        .await;
    assert_eq!(meta.status, 200);
    let meta = meta.json();
    assert!(
        meta["resource"].as_str().unwrap().ends_with(&path),
        "{meta}"
    );
    // The tenant's authorization servers: here the same as Pinfold's own
    // (its test issuers name the tenant in the token).
    let root = app
        .send("GET", "/.well-known/oauth-protected-resource", None, None)
        .await
        .json();
    assert_eq!(
        meta["authorization_servers"], root["authorization_servers"],
        "{meta}"
    );

    // A reviewer holds neither client nor admin; another tenant's client
    // finds nothing.
    let r = app
        .send_raw(
            "POST",
            &path,
            Some(&app.as_roles("rita", &["reviewer"])),
            Some(init.as_bytes()),
            &[],
        )
        .await;
    assert_eq!(r.status, 403);
    let other = app.new_tenant().await;
    let stranger = token("eve", Some(other.as_str()), &["client", "admin"]);
    let r = app
        .send_raw("POST", &path, Some(&stranger), Some(init.as_bytes()), &[])
        .await;
    assert_eq!(r.status, 404);

    // A session id is the caller's, unforgeable, and a session is needed.
    let m = Mcp::open(&app, client(&app)).await;
    let sid = m.session.clone().unwrap();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    for (token, sid, want) in [
        (app.as_roles("dora", &["client"]), sid.clone(), 404),
        (client(&app), format!("{sid}x"), 404),
        (client(&app), "v2.nothing.here".to_owned(), 404),
    ] {
        let r = app
            .send_raw(
                "POST",
                &path,
                Some(&token),
                Some(list.as_bytes()),
                &[("mcp-session-id", &sid)],
            )
            .await;
        assert_eq!(r.status, want, "{}", String::from_utf8_lossy(&r.bytes));
    }
    let r = app
        .send_raw(
            "POST",
            &path,
            Some(&client(&app)),
            Some(list.as_bytes()),
            &[],
        )
        .await;
    assert_eq!(r.status, 400);

    // Transport errors are JSON-RPC errors.
    for (body, code) in [
        (&b"{not json"[..], -32700),
        (
            &b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]"[..],
            -32600,
        ),
        // An array is no message, even one serde could read field by
        // position as a request.
        (&b"[\"tools/list\", 1]"[..], -32600),
        (
            &b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"method\":\"x\"}"[..],
            -32600,
        ),
        (
            &b"{\"jsonrpc\":\"2.0\",\"id\":01,\"method\":\"tools/list\"}"[..],
            -32700,
        ),
    ] {
        let r = app
            .send_raw(
                "POST",
                &path,
                Some(&client(&app)),
                Some(body),
                &[("mcp-session-id", &sid)],
            )
            .await;
        assert_eq!(r.status, 400);
        assert_eq!(r.json()["error"]["code"], code);
    }

    // A web page of another origin cannot use a client's browser to reach it.
    let r = app
        .send_raw(
            "POST",
            &path,
            Some(&client(&app)),
            Some(init.as_bytes()),
            &[
                ("origin", "http://evil.example"),
                ("host", "127.0.0.1:8080"),
            ],
        )
        .await;
    assert_eq!(r.status, 403);
    // ... nor by rebinding its own name to Pinfold's address (its Host and
    // Origin agree, and are not Pinfold's).
    let r = app
        .send_raw(
            "POST",
            &path,
            Some(&client(&app)),
            Some(init.as_bytes()),
            &[("origin", "http://evil.example"), ("host", "evil.example")],
        )
        .await;
    assert_eq!(r.status, 403);
    // A page served by Pinfold's own loopback origin may.
    let r = app
        .send_raw(
            "POST",
            &path,
            Some(&client(&app)),
            Some(init.as_bytes()),
            &[
                ("origin", "http://127.0.0.1:8080"),
                ("host", "127.0.0.1:8080"),
            ],
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));

    // No route for a server: 404.
    let r = app
        .send_raw(
            "POST",
            &format!("/t/{}/mcp/io.example/none", app.tenant),
            Some(&client(&app)),
            Some(init.as_bytes()),
            &[],
        )
        .await;
    assert_eq!(r.status, 404);
}

/// Runs a real SDK client (`cmd`, which takes the calls then the URL, or
/// the URL then the calls for Python) against the guard endpoint served on
/// a real port; its JSON output.
async fn real_client(cmd: Vec<String>, token: &str) -> Value {
    let out = tokio::time::timeout(
        Duration::from_secs(90),
        tokio::process::Command::new(&cmd[0])
            .args(&cmd[1..])
            .env("PINFOLD_TOKEN", token)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the client finishes")
    .expect("the client runs");
    assert!(
        out.status.success(),
        "{:?}: {}",
        cmd,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stdout)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_and_python_sdk_clients_list_and_call_through_the_guard() {
    let peers = super::mcp_peers::peers();
    let python = super::guard_stdio::python_sdk();
    if peers.is_none() && python.is_none() {
        return;
    }
    let app = TestApp::new().await;
    publish(&app).await;
    let up = upstream(Switches {
        flip_destructive: true,
        ..Switches::default()
    })
    .await;
    route(
        &app,
        json!({"upstream": {"url": up.url()}, "mode": "strict"}),
    )
    .await;
    let base = serve_local(app.router.clone()).await;
    let url = format!("{base}{}", endpoint(&app));
    let calls = json!([
        {"name": "manage_files", "arguments": {"action": "read", "path": "/notes.txt"}},
        {"name": "list_files", "arguments": {"dir": "/"}},
    ])
    .to_string();
    let mut clients = Vec::new();
    if let Some(dir) = &peers {
        clients.push((
            "typescript",
            vec![
                "node".to_owned(),
                dir.join("sdk-guarded.mjs").display().to_string(),
                calls.clone(),
                url.clone(),
            ],
        ));
    }
    if let Some(py) = &python {
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../examples/mcp-peers/py-http-guarded.py");
        clients.push((
            "python",
            vec![
                py.clone(),
                script.display().to_string(),
                url.clone(),
                calls.clone(),
            ],
        ));
    }
    for (which, cmd) in clients {
        let before = up.tool_calls("manage_files");
        let out = real_client(cmd, &client(&app)).await;
        let names: BTreeSet<String> = out["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            names,
            set(&["manage_files", "manage_files_dynamic"]),
            "{which}: {out}"
        );
        let read = &out["calls"][0];
        assert!(read.get("result").is_some(), "{which}: {read}");
        assert_eq!(up.tool_calls("manage_files"), before + 1, "{which}");
        let refused = &out["calls"][1];
        assert_eq!(refused["error"]["code"], -32010, "{which}: {refused}");
        assert_eq!(up.tool_calls("list_files"), 0, "{which}");
    }
}

#[tokio::test]
async fn a_sessionless_client_discovers_lists_and_calls_and_its_headers_must_match_the_body() {
    let app = TestApp::new().await;
    publish(&app).await;
    let up = upstream(Switches::default()).await;
    route(
        &app,
        json!({"upstream": {"url": up.url()}, "mode": "strict"}),
    )
    .await;
    let path = endpoint(&app);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    });
    let carl = client(&app);
    let send = |method: &'static str, name: Option<&'static str>, params: Value| {
        modern(&app, &path, Some(&carl), json!(7), method, name, params)
    };
    let r = send("server/discover", None, json!({"_meta": meta})).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    let d = answer(&r, &json!(7));
    assert!(
        d["result"]["supportedVersions"]
            .as_array()
            .is_some_and(|v| v.contains(&json!("2026-07-28"))),
        "{d}"
    );
    let r = send("tools/list", None, json!({"_meta": meta})).await;
    let l = answer(&r, &json!(7));
    assert_eq!(l["result"]["cacheScope"], "private", "{l}");
    assert_eq!(l["result"]["tools"].as_array().unwrap().len(), 3, "{l}");
    let r = send(
        "tools/call",
        Some("list_files"),
        json!({"name": "list_files", "arguments": {"dir": "/"}, "_meta": meta}),
    )
    .await;
    let c = answer(&r, &json!(7));
    assert!(c.get("result").is_some(), "{c}");
    assert_eq!(up.tool_calls("list_files"), 1);
    // The name header says one tool, the body another: refused, nothing
    // upstream.
    let r = send(
        "tools/call",
        Some("manage_files"),
        json!({"name": "list_files", "arguments": {"dir": "/"}, "_meta": meta}),
    )
    .await;
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(up.tool_calls("list_files"), 1);
}

/// A loopback listener that accepts connections and answers each request
/// with `reply` (raw HTTP), or never when `None`.
async fn fake_upstream(reply: Option<&'static str>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let _ = sock.read(&mut buf).await;
                match reply {
                    Some(r) => {
                        let _ = sock.write_all(r.as_bytes()).await;
                    }
                    None => tokio::time::sleep(Duration::from_secs(3600)).await,
                }
            });
        }
    });
    format!("http://{addr}/mcp")
}

#[tokio::test]
async fn upstream_down_hanging_or_answering_garbage_is_a_json_rpc_error_in_time() {
    let garbage = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 9\r\nconnection: close\r\n\r\nnot json!";
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        drop(l);
        format!("http://{a}/mcp")
    };
    for (what, url) in [
        ("down", closed),
        ("hanging", fake_upstream(None).await),
        ("garbage", fake_upstream(Some(garbage)).await),
    ] {
        let app = TestApp::build(test_issuers(), |c| {
            c.resolve.upstream_timeout_ms = 1_500;
        })
        .await;
        publish(&app).await;
        route(&app, json!({"upstream": {"url": url}, "mode": "strict"})).await;
        let started = std::time::Instant::now();
        let m = Mcp {
            app: &app,
            token: client(&app),
            session: None,
            next: 0,
        };
        let r = m
            .post(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}}),
            )
            .await;
        let took = started.elapsed();
        assert_eq!(
            r.status,
            200,
            "{what}: {}",
            String::from_utf8_lossy(&r.bytes)
        );
        let a = answer(&r, &json!(0));
        assert_eq!(a["error"]["code"], -32012, "{what}: {a}");
        assert!(
            took < Duration::from_secs(5),
            "{what}: answered in {took:?}"
        );
        assert!(r.header("mcp-session-id").is_none(), "{what}");
    }
}

#[tokio::test]
async fn a_session_continues_on_a_second_replica_after_the_first_stops_and_oversize_bodies_are_refused()
 {
    let a = TestApp::new().await;
    publish(&a).await;
    let up = upstream(Switches::default()).await;
    route(&a, json!({"upstream": {"url": up.url()}, "mode": "strict"})).await;
    let m = Mcp::open(&a, client(&a)).await;
    let sid = m.session.clone().unwrap();
    // Another replica: its own caches, no route built, nothing of the
    // session but what its id carries.
    let b = a.replica().await;
    drop(m);
    // The first replica is stopped: what the session needs can only come
    // from its id and the database.
    let _db = a.stop().await;
    let mut m = Mcp {
        app: &b,
        token: client(&b),
        session: Some(sid),
        next: 10,
    };
    assert_eq!(m.tools().await, set(ALL));
    let r = m.call("list_files", json!({"dir": "/"})).await;
    assert!(r.get("result").is_some(), "{r}");
    assert_eq!(up.tool_calls("list_files"), 1);

    let big = vec![b' '; 3 * 1024 * 1024];
    let r = b
        .send_raw("POST", &endpoint(&b), Some(&client(&b)), Some(&big), &[])
        .await;
    assert_eq!(r.status, 413);
}

/// The MCP Inspector's CLI (`examples/inspector`, npm
/// `@modelcontextprotocol/inspector`) and a node it runs on (>= 22.19:
/// `target/node22`, which `.ci/run` installs, else `node` on `PATH`).
/// `None` (after saying why) without them, unless
/// `PINFOLD_REQUIRE_INSPECTOR` is set (CI).
fn inspector() -> Option<(String, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cli =
        root.join("examples/inspector/node_modules/@modelcontextprotocol/inspector/package.json");
    let node22 = root.join("target/node22/node_modules/.bin/node");
    let node = if node22.is_file() {
        node22.display().to_string()
    } else {
        "node".to_owned()
    };
    let recent = std::process::Command::new(&node)
        .args(["-e", "const [a,b]=process.versions.node.split('.').map(Number); process.exit(a>22||(a===22&&b>=19)?0:1)"])
        .status()
        .is_ok_and(|s| s.success());
    if !cli.is_file() || !recent {
        assert!(
            std::env::var_os("PINFOLD_REQUIRE_INSPECTOR").is_none(),
            "the Inspector needs `npm ci --prefix examples/inspector` and node >= 22.19"
        );
        eprintln!(
            "skipped: the MCP Inspector needs `npm ci --prefix examples/inspector` and node >= 22.19 (target/node22)"
        );
        return None;
    }
    let bin = root.join("examples/inspector/node_modules/@modelcontextprotocol/inspector");
    let pkg: Value = serde_json::from_slice(&std::fs::read(&cli).unwrap()).unwrap();
    let entry = match &pkg["bin"] {
        Value::String(s) => s.clone(),
        Value::Object(m) => m
            .get("mcp-inspector")
            .or_else(|| m.values().next())
            .and_then(Value::as_str)
            .unwrap()
            .to_owned(),
        _ => panic!("the Inspector's package.json names no bin"),
    };
    Some((node, bin.join(entry).display().to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_inspector_cli_lists_and_calls_through_the_guard() {
    let Some((node, inspector)) = inspector() else {
        return;
    };
    let app = TestApp::new().await;
    publish(&app).await;
    let up = upstream(Switches {
        flip_destructive: true,
        ..Switches::default()
    })
    .await;
    route(
        &app,
        json!({"upstream": {"url": up.url()}, "mode": "strict"}),
    )
    .await;
    let base = serve_local(app.router.clone()).await;
    let url = format!("{base}{}", endpoint(&app));
    let auth = format!("Authorization: Bearer {}", client(&app));
    let home = tempfile::tempdir().unwrap();
    let run = |args: Vec<String>| {
        let (node, inspector, url, auth) =
            (node.clone(), inspector.clone(), url.clone(), auth.clone());
        let home = home.path().to_path_buf();
        async move {
            let out = tokio::time::timeout(
                Duration::from_secs(120),
                tokio::process::Command::new(&node)
                    .arg(&inspector)
                    .args(["--cli", &url, "--transport", "http", "--header", &auth])
                    .args(&args)
                    .env("HOME", &home)
                    .stdin(std::process::Stdio::null())
                    .kill_on_drop(true)
                    .output(),
            )
            .await
            .expect("the Inspector finishes")
            .expect("node runs the Inspector");
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        }
    };
    let (code, stdout, stderr) = run(vec!["--method".into(), "tools/list".into()]).await;
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let listed: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|_| panic!("tools/list output: {stdout}"));
    let names: BTreeSet<String> = listed["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        set(&["manage_files", "manage_files_dynamic"]),
        "{listed}"
    );

    let (code, stdout, stderr) = run([
        "--method",
        "tools/call",
        "--tool-name",
        "manage_files",
        "--tool-arg",
        "action=read",
        "path=/notes.txt",
    ]
    .map(String::from)
    .to_vec())
    .await;
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("manage_files"), "{stdout}");
    assert_eq!(up.tool_calls("manage_files"), 1);

    // The withheld tool: the Inspector checks the list it was shown before
    // it calls, so it does not find the tool there, and nothing reaches
    // the upstream.
    let (code, stdout, stderr) = run([
        "--method",
        "tools/call",
        "--tool-name",
        "list_files",
        "--tool-arg",
        "dir=/",
    ]
    .map(String::from)
    .to_vec())
    .await;
    assert_ne!(code, Some(0), "{stdout}\n{stderr}");
    let refused: Value = serde_json::from_str(stderr.trim())
        .unwrap_or_else(|_| panic!("tools/call output: {stdout}\n{stderr}"));
    assert_eq!(refused["error"]["code"], "tool_not_found", "{refused}");
    assert_eq!(up.tool_calls("list_files"), 0);
}

#[tokio::test]
async fn a_clients_own_resolution_is_checked_and_outside_the_signature_is_the_worst_case() {
    let app = TestApp::new().await;
    publish(&app).await;
    let up = upstream(Switches::default()).await;
    route(
        &app,
        json!({"upstream": {"url": up.url()}, "mode": "strict"}),
    )
    .await;
    let mut m = Mcp::open(&app, client(&app)).await;
    let read = json!({"name": "manage_files", "arguments": {"action": "read", "path": "/n.txt"}});
    let r = m.rpc("tools/resolve", read.clone()).await;
    assert_eq!(
        r["result"]["tool"]["annotations"]["readOnlyHint"], true,
        "{r}"
    );
    // The upstream now claims an annotation the signature never declares:
    // the client is served the worst case instead.
    up.update(|s| s.undeclared = true);
    let r = m.rpc("tools/resolve", read).await;
    let a = &r["result"]["tool"]["annotations"];
    assert_eq!(a["readOnlyHint"], false, "{r}");
    assert_eq!(a["destructiveHint"], true, "{r}");
    assert_eq!(a["openWorldHint"], false, "{r}");
    // A tool that is not shown is refused before the upstream.
    let r = m
        .rpc(
            "tools/resolve",
            json!({"name": "purge_files", "arguments": {}}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32010, "{r}");
}

/// A message whose caller is already authenticated is handed to the
/// endpoint before routing; the answer is the router's all the same:
/// status, headers (but the request id and date) and body, for a served
/// list, a forwarded call, a refused call and another tenant's token.
#[tokio::test]
async fn the_fast_path_and_the_router_answer_a_message_alike() {
    let app = TestApp::new().await;
    let Sessionless {
        up,
        path,
        routed_path,
        meta,
        carl,
        stranger,
    } = sessionless(&app).await;
    let fast = || app.router.guard_fast_answers();
    let send = |path: String, token: String, method: &'static str, params: Value| {
        let app = &app;
        async move {
            let name = params["name"].as_str().map(str::to_owned);
            modern(
                app,
                &path,
                Some(&token),
                json!("a-1"),
                method,
                name.as_deref(),
                params,
            )
            .await
        }
    };
    let headers = |r: &Resp| {
        let mut h: Vec<(String, String)> = r
            .headers
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "date" | "x-request-id"))
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
            .collect();
        h.sort();
        h
    };
    // Unverified tokens are the router's; once verified, the fast path's.
    let before = fast();
    let first = send(
        path.clone(),
        carl.clone(),
        "tools/list",
        json!({"_meta": meta}),
    )
    .await;
    assert_eq!(
        first.status,
        200,
        "{}",
        String::from_utf8_lossy(&first.bytes)
    );
    let _ = send(
        path.clone(),
        stranger.clone(),
        "tools/list",
        json!({"_meta": meta}),
    )
    .await;
    assert_eq!(fast(), before, "tokens not yet verified take the router");

    let list = json!({"_meta": meta});
    let call = json!({"name": "list_files", "arguments": {"dir": "/"}, "_meta": meta});
    let refused = json!({"name": "delete_everything", "arguments": {}, "_meta": meta});
    let cases: [(&str, &str, &Value, u16); 4] = [
        ("tools/list", carl.as_str(), &list, 200),
        ("tools/call", carl.as_str(), &call, 200),
        ("tools/call", carl.as_str(), &refused, 200),
        ("tools/list", stranger.as_str(), &list, 404),
    ];
    for (method, token, params, status) in cases {
        let at = fast();
        let quick = send(path.clone(), token.to_owned(), method, params.clone()).await;
        assert_eq!(fast(), at + 1, "{method}: the fast path took it");
        let routed = send(
            routed_path.clone(),
            token.to_owned(),
            method,
            params.clone(),
        )
        .await;
        assert_eq!(fast(), at + 1, "{method}: the router took it");
        assert_eq!(
            quick.status.as_u16(),
            status,
            "{method}: {}",
            String::from_utf8_lossy(&quick.bytes)
        );
        assert_eq!(quick.status, routed.status, "{method}");
        assert_eq!(headers(&quick), headers(&routed), "{method}");
        assert_eq!(quick.header("x-request-id").map(|v| v.len()), Some(36));
        if status == 200 {
            assert_eq!(quick.bytes, routed.bytes, "{method}");
        } else {
            // A problem names its own request id; the rest is the same.
            let strip = |r: &Resp| {
                let mut v = r.json();
                v.as_object_mut().unwrap().remove("request_id");
                v
            };
            assert_eq!(strip(&quick), strip(&routed), "{method}");
        }
    }
    // The forwarded call reached the upstream once each way; the refused
    // one never.
    assert_eq!(up.tool_calls("list_files"), 2);
    assert_eq!(up.tool_calls("delete_everything"), 0);
    // The request metrics count the fast path's answers under the
    // endpoint's template, as the router's: the stranger's three 404s.
    let metrics = app.send("GET", "/metrics", None, None).await;
    let text = String::from_utf8_lossy(&metrics.bytes);
    let want = r#"pinfold_http_requests_total{route="/t/{tenant}/mcp/{*server}",method="POST",status="404"} 3"#;
    assert!(text.lines().any(|l| l == want), "{text}");
}

/// Messages to the endpoint are charged to a rate-limit class of their own
/// (`guard`), on the fast path and the router's alike: past its burst a
/// message answers 429 with `Retry-After` and never reaches the upstream,
/// callers refused before admission (no token, another tenant's) take
/// nothing from the tenant's bucket, and the API's `reads` keep their own
/// tokens.
#[tokio::test]
async fn guard_messages_have_a_rate_limit_class_of_their_own() {
    let app = TestApp::build(test_issuers(), |c| {
        c.rate_limits.enabled = true;
        c.rate_limits.guard = pinfold_server::config::ClassLimits {
            tenant_rate: 1.0,
            tenant_burst: 3,
            principal_rate: 1.0,
            principal_burst: 100,
        };
    })
    .await;
    let limiter = app.rate_limiter.clone().expect("limits are on");
    let Sessionless {
        up,
        path,
        routed_path,
        meta,
        carl,
        stranger,
    } = sessionless(&app).await;
    let list = json!({"_meta": meta});
    let call = json!({"name": "list_files", "arguments": {"dir": "/"}, "_meta": meta});
    // Refused before admission: no token (401), another tenant's (404).
    // Neither is charged to the tenant.
    for _ in 0..3 {
        let r = modern(
            &app,
            &path,
            None,
            json!(1),
            "tools/list",
            None,
            list.clone(),
        )
        .await;
        assert_eq!(r.status, 401);
        let r = modern(
            &app,
            &path,
            Some(&stranger),
            json!(1),
            "tools/list",
            None,
            list.clone(),
        )
        .await;
        assert_eq!(r.status, 404);
    }
    // Three messages fit the burst: the first through the router (the
    // token is not yet verified), the others on the fast path.
    let fast = app.router.guard_fast_answers();
    for _ in 0..2 {
        let r = modern(
            &app,
            &path,
            Some(&carl),
            json!(1),
            "tools/list",
            None,
            list.clone(),
        )
        .await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    }
    let r = modern(
        &app,
        &path,
        Some(&carl),
        json!(2),
        "tools/call",
        Some("list_files"),
        call.clone(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    assert!(answer(&r, &json!(2)).get("result").is_some());
    assert_eq!(up.tool_calls("list_files"), 1);
    assert_eq!(app.router.guard_fast_answers(), fast + 2);
    // Past it, on either path: 429, the problem names the class, and the
    // call never reaches the upstream.
    for p in [&path, &routed_path] {
        let r = modern(
            &app,
            p,
            Some(&carl),
            json!(3),
            "tools/call",
            Some("list_files"),
            call.clone(),
        )
        .await;
        assert_eq!(r.header("retry-after").as_deref(), Some("1"), "{p}");
        let body = r.problem(429, "rate_limited");
        assert_eq!(body["class"], "guard", "{body}");
        assert_eq!(body["scope"], "tenant", "{body}");
    }
    assert_eq!(app.router.guard_fast_answers(), fast + 3);
    assert_eq!(up.tool_calls("list_files"), 1);
    // The API's reads are the tenant's still.
    let servers = format!("/v1/tenants/{}/servers", app.tenant);
    assert_eq!(app.get(&servers, &app.admin()).await.status, 200);
    // A second later the bucket holds one token again: one call goes
    // through, the next is refused.
    limiter.clock().advance(Duration::from_secs(1));
    let r = modern(
        &app,
        &path,
        Some(&carl),
        json!(4),
        "tools/call",
        Some("list_files"),
        call.clone(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(up.tool_calls("list_files"), 2);
    let r = modern(
        &app,
        &path,
        Some(&carl),
        json!(5),
        "tools/list",
        None,
        list.clone(),
    )
    .await;
    assert_eq!(r.status, 429);
    // A session's stream and its end are charged too, before the session
    // is looked at (it would be 404: no such session).
    for method in ["GET", "DELETE"] {
        let r = app
            .send_raw(
                method,
                &path,
                Some(&carl),
                None,
                &[("mcp-session-id", "s-1")],
            )
            .await;
        assert_eq!(r.problem(429, "rate_limited")["class"], "guard", "{method}");
    }
    let metrics = app.send("GET", "/metrics", None, None).await;
    let text = String::from_utf8_lossy(&metrics.bytes);
    assert!(
        text.contains("pinfold_rate_limited_total{class=\"guard\",scope=\"tenant\"} 5"),
        "{text}"
    );
}
