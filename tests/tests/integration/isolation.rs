//! Tenant isolation, driven by the OpenAPI document the app serves: every
//! operation under `/v1/tenants/{tenant}` (and the subregistry's
//! `/t/{tenant}`) is called with another tenant's
//! real ids and a token of this tenant, and must answer exactly as for a
//! tenant that does not exist. The routes are enumerated from the document,
//! so a route added later is covered without touching this file, and a path
//! parameter or request body this file cannot fill fails the test until it
//! is taught how. Roles stay in their place too: a token holding `platform`
//! beside tenant A's roles is refused on tenant B's routes exactly as A's
//! plain token is, and acts as `platform` on the platform routes (the
//! secured operations outside `{tenant}`, also read from the document).

use std::collections::BTreeMap;

use pinfold_tests::*;
use serde_json::{Value, json};

/// Every tenant role: an intruder holding them all is refused by the tenant
/// boundary, never by a role check that could hide a leak.
const ALL_ROLES: &[&str] = &["admin", "publisher", "reviewer", "reader", "client"];

/// Tenant operations the document marks as taking no token (a CORS
/// preflight never carries one). They must still answer another tenant's
/// path exactly as a missing tenant's; every other operation answers 404.
const PUBLIC: &[&str] = &["preflight_card"];

/// Tenant operations in the document today; the test covers at least these,
/// so an empty or truncated route list cannot pass.
const OPERATIONS_TODAY: usize = 35;

/// Platform operations (secured, outside `{tenant}`) in the document today.
const PLATFORM_OPERATIONS_TODAY: usize = 1;

/// Refusals that still prove the owner was admitted past the tenant
/// boundary: replacing a provider without `If-Match` (428), and exchanging
/// a grant with a state that is not its own (400 `invalid_state`).
const ADMITTED_REFUSALS: &[(&str, u16)] = &[("put_provider", 428), ("exchange_grant", 400)];

const PROVIDER: &str = "bee-idp";

const SERVER: &str = "io.github.bee/notes";

fn card(version: &str) -> Value {
    json!({
        "name": SERVER,
        "version": version,
        "description": "Notes of tenant B",
        "signature": {
            "tools": [{"name": "read_note", "description": "Read a note",
                "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}},
                "annotations": {"readOnlyHint": true, "openWorldHint": false}}],
            "prompts": [], "resources": [], "resourceTemplates": []
        }
    })
}

/// One concrete request derived from a documented operation.
struct Call {
    operation: String,
    method: String,
    path: String,
    body: Option<Value>,
    public: bool,
}

/// The values of a path parameter: the tenant, then B's real ids. An
/// unknown parameter fails the test: teach this function its B value.
fn path_values(param: &str, tenant: &str, method: &str, session: &str, grant: &str) -> Vec<String> {
    match param {
        "tenant" => vec![tenant.to_owned()],
        "id" => vec![session.to_owned()],
        "provider" => vec![PROVIDER.to_owned()],
        "grant" => vec![grant.to_owned()],
        "server" | "serverName" => vec![SERVER.replace('/', "%2F")],
        // `latest` names a version on reads only.
        "version" if method == "GET" => vec!["1.0.0".into(), "latest".into()],
        "version" => vec!["1.0.0".into()],
        other => panic!(
            "path parameter {{{other}}} is new: give tenant B a real value for it in isolation.rs"
        ),
    }
}

/// A value for a required query parameter, from B's data.
fn query_value(param: &str, operation: &str) -> &'static str {
    match param {
        "from" => "1.0.0",
        "to" => "1.1.0",
        other => panic!(
            "{operation} requires query parameter {other:?}: give it a value from tenant B in isolation.rs"
        ),
    }
}

