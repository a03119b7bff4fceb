//! The subregistry: the official MCP registry's `/v0.1` read API over a
//! tenant's approved versions, on both databases. Every `/v0.1` answer of
//! these tests is validated against the official response schemas and
//! every `server` against the official `server.json` schema (2025-12-11)
//! when the real data is present.

use std::collections::{BTreeSet, HashMap};

use pinfold_core::ids::TenantId;
use pinfold_tests::*;
use serde_json::{Value, json};

const SERVER: &str = "io.github.acme/files";

fn enc(server: &str) -> String {
    server.replace('/', "%2F")
}

fn v01(app: &TestApp, rest: &str) -> String {
    format!("/t/{}/v0.1{rest}", app.tenant)
}

fn vpath(app: &TestApp, server: &str, version: &str) -> String {
    format!(
        "/v1/tenants/{}/servers/{}/versions/{version}",
        app.tenant,
        enc(server)
    )
}

fn card(server: &str, version: &str) -> Value {
    json!({
        "name": server,
        "version": version,
        "title": "Acme Files",
        "description": "Files in an Acme workspace",
        "websiteUrl": "https://acme.example/files",
        "remotes": [{"type": "streamable-http", "url": "https://mcp.acme.example/files"}],
        "signature": {
            "tools": [
                {"name": "read_file", "description": "Read a file",
                 "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
                 "annotations": {"readOnlyHint": true, "openWorldHint": false}},
                {"name": "manage_file", "description": "Copy or delete",
                 "inputSchema": {"type": "object", "properties": {"action": {"enum": ["copy", "delete"]}}},
                 "annotations": [{"readOnlyHint": false, "destructiveHint": false, "openWorldHint": false},
                                 {"readOnlyHint": false, "destructiveHint": true, "openWorldHint": false}]}
            ],
            "prompts": [], "resources": [], "resourceTemplates": []
        }
    })
}

fn publisher(app: &TestApp) -> String {
    app.as_roles("paula-publisher", &["publisher"])
}

fn reader(app: &TestApp) -> String {
    app.as_roles("rob-reader", &["reader"])
}