/// A minimal valid body for an operation that takes one (the same request
/// succeeds for the owner, which the test checks).
fn body_for(operation: &str) -> Value {
    match operation {
        "put_policy" => json!({"enforcement_mode": "strict", "approval_required": true}),
        "publish_version" => card("1.0.0"),
        "review_version" => json!({"decision": "reject", "note": "not ours"}),
        "set_version_status" => json!({"status": "revoked", "reason": "not ours"}),
        "verify_version" => json!({"tools": []}),
        "open_session" => json!({"server": SERVER, "upstream": {"url": "http://127.0.0.1:9/mcp",
            "headers": {"Authorization": "Bearer b-upstream-secret"}}}),
        "resolve_tool" => json!({"name": "read_note", "arguments": {"id": "n1"}}),
        "resolve_batch" => json!({"calls": [{"name": "read_note", "arguments": {"id": "n1"}}]}),
        "put_provider" => provider_body(),
        "create_grant" => json!({"provider": PROVIDER, "scopes": ["notes:read"],
            "redirect_uri": "https://bee.example/callback", "resource": SERVER}),
        "exchange_grant" => json!({"code": "a-code", "state": "not-the-state"}),
        "plan_scopes" => json!({"provider": "github", "server": SERVER, "version": "1.0.0",
            "calls": [{"name": "read_note", "arguments": {"id": "n1"}}]}),
        "put_guard_route" => json!({"upstream": {"url": "http://127.0.0.1:9/mcp",
            "headers": {"Authorization": "Bearer b-guard-secret"}}, "calls": "read_only"}),
        "import_server_json" => {
            json!({"name": "io.github.bee/imported", "version": "0.1.0", "description": "Imported"})
        }
        other => panic!("{other} takes a request body: add a minimal valid one in isolation.rs"),
    }
}

/// Tenant B's provider profile (its client secret must never leak).
fn provider_body() -> Value {
    json!({"client_id": "bee", "client_secret": "b-client-secret",
        "authorization_endpoint": "https://idp.bee.example/authorize",
        "token_endpoint": "https://idp.bee.example/token",
        "redirect_uris": ["https://bee.example/callback"],
        "hierarchy": {"notes:write": ["notes:read"]},
        "resources": {SERVER: "https://notes.bee.example/mcp"}})
}

/// Every operation under `/v1/tenants/{tenant}` in `doc`, as concrete
/// requests against `tenant` (`{tenant}` is substituted last, so the same
/// list serves any tenant).
fn tenant_calls(doc: &Value, tenant: &str, session: &str, grant: &str) -> (usize, Vec<Call>) {
    const METHODS: &[&str] = &[
        "get", "put", "post", "delete", "patch", "options", "head", "trace",
    ];
    let mut operations = 0;
    let mut calls = Vec::new();
    for (template, item) in doc["paths"].as_object().expect("paths") {
        if !(template == "/v1/tenants/{tenant}"
            || template.starts_with("/v1/tenants/{tenant}/")
            || template.starts_with("/t/{tenant}/"))
        {
            continue;
        }
        for (method, op) in item.as_object().unwrap() {
            if !METHODS.contains(&method.as_str()) {
                continue;
            }
            operations += 1;
            let method = method.to_uppercase();
            let operation = op["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {template} has no operationId"))
                .to_owned();
            let mut query = Vec::new();
            for p in op["parameters"].as_array().into_iter().flatten() {
                let name = p["name"].as_str().unwrap();
                if p["required"] != true {
                    continue;
                }
                match p["in"].as_str() {
                    Some("path") => {}
                    Some("query") => {
                        query.push(format!("{name}={}", query_value(name, &operation)))
                    }
                    other => panic!("{operation}: required {other:?} parameter {name} is new"),
                }
            }
            let body = op.get("requestBody").map(|_| body_for(&operation));
            let public = op.get("security").is_none_or(|s| s == &json!([]));
            if public {
                assert!(
                    PUBLIC.contains(&operation.as_str()),
                    "{operation} takes no token: if that is intended, list it in PUBLIC"
                );
            }
            // Expand every `{param}` of the template into its values.
            let mut paths = vec![String::new()];
            for segment in template.trim_start_matches('/').split('/') {
                let values = match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                    Some(param) => path_values(param, tenant, &method, session, grant),
                    None => vec![segment.to_owned()],
                };
                paths = paths
                    .iter()
                    .flat_map(|p| values.iter().map(move |v| format!("{p}/{v}")))
                    .collect();
            }
            for mut path in paths {
                if !query.is_empty() {
                    path = format!("{path}?{}", query.join("&"));
                }
                calls.push(Call {
                    operation: operation.clone(),
                    method: method.clone(),
                    path,
                    body: body.clone(),
                    public,
                });
            }
        }
    }
    (operations, calls)
}

/// What a response says, minus the per-request id.
fn answer(r: &Resp) -> (u16, BTreeMap<String, String>, Value) {
    let headers = r
        .headers
        .iter()
        .filter(|(k, _)| *k != "x-request-id")
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
        .collect();
    let mut body = if r.bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&r.bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&r.bytes).into_owned()))
    };
    if let Some(o) = body.as_object_mut() {
        o.remove("request_id");
    }
    (r.status.as_u16(), headers, body)
}

/// Everything tenant B can see of itself, through its own token.
async fn snapshot(app: &TestApp, tenant: &str, token: &str) -> Vec<Value> {
    let s = SERVER.replace('/', "%2F");
    let mut out = Vec::new();
    for path in [
        format!("/v1/tenants/{tenant}"),
        format!("/v1/tenants/{tenant}/policy"),
        format!("/v1/tenants/{tenant}/audit?limit=100"),
        format!("/v1/tenants/{tenant}/servers"),
        format!("/v1/tenants/{tenant}/servers/{s}/versions/1.0.0"),
        format!("/v1/tenants/{tenant}/servers/{s}/versions/1.1.0"),
        format!("/v1/tenants/{tenant}/jwks.json"),
        format!("/v1/tenants/{tenant}/sessions"),
        format!("/v1/tenants/{tenant}/providers/{PROVIDER}"),
        format!("/v1/tenants/{tenant}/grants"),
    ] {
        let r = app.get(&path, token).await;
        assert_eq!(
            r.status,
            200,
            "{path}: {}",
            String::from_utf8_lossy(&r.bytes)
        );
        out.push(r.json());
    }
    out
}

/// Tenant B with real data: two versions (the first approved), two resolve
/// sessions, a provider profile and two pending grants.
struct TenantB {
    tenant: pinfold_core::ids::TenantId,
    owner: String,
    session: String,
    grant: String,
}

impl TenantB {
    /// Strings only tenant B's data contains: none may reach tenant A.
    fn markers(&self) -> Vec<&str> {
        vec![
            SERVER,
            "Notes of tenant B",
            "b-upstream-secret",
            "b-client-secret",
            "b-guard-secret",
            &self.session,
            &self.grant,
        ]
    }
}