async fn publish(app: &TestApp, doc: &Value) {
    let server = doc["name"].as_str().unwrap();
    let version = doc["version"].as_str().unwrap();
    let r = app
        .send(
            "PUT",
            &vpath(app, server, version),
            Some(&publisher(app)),
            Some(doc.clone()),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
}

async fn review(app: &TestApp, server: &str, version: &str, decision: &str) {
    let r = app
        .send(
            "POST",
            &format!("{}/review", vpath(app, server, version)),
            Some(&app.as_roles("rick-reviewer", &["reviewer"])),
            Some(json!({"decision": decision, "note": "checked"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
}

async fn set_status(app: &TestApp, server: &str, version: &str, status: &str, reason: &str) {
    let r = app
        .send(
            "POST",
            &format!("{}/status", vpath(app, server, version)),
            Some(&app.admin()),
            Some(json!({"status": status, "reason": reason})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
}

async fn put_policy(app: &TestApp, policy: Value) {
    let r = app
        .send(
            "PUT",
            &format!("/v1/tenants/{}/policy", app.tenant),
            Some(&app.admin()),
            Some(policy),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
}

// ---------------------------------------------------------------- official schemas

/// Validators for the official response shapes, built from the real data
/// (`None`, with a notice, when it is absent).
struct Official {
    list: jsonschema::Validator,
    one: jsonschema::Validator,
    not_found: jsonschema::Validator,
    server: jsonschema::Validator,
}

fn load(path: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

impl Official {
    fn load() -> Option<Official> {
        let realdata = realdata()?;
        let responses = load(&realdata.join("registry/api/v0.1-responses.schema.json"));
        let server = load(&realdata.join("registry/schemas/2025-12-11__server.schema.json"));
        // One validator per definition: the definitions document with a
        // root `$ref` to it (every `$ref` inside stays local).
        let def = |name: &str| {
            let mut doc = responses.clone();
            doc.as_object_mut()
                .unwrap()
                .insert("$ref".into(), json!(format!("#/$defs/{name}")));
            jsonschema::options()
                .should_validate_formats(true)
                .build(&doc)
                .unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        Some(Official {
            list: def("ServerList"),
            one: def("ServerResponse"),
            not_found: def("NotFound"),
            server: jsonschema::options()
                .should_validate_formats(true)
                .build(&server)
                .expect("server.json schema"),
        })
    }

    fn check(v: &jsonschema::Validator, what: &str, doc: &Value) {
        let errors: Vec<String> = v
            .iter_errors(doc)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{what} violates the official schema: {errors:?}\n{doc}"
        );
    }

    fn check_entry(&self, entry: &Value) {
        Self::check(&self.one, "ServerResponse", entry);
        Self::check(&self.server, "server", &entry["server"]);
    }
}

/// Checks any `/v0.1` answer: its shape by status, then the official
/// schemas (when the real data is present).
fn check(official: &Option<Official>, r: &Resp) -> Value {
    if r.status == 304 {
        assert!(r.bytes.is_empty());
        return Value::Null;
    }
    let body = r.json();
    match r.status.as_u16() {
        200 => {
            assert_eq!(
                r.header("content-type").as_deref(),
                Some("application/json")
            );
            assert_eq!(
                r.header("cache-control").as_deref(),
                Some("private, no-cache")
            );
            assert_eq!(r.header("vary").as_deref(), Some("Authorization"));
            assert!(r.header("etag").is_some());
            if let Some(o) = official {
                if body.get("servers").is_some() {
                    Official::check(&o.list, "ServerList", &body);
                    for entry in body["servers"].as_array().unwrap() {
                        o.check_entry(entry);
                    }
                } else {
                    o.check_entry(&body);
                }
            }
            // The official key allows no member of Pinfold's.
            let entries = match body.get("servers") {
                Some(s) => s.as_array().unwrap().clone(),
                None => vec![body.clone()],
            };
            for e in entries {
                let official = e["_meta"]["io.modelcontextprotocol.registry/official"]
                    .as_object()
                    .unwrap();
                for k in official.keys() {
                    assert!(
                        [
                            "status",
                            "statusMessage",
                            "statusChangedAt",
                            "publishedAt",
                            "updatedAt",
                            "isLatest"
                        ]
                        .contains(&k.as_str()),
                        "{k} in the official _meta"
                    );
                }
                assert!(e["server"].get("signature").is_none());
            }
        }
        404 => {
            assert_eq!(
                r.header("content-type").as_deref(),
                Some("application/json")
            );
            assert_eq!(
                body.as_object().unwrap().keys().collect::<Vec<_>>(),
                ["error"]
            );
            if let Some(o) = official {
                Official::check(&o.not_found, "NotFound", &body);
            }
        }
        _ => {}
    }
    body
}

/// `GET` as a reader, checked.
async fn read(app: &TestApp, official: &Option<Official>, path: &str) -> (Resp, Value) {
    let r = app.get(path, &reader(app)).await;
    let body = check(official, &r);
    (r, body)
}

fn names_versions(list: &Value) -> Vec<(String, String)> {
    list["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["server"]["name"].as_str().unwrap().to_owned(),
                e["server"]["version"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Walks every page of `query` with `limit`; returns the entries in order.
async fn walk(app: &TestApp, official: &Option<Official>, query: &str, limit: u32) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let mut path = v01(app, &format!("/servers?limit={limit}"));
        if !query.is_empty() {
            path.push('&');
            path.push_str(query);
        }
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let (r, body) = read(app, official, &path).await;
        assert_eq!(r.status, 200, "{path}: {body}");
        let servers = body["servers"].as_array().unwrap();
        assert_eq!(body["metadata"]["count"], servers.len(), "{path}");
        assert!(servers.len() <= limit as usize);
        out.extend(servers.iter().cloned());
        match body["metadata"]["nextCursor"].as_str() {
            Some(c) => {
                assert_eq!(
                    servers.len(),
                    limit as usize,
                    "only a full page has a next one"
                );
                cursor = Some(c.to_owned());
            }
            None => return out,
        }
    }
    panic!("pagination does not end");
}

/// `GET` with `If-None-Match: tag`.
async fn conditional(app: &TestApp, path: &str, token: &str, tag: &str) -> Resp {
    app.send_raw("GET", path, Some(token), None, &[("if-none-match", tag)])
        .await
}

// ---------------------------------------------------------------- tests

#[tokio::test]
async fn pagination_walks_every_one_of_250_servers_exactly_once() {
    let official = Official::load();
    let app = TestApp::new().await;
    put_policy(
        &app,
        json!({"enforcement_mode": "strict", "approval_required": false}),
    )
    .await;
    let mut expected = Vec::new();
    for i in 0..250 {
        let name = format!("io.example.fleet/srv-{i:03}");
        publish(&app, &card(&name, "1.0.0")).await;
        expected.push((name.clone(), "1.0.0".to_owned()));
        // Every tenth server has a second version (a pre-release: below
        // 1.0.0 by semver, after it in byte order), so that pages split
        // between the versions of a server.
        if i % 10 == 0 {
            publish(&app, &card(&name, "1.0.0-beta")).await;
            expected.push((name, "1.0.0-beta".to_owned()));
        }
    }
    // A pending version never shows.
    put_policy(
        &app,
        json!({"enforcement_mode": "strict", "approval_required": true}),
    )
    .await;
    publish(&app, &card("io.example.fleet/srv-007", "2.0.0")).await;
    expected.sort();

    let mut walks = Vec::new();
    for limit in [30, 100, 7] {
        let entries = walk(&app, &official, "", limit).await;
        let got: Vec<(String, String)> = entries
            .iter()
            .map(|e| {
                (
                    e["server"]["name"].as_str().unwrap().to_owned(),
                    e["server"]["version"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(got.len(), 275, "limit {limit}");
        assert_eq!(
            got.iter().collect::<BTreeSet<_>>().len(),
            got.len(),
            "limit {limit}: an entry came twice"
        );
        assert_eq!(
            got, expected,
            "limit {limit}: ordered by name, then version"
        );
        for e in &entries {
            let latest = e["_meta"]["io.modelcontextprotocol.registry/official"]["isLatest"]
                .as_bool()
                .unwrap();
            assert_eq!(latest, e["server"]["version"] == "1.0.0", "{e}");
        }
        walks.push(got);
    }
    assert_eq!(walks[0], walks[1]);

    // version=latest: one entry per server, each the latest.
    let latest = walk(&app, &official, "version=latest", 30).await;
    assert_eq!(latest.len(), 250);
    let servers: Vec<&str> = latest
        .iter()
        .map(|e| e["server"]["name"].as_str().unwrap())
        .collect();
    let mut sorted = servers.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(servers, sorted, "one entry per server, in order");
    assert!(latest.iter().all(|e| e["server"]["version"] == "1.0.0"
        && e["_meta"]["io.modelcontextprotocol.registry/official"]["isLatest"] == true));

    // An exact version, across servers.
    let beta = walk(&app, &official, "version=1.0.0-beta", 10).await;
    assert_eq!(beta.len(), 25);
    assert!(beta.iter().all(|e| e["server"]["version"] == "1.0.0-beta"));

    // search: a case-insensitive substring of the name.
    let hits = walk(&app, &official, "search=SRV-12", 100).await;
    let names: BTreeSet<&str> = hits
        .iter()
        .map(|e| e["server"]["name"].as_str().unwrap())
        .collect();
    let want: BTreeSet<String> = (120..130)
        .map(|i| format!("io.example.fleet/srv-{i}"))
        .collect();
    assert_eq!(
        names,
        want.iter().map(String::as_str).collect::<BTreeSet<_>>()
    );
    assert_eq!(hits.len(), 11, "srv-120 has two versions");
    let latest_hits = walk(&app, &official, "search=srv-12&version=latest", 4).await;
    assert_eq!(latest_hits.len(), 10);
    // `%` and `_` are literals, not wildcards.
    let (_, none) = read(&app, &official, &v01(&app, "/servers?search=srv_1%25")).await;
    assert_eq!(none["servers"], json!([]));
    assert_eq!(none["metadata"], json!({"count": 0}));
}

#[tokio::test]
async fn versions_statuses_and_pinfold_meta() {
    let official = Official::load();
    let app = TestApp::new().await;
    for v in ["1.0.0", "1.1.0", "1.2.0", "1.3.0", "2.0.0-rc.1"] {
        publish(&app, &card(SERVER, v)).await;
    }
    review(&app, SERVER, "1.0.0", "approve").await;
    review(&app, SERVER, "1.1.0", "approve").await;
    // Timestamps are milliseconds: `updated_since` below is strict.
    tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    review(&app, SERVER, "1.3.0", "reject").await;
    review(&app, SERVER, "2.0.0-rc.1", "approve").await;
    // 1.2.0 stays pending; a pending version revoked before any approval
    // never shows either.
    publish(&app, &card(SERVER, "0.1.0")).await;
    set_status(&app, SERVER, "0.1.0", "revoked", "never mind").await;
    let s = enc(SERVER);

    // The server's versions: approved ones only, newest first.
    let (r, list) = read(
        &app,
        &official,
        &v01(&app, &format!("/servers/{s}/versions")),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        names_versions(&list)
            .into_iter()
            .map(|(_, v)| v)
            .collect::<Vec<_>>(),
        ["2.0.0-rc.1", "1.1.0", "1.0.0"]
    );
    assert_eq!(list["metadata"]["count"], 3);
    let latest: Vec<bool> = list["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["_meta"]["io.modelcontextprotocol.registry/official"]["isLatest"] == true)
        .collect();
    assert_eq!(
        latest,
        [false, true, false],
        "a release wins over a pre-release"
    );

    // One version: the server.json part of the card, official metadata and
    // Pinfold's own.
    let (r, one) = read(
        &app,
        &official,
        &v01(&app, &format!("/servers/{s}/versions/1.1.0")),
    )
    .await;
    assert_eq!(r.status, 200);
    let mut server_json = card(SERVER, "1.1.0");
    server_json.as_object_mut().unwrap().remove("signature");
    assert_eq!(one["server"], server_json);
    let record = app
        .get(&vpath(&app, SERVER, "1.1.0"), &app.admin())
        .await
        .json();
    let meta = &one["_meta"]["io.modelcontextprotocol.registry/official"];
    assert_eq!(meta["status"], "active");
    assert_eq!(meta["isLatest"], true);
    assert_eq!(meta["publishedAt"], record["published_at"]);
    assert_eq!(meta["statusChangedAt"], record["status_changed_at"]);
    assert_eq!(meta["updatedAt"], record["status_changed_at"]);
    assert!(meta.get("statusMessage").is_none());
    let ours = &one["_meta"]["io.github.pinfold/pinfold"];
    assert_eq!(ours["digest"], record["digest"]);
    assert_eq!(ours["status"], "approved");
    assert_eq!(ours["mode"], "permissive", "the tenant's default mode");
    let tools = app
        .get(
            &format!("{}/tools", vpath(&app, SERVER, "1.1.0")),
            &app.admin(),
        )
        .await
        .json();
    assert_eq!(ours["tools"], tools["tools"], "the worst-case tools/list");
    assert_eq!(ours["tools"][1]["annotations"]["destructiveHint"], true);
    let attestation = ours["attestation"].as_str().unwrap();
    assert_eq!(
        attestation,
        format!("{}/attestation", vpath(&app, SERVER, "1.1.0"))
    );
    let r = app.get(attestation, &reader(&app)).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type").as_deref(), Some("application/jwt"));

    // `latest` is the registry's one rule (as /v1), here 1.1.0.
    let (_, latest) = read(
        &app,
        &official,
        &v01(&app, &format!("/servers/{s}/versions/latest")),
    )
    .await;
    assert_eq!(latest, one);
    let v1_latest = app
        .get(&vpath(&app, SERVER, "latest"), &app.admin())
        .await
        .json();
    assert_eq!(v1_latest["version"], "1.1.0");

    // Pending, rejected and never-approved versions are not found.
    for v in ["1.2.0", "1.3.0", "0.1.0", "9.9.9"] {
        let (r, body) = read(
            &app,
            &official,
            &v01(&app, &format!("/servers/{s}/versions/{v}")),
        )
        .await;
        assert_eq!(r.status, 404, "{v}");
        assert_eq!(body, json!({"error": "Server not found"}));
    }

    // A per-server mode override shows.
    put_policy(
        &app,
        json!({"enforcement_mode": "advisory", "approval_required": true,
            "overrides": {"servers": {"IO.GITHUB.ACME/FILES": {"enforcement_mode": "strict"}}}}),
    )
    .await;
    let (_, one) = read(
        &app,
        &official,
        &v01(&app, &format!("/servers/{s}/versions/1.0.0")),
    )
    .await;
    assert_eq!(one["_meta"]["io.github.pinfold/pinfold"]["mode"], "strict");

    // Deprecate 1.0.0, revoke 1.1.0: deprecated stays, deleted hides
    // unless asked for, and latest moves to the pre-release.
    set_status(&app, SERVER, "1.0.0", "deprecated", "use 2.x").await;
    set_status(&app, SERVER, "1.1.0", "revoked", &"bad remote ".repeat(60)).await;
    let (_, list) = read(
        &app,
        &official,
        &v01(&app, &format!("/servers/{s}/versions")),
    )
    .await;
    let statuses: Vec<(String, String, bool)> = list["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let m = &e["_meta"]["io.modelcontextprotocol.registry/official"];
            (
                e["server"]["version"].as_str().unwrap().to_owned(),
                m["status"].as_str().unwrap().to_owned(),
                m["isLatest"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("2.0.0-rc.1".into(), "active".into(), true),
            ("1.0.0".into(), "deprecated".into(), false)
        ]
    );
    let deprecated = &list["servers"][1]["_meta"];
    assert_eq!(
        deprecated["io.modelcontextprotocol.registry/official"]["statusMessage"],
        "use 2.x"
    );
    assert_eq!(
        deprecated["io.github.pinfold/pinfold"]["status"],
        "deprecated"
    );
    let (_, all) = read(
        &app,
        &official,
        &v01(&app, &format!("/servers/{s}/versions?include_deleted=true")),
    )
    .await;
    let deleted = &all["servers"][1];
    assert_eq!(deleted["server"]["version"], "1.1.0");
    let m = &deleted["_meta"]["io.modelcontextprotocol.registry/official"];
    assert_eq!(m["status"], "deleted");
    assert_eq!(
        m["statusMessage"].as_str().unwrap().chars().count(),
        500,
        "the reason, cut to the official 500 characters"
    );
    assert_eq!(
        deleted["_meta"]["io.github.pinfold/pinfold"]["status"],
        "revoked"
    );
    // The deleted version is still answered by its exact version.
    let (r, gone) = read(
        &app,
        &official,
        &v01(&app, &format!("/servers/{s}/versions/1.1.0")),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        gone["_meta"]["io.modelcontextprotocol.registry/official"]["status"],
        "deleted"
    );
    let (_, latest) = read(
        &app,
        &official,
        &v01(&app, &format!("/servers/{s}/versions/latest")),
    )
    .await;
    assert_eq!(latest["server"]["version"], "2.0.0-rc.1");

    // The server list agrees: include_deleted and updated_since.
    let (_, list) = read(&app, &official, &v01(&app, "/servers")).await;
    assert_eq!(
        names_versions(&list),
        [
            (SERVER.to_owned(), "1.0.0".to_owned()),
            (SERVER.to_owned(), "2.0.0-rc.1".to_owned())
        ]
    );
    let (_, list) = read(&app, &official, &v01(&app, "/servers?include_deleted=true")).await;
    assert_eq!(list["metadata"]["count"], 3);
    let since = record["status_changed_at"].as_str().unwrap(); // 1.1.0's approval
    let (_, changed) = read(
        &app,
        &official,
        &v01(&app, &format!("/servers?updated_since={since}")),
    )
    .await;
    // Changed strictly after 1.1.0's approval: 2.0.0-rc.1's approval,
    // 1.0.0's deprecation and 1.1.0's revocation (deleted ones included).
    let mut got: Vec<String> = names_versions(&changed)
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    got.sort();
    assert_eq!(got, ["1.0.0", "1.1.0", "2.0.0-rc.1"]);
    let future = "2999-01-01T00:00:00Z";
    let (_, none) = read(
        &app,
        &official,
        &v01(&app, &format!("/servers?updated_since={future}")),
    )
    .await;
    assert_eq!(none["servers"], json!([]));
    let (_, latest_only) = read(&app, &official, &v01(&app, "/servers?version=latest")).await;
    assert_eq!(
        names_versions(&latest_only),
        [(SERVER.to_owned(), "2.0.0-rc.1".to_owned())]
    );
    // version=latest with updated_since: the store only walks servers
    // with a status change after it, and the latest must itself be newer.
    let (_, latest_changed) = read(
        &app,
        &official,
        &v01(
            &app,
            &format!("/servers?version=latest&updated_since={since}"),
        ),
    )
    .await;
    assert_eq!(
        names_versions(&latest_changed),
        [(SERVER.to_owned(), "2.0.0-rc.1".to_owned())]
    );
    let (_, latest_none) = read(
        &app,
        &official,
        &v01(
            &app,
            &format!("/servers?version=latest&updated_since={future}"),
        ),
    )
    .await;
    assert_eq!(latest_none["servers"], json!([]));

    // Revoke everything that is visible: the server shows nothing.
    set_status(&app, SERVER, "1.0.0", "revoked", "gone").await;
    set_status(&app, SERVER, "2.0.0-rc.1", "revoked", "gone").await;
    let (r, body) = read(
        &app,
        &official,
        &v01(&app, &format!("/servers/{s}/versions")),
    )
    .await;
    assert_eq!(
        (r.status.as_u16(), body),
        (404, json!({"error": "Server not found"}))
    );
    let (r, _) = read(
        &app,
        &official,
        &v01(&app, &format!("/servers/{s}/versions/latest")),
    )
    .await;
    assert_eq!(r.status, 404);
    let (_, list) = read(&app, &official, &v01(&app, "/servers?version=latest")).await;
    assert_eq!(list["servers"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_versions_listing_shows_the_newest_1000() {
    let app = TestApp::new().await;
    put_policy(
        &app,
        json!({"enforcement_mode": "strict", "approval_required": false}),
    )
    .await;
    let cap = pinfold_registry::subregistry::listing::MAX_VERSIONS_LISTED;
    assert_eq!(cap, 1000);
    for i in 0..cap + 3 {
        publish(&app, &card(SERVER, &format!("1.0.{i}"))).await;
    }
    let s = enc(SERVER);
    let r = app
        .send(
            "GET",
            &v01(&app, &format!("/servers/{s}/versions")),
            Some(&reader(&app)),
            None,
        )
        .await;
    assert_eq!(r.status, 200);
    let list: Value = serde_json::from_slice(&r.bytes).unwrap();
    let versions: Vec<String> = names_versions(&list).into_iter().map(|(_, v)| v).collect();
    assert_eq!(versions.len(), cap);
    assert_eq!(versions[0], format!("1.0.{}", cap + 2));
    assert_eq!(versions[cap - 1], "1.0.3");
    // The oldest, no longer listed, is still readable by its number.
    let r = app
        .send(
            "GET",
            &v01(&app, &format!("/servers/{s}/versions/1.0.0")),
            Some(&reader(&app)),
            None,
        )
        .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn conditional_reads_answer_304_until_something_changes() {
    let official = Official::load();
    let app = TestApp::new().await;
    for v in ["1.0.0", "1.1.0"] {
        publish(&app, &card(SERVER, v)).await;
        review(&app, SERVER, v, "approve").await;
    }
    let s = enc(SERVER);
    let token = reader(&app);
    let paths = [
        v01(&app, "/servers"),
        v01(&app, &format!("/servers/{s}/versions")),
        v01(&app, &format!("/servers/{s}/versions/1.0.0")),
        v01(&app, &format!("/servers/{s}/versions/1.1.0")),
        v01(&app, &format!("/servers/{s}/versions/latest")),
    ];
    let mut tags = Vec::new();
    for path in &paths {
        let r = app.get(path, &token).await;
        check(&official, &r);
        assert_eq!(r.status, 200, "{path}");
        let tag = r.header("etag").unwrap();
        let again = app
            .send_raw("GET", path, Some(&token), None, &[("if-none-match", &tag)])
            .await;
        assert_eq!(again.status, 304, "{path}");
        assert!(again.bytes.is_empty());
        assert_eq!(again.header("etag").as_deref(), Some(tag.as_str()));
        assert_eq!(again.header("vary").as_deref(), Some("Authorization"));
        assert_eq!(
            again.header("cache-control").as_deref(),
            Some("private, no-cache")
        );
        tags.push(tag);
    }
    // The same version through `latest` and by number has one tag.
    assert_eq!(tags[3], tags[4]);
    // A mode change shows in every answer.
    put_policy(
        &app,
        json!({"enforcement_mode": "advisory", "approval_required": true}),
    )
    .await;
    for i in 0..paths.len() {
        let r = conditional(&app, &paths[i], &token, &tags[i]).await;
        assert_eq!(r.status, 200, "{}: the mode changed", paths[i]);
        check(&official, &r);
        tags[i] = r.header("etag").unwrap();
    }

    // Revoke 1.1.0: the lists change, 1.1.0 becomes deleted, latest moves
    // to 1.0.0 (whose isLatest flips), each with a new tag.
    set_status(&app, SERVER, "1.1.0", "revoked", "bad remote").await;
    for i in 0..paths.len() {
        let r = conditional(&app, &paths[i], &token, &tags[i]).await;
        assert_eq!(r.status, 200, "{} after the revocation", paths[i]);
        let body = check(&official, &r);
        assert_ne!(r.header("etag").unwrap(), tags[i]);
        match i {
            0 | 1 => assert_eq!(
                names_versions(&body),
                [(SERVER.to_owned(), "1.0.0".to_owned())],
                "the revoked version disappears"
            ),
            2 | 4 => {
                assert_eq!(body["server"]["version"], "1.0.0");
                assert_eq!(
                    body["_meta"]["io.modelcontextprotocol.registry/official"]["isLatest"],
                    true
                );
            }
            _ => assert_eq!(
                body["_meta"]["io.modelcontextprotocol.registry/official"]["status"],
                "deleted"
            ),
        }
        tags[i] = r.header("etag").unwrap();
    }
    // A revoked version's tag is answered after a database read.
    let r = conditional(&app, &paths[3], &token, &tags[3]).await;
    assert_eq!(r.status, 304);

    // A pending version is not found, whatever tag is sent.
    publish(&app, &card(SERVER, "3.0.0")).await;
    let pending = v01(&app, &format!("/servers/{s}/versions/3.0.0"));
    let r = app
        .send_raw(
            "GET",
            &pending,
            Some(&token),
            None,
            &[("if-none-match", "*")],
        )
        .await;
    assert_eq!(r.status, 404);
    check(&official, &r);
}

#[tokio::test]
async fn errors_are_official_404s_and_problems_otherwise() {
    let official = Official::load();
    let app = TestApp::new().await;
    publish(&app, &card(SERVER, "1.0.0")).await;
    review(&app, SERVER, "1.0.0", "approve").await;
    let s = enc(SERVER);
    let paths = [
        v01(&app, "/servers"),
        v01(&app, &format!("/servers/{s}/versions")),
        v01(&app, &format!("/servers/{s}/versions/1.0.0")),
    ];

    // Unknown and invalid names and versions.
    for path in [
        v01(&app, "/servers/io.github.acme%2Fnope/versions"),
        v01(&app, "/servers/io.github.acme%2Fnope/versions/1.0.0"),
        v01(&app, "/servers/not-a-name/versions"),
        v01(&app, &format!("/servers/{s}/versions/2.0.0")),
        v01(&app, &format!("/servers/{s}/versions/not-semver")),
    ] {
        let (r, body) = read(&app, &official, &path).await;
        assert_eq!(r.status, 404, "{path}");
        assert_eq!(body, json!({"error": "Server not found"}), "{path}");
        assert!(r.header("x-request-id").is_some());
    }

    // Another tenant's subregistry answers exactly as a missing one, to a
    // token holding every role that reads.
    let other = app.new_tenant().await;
    let intruder = app.as_roles("mallory", &["reader", "admin"]);
    for path in &paths {
        let theirs = path.replace(app.tenant.as_str(), other.as_str());
        let missing = path.replace(app.tenant.as_str(), "t-doesnotexist1");
        let own = app.get(path, &intruder).await;
        assert_eq!(own.status, 200, "control: {path} for its own tenant");
        let b = app.get(&theirs, &intruder).await;
        let c = app.get(&missing, &intruder).await;
        check(&official, &b);
        assert_eq!(b.status, 404, "{theirs}");
        assert_eq!(b.json(), json!({"error": "Not found"}));
        assert_eq!((b.status, b.json()), (c.status, c.json()), "{theirs}");
    }
    // Tenant B's token does not reach A either, though A's data exists; nor
    // does a platform token (no tenant), nor B's platform-and-reader token.
    let b_reader = token("bob", Some(other.as_str()), &["reader"]);
    let b_platform = token("bob", Some(other.as_str()), &["platform", "reader"]);
    for path in &paths {
        for t in [&b_reader, &app.platform(), &b_platform] {
            let r = app.get(path, t).await;
            assert_eq!(r.status, 404, "{path}");
            assert_eq!(r.json(), json!({"error": "Not found"}));
        }
    }

    // 401 and 403 stay problems.
    for path in &paths {
        let r = app.send("GET", path, None, None).await;
        r.problem(401, "unauthenticated");
        let r = app.get(path, &publisher(&app)).await;
        r.problem(403, "forbidden_role");
        let r = app
            .get(path, &app.as_roles("cleo", &["client", "reviewer"]))
            .await;
        r.problem(403, "forbidden_role");
        let r = app.get(path, &app.as_roles("pat", &["platform"])).await;
        r.problem(403, "forbidden_role");
        let r = app.get(path, &app.admin()).await;
        assert_eq!(r.status, 200, "{path} as admin");
    }

    // Bad query parameters: 400 problems naming the parameter.
    for (query, param) in [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=ten", "limit"),
        ("limit=-1", "limit"),
        ("cursor=bm9wZQ", "cursor"),
        ("cursor=%%%", "cursor"),
        ("updated_since=yesterday", "updated_since"),
        ("updated_since=2025-13-01T00:00:00Z", "updated_since"),
        ("include_deleted=yes", "include_deleted"),
        ("version=", "version"),
        ("updatedSince=2025-01-01T00:00:00Z", "updatedSince"),
        ("limit=10&limit=20", "limit"),
    ] {
        let path = format!("{}?{query}", paths[0]);
        let r = app.get(&path, &reader(&app)).await;
        let body = r.problem(400, "invalid_query");
        assert_eq!(body["errors"][0]["pointer"], format!("?{param}"), "{query}");
        assert!(
            body["detail"].as_str().unwrap().contains(param),
            "{query}: {body}"
        );
    }
    let long = "x".repeat(201);
    let r = app
        .get(&format!("{}?search={long}", paths[0]), &reader(&app))
        .await;
    r.problem(400, "invalid_query");
    let r = app
        .get(&format!("{}?include_deleted=1", paths[1]), &reader(&app))
        .await;
    r.problem(400, "invalid_query");
    let r = app
        .get(&format!("{}?limit=5", paths[1]), &reader(&app))
        .await;
    r.problem(400, "invalid_query");
    let r = app
        .get(&format!("{}?include_deleted=true", paths[2]), &reader(&app))
        .await;
    r.problem(400, "invalid_query");
    // An offset is accepted with %2B.
    let (r, _) = read(
        &app,
        &official,
        &format!("{}?updated_since=2020-01-01T02:00:00%2B02:00", paths[0]),
    )
    .await;
    assert_eq!(r.status, 200);
    let (_, first) = read(&app, &official, &format!("{}?limit=1", paths[0])).await;
    assert!(
        first["metadata"].get("nextCursor").is_none(),
        "one version only"
    );
}

#[tokio::test]
async fn real_server_json_documents_come_back_as_published() {
    let Some(realdata) = realdata() else { return };
    let official = Official::load();
    let app = TestApp::new().await;
    // Every example the official docs hold that validates against the
    // 2025-12-11 schema, the three valid example files and the current
    // seed entries. Some examples reuse a name and version with other
    // content: each goes to the first tenant where it is new.
    let index: Vec<Value> = serde_json::from_slice(
        &std::fs::read(realdata.join("registry/examples/_index.json")).unwrap(),
    )
    .unwrap();
    let mut docs: Vec<(String, Value)> = index
        .iter()
        .filter(|e| e["validation"]["2025-12-11"] == "valid")
        .map(|e| {
            let file = e["file"].as_str().unwrap();
            (
                file.to_owned(),
                load(&realdata.join("registry/examples").join(file)),
            )
        })
        .collect();
    for file in ["minimal.json", "with-package.json", "with-remote.json"] {
        docs.push((
            file.to_owned(),
            load(&realdata.join("registry/examples-dir/valid").join(file)),
        ));
    }
    let current: Vec<Value> = serde_json::from_slice(
        &std::fs::read(realdata.join("registry/seed/seed_current_29e32c39.json")).unwrap(),
    )
    .unwrap();
    for (i, d) in current.into_iter().enumerate() {
        docs.push((format!("seed_current[{i}]"), d));
    }
    assert!(docs.len() >= 39, "{} documents", docs.len());

    let mut tenants: Vec<(TenantId, BTreeSet<(String, String)>)> = Vec::new();
    let mut expected: HashMap<String, Vec<(String, String, Value)>> = HashMap::new();
    for (what, doc) in &docs {
        let key = (
            doc["name"].as_str().unwrap().to_ascii_lowercase(),
            doc["version"].as_str().unwrap().to_owned(),
        );
        let slot = match tenants.iter().position(|(_, seen)| !seen.contains(&key)) {
            Some(i) => i,
            None => {
                let t = if tenants.is_empty() {
                    app.tenant.clone()
                } else {
                    app.new_tenant().await
                };
                let r = app
                    .send(
                        "PUT",
                        &format!("/v1/tenants/{t}/policy"),
                        Some(&token("alice", Some(t.as_str()), &["admin"])),
                        Some(json!({"enforcement_mode": "strict", "approval_required": false})),
                    )
                    .await;
                assert_eq!(r.status, 200);
                tenants.push((t, BTreeSet::new()));
                tenants.len() - 1
            }
        };
        let (tenant, seen) = &mut tenants[slot];
        seen.insert(key);
        let r = app
            .send(
                "POST",
                &format!("/v1/tenants/{tenant}/import/server-json"),
                Some(&token("ivan", Some(tenant.as_str()), &["publisher"])),
                Some(doc.clone()),
            )
            .await;
        assert_eq!(
            r.status,
            201,
            "{what}: {}",
            String::from_utf8_lossy(&r.bytes)
        );
        let mut server = doc.clone();
        // The import keeps every member but `$schema`.
        server.as_object_mut().unwrap().remove("$schema");
        expected.entry(tenant.to_string()).or_default().push((
            doc["name"].as_str().unwrap().to_owned(),
            doc["version"].as_str().unwrap().to_owned(),
            server,
        ));
    }
    println!(
        "{} real server.json documents over {} tenants",
        docs.len(),
        tenants.len()
    );
    let mut shown = 0;
    for (tenant, _) in &tenants {
        let reader = token("rita", Some(tenant.as_str()), &["reader"]);
        let r = app
            .get(&format!("/t/{tenant}/v0.1/servers?limit=100"), &reader)
            .await;
        let body = check(&official, &r);
        assert_eq!(r.status, 200);
        let mut want = expected.remove(tenant.as_str()).unwrap();
        want.sort_by(|a, b| {
            (a.0.to_ascii_lowercase(), &a.1).cmp(&(b.0.to_ascii_lowercase(), &b.1))
        });
        let got: Vec<(String, String, Value)> = body["servers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["server"]["name"].as_str().unwrap().to_owned(),
                    e["server"]["version"].as_str().unwrap().to_owned(),
                    e["server"].clone(),
                )
            })
            .collect();
        assert_eq!(
            got, want,
            "tenant {tenant}: each document comes back as published"
        );
        shown += got.len();
        // And each one alone, by its URL-encoded name.
        for (name, version, server) in &want {
            let r = app
                .get(
                    &format!("/t/{tenant}/v0.1/servers/{}/versions/{version}", enc(name)),
                    &reader,
                )
                .await;
            let one = check(&official, &r);
            assert_eq!(r.status, 200, "{name} {version}");
            assert_eq!(&one["server"], server);
        }
    }
    assert_eq!(shown, docs.len());
}

#[tokio::test]
async fn another_replica_stops_answering_304_after_a_status_change() {
    // The single-version 304 comes from the registry's in-process index:
    // on PostgreSQL another replica's write must evict it (LISTEN/NOTIFY),
    // not the 30 s TTL.
    if backend() == Backend::Sqlite {
        eprintln!(
            "notice: cross-replica invalidation needs PostgreSQL; SQLite runs as one process"
        );
        return;
    }
    let official = Official::load();
    let a = TestApp::new().await;
    publish(&a, &card(SERVER, "1.0.0")).await;
    review(&a, SERVER, "1.0.0", "approve").await;
    let b = a.replica().await;
    let mut listener = b.registry_listener().expect("a PostgreSQL store");
    tokio::time::timeout(
        std::time::Duration::from_secs(5),
        listener.wait_for(|s| s.listening),
    )
    .await
    .expect("replica B listens within 5 s")
    .expect("replica B's listener runs");
    let path = v01(&a, &format!("/servers/{}/versions/1.0.0", enc(SERVER)));
    let token = reader(&a);
    let tag = b.get(&path, &token).await.header("etag").unwrap();
    assert_eq!(conditional(&b, &path, &token, &tag).await.status, 304);
    set_status(&a, SERVER, "1.0.0", "deprecated", "use 2.x").await;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        listener.borrow_and_update();
        let r = conditional(&b, &path, &token, &tag).await;
        if r.status != 304 {
            let body = check(&official, &r);
            assert_eq!(r.status, 200);
            let m = &body["_meta"]["io.modelcontextprotocol.registry/official"];
            assert_eq!(
                (&m["status"], &m["isLatest"]),
                (&json!("deprecated"), &json!(false))
            );
            break;
        }
        tokio::time::timeout_at(deadline, listener.changed())
            .await
            .expect("replica B still answers 304 after 5 s")
            .expect("replica B's listener runs");
    }
}