async fn seed_tenant_b(app: &TestApp) -> TenantB {
    let b = app.new_tenant().await;
    let b_publisher = token("pat", Some(b.as_str()), &["publisher"]);
    let b_owner = token("bob", Some(b.as_str()), ALL_ROLES);
    let s = SERVER.replace('/', "%2F");
    for v in ["1.0.0", "1.1.0"] {
        let r = app
            .send(
                "PUT",
                &format!("/v1/tenants/{b}/servers/{s}/versions/{v}"),
                Some(&b_publisher),
                Some(card(v)),
            )
            .await;
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    }
    let r = app
        .send(
            "POST",
            &format!("/v1/tenants/{b}/servers/{s}/versions/1.0.0/review"),
            Some(&b_owner),
            Some(json!({"decision": "approve"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    // B's resolve session (opened by B's owner, who holds `client`).
    let r = app
        .send(
            "POST",
            &format!("/v1/tenants/{b}/sessions"),
            Some(&b_owner),
            Some(body_for("open_session")),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    let session = r.json()["id"].as_str().unwrap().to_owned();
    // B's provider profile and a pending grant.
    let r = app
        .send(
            "PUT",
            &format!("/v1/tenants/{b}/providers/{PROVIDER}"),
            Some(&b_owner),
            Some(provider_body()),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    let r = app
        .send(
            "POST",
            &format!("/v1/tenants/{b}/grants"),
            Some(&b_owner),
            Some(body_for("create_grant")),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    let grant = r.json()["id"].as_str().unwrap().to_owned();
    // B's guard route.
    let r = app
        .send(
            "PUT",
            &format!("/v1/tenants/{b}/servers/{s}/guard"),
            Some(&b_owner),
            Some(body_for("put_guard_route")),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    // A second session and grant, so that B's lists have a next page.
    for (path, body) in [
        ("sessions", body_for("open_session")),
        ("grants", body_for("create_grant")),
    ] {
        let r = app
            .send(
                "POST",
                &format!("/v1/tenants/{b}/{path}"),
                Some(&b_owner),
                Some(body),
            )
            .await;
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    }
    TenantB {
        tenant: b,
        owner: b_owner,
        session,
        grant,
    }
}

/// The document the app serves at /openapi.json.
async fn served_doc(app: &TestApp) -> Value {
    let r = app.send("GET", "/openapi.json", None, None).await;
    assert_eq!(r.status, 200);
    r.json()
}

#[tokio::test]
async fn every_tenant_operation_answers_another_tenant_as_if_it_did_not_exist() {
    let app = TestApp::new().await;
    let TenantB {
        tenant: b,
        owner: b_owner,
        session,
        grant,
    } = seed_tenant_b(&app).await;
    let before = snapshot(&app, b.as_str(), &b_owner).await;

    let doc = served_doc(&app).await;
    let absent = format!("t-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let (operations, calls) = tenant_calls(&doc, b.as_str(), &session, &grant);
    let (_, absent_calls) = tenant_calls(&doc, &absent, &session, &grant);
    assert!(
        operations >= OPERATIONS_TODAY,
        "only {operations} tenant operations in the document (expected at least {OPERATIONS_TODAY})"
    );
    assert_eq!(calls.len(), absent_calls.len());

    // Tenant A's token, holding every role, on tenant B's paths.
    let intruder = app.as_roles("mallory", ALL_ROLES);
    for (call, twin) in calls.iter().zip(&absent_calls) {
        let what = format!("{} {} ({})", call.method, call.path, call.operation);
        let r = app
            .send(&call.method, &call.path, Some(&intruder), call.body.clone())
            .await;
        if !call.public {
            assert_eq!(
                r.status,
                404,
                "{what} answers tenant A: {}",
                String::from_utf8_lossy(&r.bytes)
            );
            if call.path.starts_with("/t/") {
                // The subregistry answers in the official registry's shape.
                assert_eq!(r.json(), json!({"error": "Not found"}), "{what}");
            } else {
                r.problem(404, "tenant_not_found");
            }
        }
        let missing = app
            .send(&twin.method, &twin.path, Some(&intruder), twin.body.clone())
            .await;
        assert_eq!(
            answer(&r),
            answer(&missing),
            "{what}: tenant B's answer differs from a missing tenant's"
        );
    }
    // Nothing of B changed.
    assert_eq!(snapshot(&app, b.as_str(), &b_owner).await, before);

    // Control: B's own token is admitted to the very same requests (reads
    // first, then writes), so the 404s above hid real data, and every body
    // was valid (a state conflict is the only refusal allowed). Revocations
    // and deletions go last, so that nothing else finds its target gone.
    let (reads, writes): (Vec<&Call>, Vec<&Call>) = calls
        .iter()
        .partition(|c| c.method == "GET" || c.method == "OPTIONS");
    let (deletes, writes): (Vec<&Call>, Vec<&Call>) = writes
        .into_iter()
        .partition(|c| c.method == "DELETE" || c.operation == "set_version_status");
    for call in reads.into_iter().chain(writes).chain(deletes) {
        let r = app
            .send(&call.method, &call.path, Some(&b_owner), call.body.clone())
            .await;
        let admitted = ADMITTED_REFUSALS.contains(&(call.operation.as_str(), r.status.as_u16()));
        assert!(
            r.status.is_success() || r.status == 409 || admitted,
            "{} {} ({}) as tenant B: {} {}",
            call.method,
            call.path,
            call.operation,
            r.status,
            String::from_utf8_lossy(&r.bytes)
        );
    }
}

/// Path parameters that carry one of tenant B's own identifiers.
const B_ID_PARAMS: &[&str] = &["{id}", "{grant}", "{provider}", "{server}", "{serverName}"];

/// The template's operation carries one of B's identifiers in its path.
fn carries_b_id(doc: &Value, operation: &str) -> bool {
    doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .any(|(template, item)| {
            item.as_object()
                .unwrap()
                .values()
                .any(|op| op["operationId"] == operation)
                && B_ID_PARAMS.iter().any(|p| template.contains(p))
        })
}

/// The operation documents `status` among its responses.
fn documents(doc: &Value, operation: &str, status: &str) -> bool {
    doc["paths"].as_object().unwrap().values().any(|item| {
        item.as_object()
            .unwrap()
            .values()
            .any(|op| op["operationId"] == operation && op["responses"].get(status).is_some())
    })
}

/// The next-page cursor of a list answer, in Pinfold's or the official
/// registry's spelling.
fn next_cursor(v: &Value) -> Option<String> {
    match v {
        Value::Object(m) => m.iter().find_map(|(k, v)| match (k.as_str(), v) {
            ("next_cursor" | "nextCursor", Value::String(c)) => Some(c.clone()),
            _ => next_cursor(v),
        }),
        _ => None,
    }
}

fn with_query(path: &str, extra: &str) -> String {
    let sep = if path.contains('?') { '&' } else { '?' };
    format!("{path}{sep}{extra}")
}

/// Tenant A holding every role replays what tenant B's owner legitimately
/// holds: B's ETags as `If-None-Match`, B's list cursors, and B's ids under
/// A's own tenant path. Nothing answers 304 (which would confirm B's
/// content), nothing answers with B's data, and every path that names one
/// of B's ids answers 404 under A's tenant as well as under B's. Operations
/// come from the served document, as in the test above.
#[tokio::test]
async fn tenant_b_etags_cursors_and_ids_are_nothing_to_tenant_a() {
    let app = TestApp::new().await;
    let b = seed_tenant_b(&app).await;
    let before = snapshot(&app, b.tenant.as_str(), &b.owner).await;
    let doc = served_doc(&app).await;
    let a = app.tenant.as_str().to_owned();
    let (_, b_calls) = tenant_calls(&doc, b.tenant.as_str(), &b.session, &b.grant);
    let (_, a_calls) = tenant_calls(&doc, &a, &b.session, &b.grant);
    assert_eq!(b_calls.len(), a_calls.len());
    let intruder = app.as_roles("mallory", ALL_ROLES);
    let leaks = |what: &str, r: &Resp| {
        let text = String::from_utf8_lossy(&r.bytes);
        for m in b.markers() {
            assert!(!text.contains(m), "{what} shows tenant B's {m:?}: {text}");
        }
        assert!(
            r.status != 304 && !r.status.is_server_error(),
            "{what}: {} {text}",
            r.status
        );
    };

    // 1. B's ETags.
    let mut etags = 0;
    let mut revalidating = 0;
    for (bc, ac) in b_calls
        .iter()
        .zip(&a_calls)
        .filter(|(c, _)| c.method == "GET")
    {
        let r = app.get(&bc.path, &b.owner).await;
        assert_eq!(
            r.status,
            200,
            "{} as B: {}",
            bc.path,
            String::from_utf8_lossy(&r.bytes)
        );
        let Some(etag) = r.header("etag") else {
            continue;
        };
        etags += 1;
        // Sanity: where the document promises a 304, the ETag does
        // revalidate for its owner (so a 304 is what a leak would look like).
        if documents(&doc, &bc.operation, "304") {
            revalidating += 1;
            let own = app
                .send_raw(
                    "GET",
                    &bc.path,
                    Some(&b.owner),
                    None,
                    &[("if-none-match", &etag)],
                )
                .await;
            assert_eq!(own.status, 304, "{} with its own ETag", bc.path);
        }
        for path in [&bc.path, &ac.path] {
            let what = format!("GET {path} ({}) with B's ETag {etag}", bc.operation);
            let r = app
                .send_raw(
                    "GET",
                    path,
                    Some(&intruder),
                    None,
                    &[("if-none-match", &etag)],
                )
                .await;
            leaks(&what, &r);
            if path == &bc.path || carries_b_id(&doc, &bc.operation) {
                assert_eq!(r.status, 404, "{what}");
            }
        }
    }
    assert!(etags >= 6, "only {etags} operations gave B an ETag");
    assert!(
        revalidating >= 5,
        "only {revalidating} ETags revalidate with 304"
    );

    // 2. B's cursors, on B's path and on A's.
    let mut cursors = 0;
    for (bc, ac) in b_calls
        .iter()
        .zip(&a_calls)
        .filter(|(c, _)| c.method == "GET")
    {
        let takes_cursor = doc["paths"].as_object().unwrap().values().any(|item| {
            item.as_object().unwrap().values().any(|op| {
                op["operationId"] == bc.operation.as_str()
                    && op["parameters"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|p| p["name"] == "cursor")
            })
        });
        if !takes_cursor {
            continue;
        }
        let r = app.get(&with_query(&bc.path, "limit=1"), &b.owner).await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
        let Some(cursor) = next_cursor(&r.json()) else {
            continue;
        };
        cursors += 1;
        let q = format!("limit=1&cursor={cursor}");
        let r = app.get(&with_query(&bc.path, &q), &intruder).await;
        assert_eq!(
            r.status, 404,
            "{} with B's cursor under A's token",
            bc.operation
        );
        let what = format!("{} on A's path with B's cursor", ac.operation);
        let r = app.get(&with_query(&ac.path, &q), &intruder).await;
        leaks(&what, &r);
    }
    assert!(
        cursors >= 3,
        "only {cursors} list operations gave B a cursor"
    );

    // 3. B's ids under A's own tenant path: every secured method but PUT (a
    // PUT names what it creates, and names are per tenant; a CORS preflight
    // answers any path).
    let mut by_id = 0;
    for call in a_calls
        .iter()
        .filter(|c| !c.public && c.method != "PUT" && carries_b_id(&doc, &c.operation))
    {
        by_id += 1;
        let what = format!(
            "{} {} ({}) with B's ids",
            call.method, call.path, call.operation
        );
        let r = app
            .send(&call.method, &call.path, Some(&intruder), call.body.clone())
            .await;
        leaks(&what, &r);
        assert_eq!(
            r.status,
            404,
            "{what}: {}",
            String::from_utf8_lossy(&r.bytes)
        );
    }
    assert!(by_id >= 20, "only {by_id} operations name one of B's ids");

    eprintln!(
        "tenant A replayed {etags} of B's ETags ({revalidating} revalidating), \
         {cursors} of B's cursors and {by_id} paths naming B's ids: no 304, no data, all 404"
    );
    // Nothing of B changed (the session is still open, the grant pending).
    assert_eq!(snapshot(&app, b.tenant.as_str(), &b.owner).await, before);
}

/// The platform operations of `doc`: secured operations whose path names no
/// tenant, the operational routes (tag `operations`) aside.
fn platform_calls(doc: &Value) -> Vec<Call> {
    let mut calls = Vec::new();
    for (template, item) in doc["paths"].as_object().expect("paths") {
        if template.contains("{tenant}") {
            continue;
        }
        for (method, op) in item.as_object().unwrap() {
            let Some(operation) = op["operationId"].as_str() else {
                continue;
            };
            let secured = op.get("security").is_some_and(|s| s != &json!([]));
            let operational = op["tags"]
                .as_array()
                .is_some_and(|t| t.contains(&json!("operations")));
            if !secured || operational {
                continue;
            }
            assert!(
                !template.contains('{'),
                "{operation}: platform path {template} takes a parameter: teach isolation.rs its value"
            );
            calls.push(Call {
                operation: operation.to_owned(),
                method: method.to_uppercase(),
                path: template.clone(),
                body: op.get("requestBody").map(|_| platform_body(operation)),
                public: false,
            });
        }
    }
    calls
}

/// A minimal valid body for a platform operation (fresh each call).
fn platform_body(operation: &str) -> Value {
    match operation {
        "create_tenant" => json!({
            "id": format!("p-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]),
            "name": "Made by a mixed token"
        }),
        other => panic!("{other} takes a request body: add a minimal valid one in isolation.rs"),
    }
}

/// A token holding `platform` beside tenant A's roles is each in its own
/// place: 404 (the same as for a tenant that does not exist) on every
/// operation of tenant B in the served document, `platform` on the
/// platform operations (2xx, which A's roles alone cannot do), and its
/// tenant roles in A alone. A `platform` token without a tenant is
/// refused on B's routes the same way, and `platform` in A's own tenant
/// holds no role there.
#[tokio::test]
async fn platform_beside_tenant_roles_opens_no_other_tenant() {
    let app = TestApp::new().await;
    let b = seed_tenant_b(&app).await;
    let before = snapshot(&app, b.tenant.as_str(), &b.owner).await;
    let doc = served_doc(&app).await;
    let absent = format!("t-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let (operations, calls) = tenant_calls(&doc, b.tenant.as_str(), &b.session, &b.grant);
    let (_, absent_calls) = tenant_calls(&doc, &absent, &b.session, &b.grant);
    assert!(
        operations >= OPERATIONS_TODAY,
        "only {operations} tenant operations"
    );
    assert_eq!(calls.len(), absent_calls.len());

    let mut everything = vec!["platform"];
    everything.extend_from_slice(ALL_ROLES);
    let tokens = [
        (
            "platform,admin of A",
            app.as_roles("mallory", &["platform", "admin"]),
        ),
        (
            "platform and every role of A",
            app.as_roles("mallory", &everything),
        ),
        ("platform without a tenant", app.platform()),
    ];
    for (who, t) in &tokens {
        for (call, twin) in calls.iter().zip(&absent_calls) {
            let what = format!(
                "{} {} ({}) as {who}",
                call.method, call.path, call.operation
            );
            let r = app
                .send(&call.method, &call.path, Some(t), call.body.clone())
                .await;
            if !call.public {
                if call.path.starts_with("/t/") {
                    assert_eq!(r.status, 404, "{what}");
                    assert_eq!(r.json(), json!({"error": "Not found"}), "{what}");
                } else {
                    assert_eq!(
                        r.status,
                        404,
                        "{what}: {}",
                        String::from_utf8_lossy(&r.bytes)
                    );
                    r.problem(404, "tenant_not_found");
                }
            }
            let missing = app
                .send(&twin.method, &twin.path, Some(t), twin.body.clone())
                .await;
            assert_eq!(
                answer(&r),
                answer(&missing),
                "{what}: tenant B's answer differs from a missing tenant's"
            );
        }
    }
    // Nothing of B changed.
    assert_eq!(snapshot(&app, b.tenant.as_str(), &b.owner).await, before);

    // The platform operations: 2xx for each mixed token, refused to A's
    // roles without `platform` (so it is `platform` that acts there).
    let platform = platform_calls(&doc);
    assert!(
        platform.len() >= PLATFORM_OPERATIONS_TODAY,
        "only {} platform operations in the document",
        platform.len()
    );
    let a_admin = app.as_roles("alice", ALL_ROLES);
    for call in &platform {
        for (who, t) in &tokens[..2] {
            let body = call.body.as_ref().map(|_| platform_body(&call.operation));
            let r = app.send(&call.method, &call.path, Some(t), body).await;
            assert!(
                r.status.is_success(),
                "{} {} ({}) as {who}: {} {}",
                call.method,
                call.path,
                call.operation,
                r.status,
                String::from_utf8_lossy(&r.bytes)
            );
        }
        let body = call.body.as_ref().map(|_| platform_body(&call.operation));
        app.send(&call.method, &call.path, Some(&a_admin), body)
            .await
            .problem(403, "forbidden_role");
    }

    // In A, the mixed token is A's admin...
    let a = app.tenant.as_str();
    let (_, mixed) = &tokens[0];
    assert_eq!(
        app.get(&format!("/v1/tenants/{a}"), mixed).await.status,
        200
    );
    let r = app
        .send(
            "PUT",
            &format!("/v1/tenants/{a}/policy"),
            Some(mixed),
            Some(body_for("put_policy")),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(
        app.get(&format!("/v1/tenants/{a}/audit"), mixed)
            .await
            .status,
        200
    );
    // ...and not its client, which it does not hold.
    let r = app
        .send(
            "POST",
            &format!("/v1/tenants/{a}/sessions"),
            Some(mixed),
            Some(body_for("open_session")),
        )
        .await;
    r.problem(403, "forbidden_role");
    // `platform` alone in A's own tenant holds no role there.
    let only_platform = app.as_roles("pat", &["platform"]);
    for path in [
        format!("/v1/tenants/{a}"),
        format!("/v1/tenants/{a}/policy"),
        format!("/v1/tenants/{a}/audit"),
        format!("/v1/tenants/{a}/servers"),
    ] {
        app.get(&path, &only_platform)
            .await
            .problem(403, "forbidden_role");
    }
}
