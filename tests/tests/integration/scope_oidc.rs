//! End to end against a real authorization server: npm `oidc-provider`
//! (examples/oidc-provider) on loopback, PKCE required, RFC 8707 resource
//! indicators on. Pinfold discovers the endpoints, builds the authorization
//! URL; this test plays the user's browser (login and consent on the
//! provider's own pages); Pinfold exchanges the code with the verifier and
//! the resource, which the provider reports its token endpoint received;
//! the ledger shows requested, granted and needed.
//!
//! Needs `node` and `npm ci --prefix examples/oidc-provider`. Without them
//! the test says so and passes, unless `PINFOLD_REQUIRE_OIDC_PROVIDER` is set
//! (CI sets it).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use pinfold_tests::*;
use serde_json::{Value, json};

use crate::scope_grants::{put, query};

const REDIRECT: &str = "http://127.0.0.1:9/callback";
const RESOURCE: &str = "https://notes.example/mcp";

pub(crate) struct Provider {
    child: Child,
    pub(crate) issuer: String,
    /// Kept open: the provider may write more to its stdout.
    _stdout: BufReader<std::process::ChildStdout>,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start() -> Option<Provider> {
    start_with(&[])
}

/// Starts the provider with `extra` arguments after the port and redirect.
pub(crate) fn start_with(extra: &[&str]) -> Option<Provider> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/oidc-provider");
    let required = std::env::var_os("PINFOLD_REQUIRE_OIDC_PROVIDER").is_some();
    if !dir.join("node_modules/oidc-provider").is_dir() {
        assert!(
            !required,
            "run `npm ci --prefix examples/oidc-provider` first"
        );
        eprintln!(
            "skipped: examples/oidc-provider has no node_modules (npm ci --prefix examples/oidc-provider)"
        );
        return None;
    }
    let spawned = Command::new("node")
        .args(["server.mjs", "--port", "0", "--redirect", REDIRECT])
        .args(extra)
        .current_dir(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            assert!(!required, "cannot run node: {e}");
            eprintln!("skipped: cannot run node: {e}");
            return None;
        }
    };
    let mut line = String::new();
    let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    stdout
        .read_line(&mut line)
        .expect("read the provider's first line");
    let port: u16 = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("unexpected first line {line:?}"));
    Some(Provider {
        child,
        issuer: format!("http://127.0.0.1:{port}"),
        _stdout: stdout,
    })
}

/// Plays the user's browser from the authorization URL to the redirect
/// back to the client: follows redirects by hand, keeps cookies, logs in
/// as `user` and consents on the provider's pages. Returns the redirect's
/// query.
async fn browse(authorization_url: &str, user: &str) -> BTreeMap<String, String> {
    browse_to(authorization_url, user, REDIRECT).await
}

/// [`browse`] until a redirect to `redirect`.
pub(crate) async fn browse_to(
    authorization_url: &str,
    user: &str,
    redirect: &str,
) -> BTreeMap<String, String> {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut cookies: BTreeMap<String, String> = BTreeMap::new();
    let mut next = (
        reqwest::Method::GET,
        authorization_url.to_owned(),
        None::<Vec<(String, String)>>,
    );
    for _ in 0..20 {
        let (method, url, form) = next.clone();
        if url.starts_with(redirect) {
            return url::Url::parse(&url)
                .unwrap()
                .query_pairs()
                .into_owned()
                .collect();
        }
        let jar = cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ");
        let mut req = http.request(method, &url).header("cookie", jar);
        if let Some(f) = &form {
            let body = url::form_urlencoded::Serializer::new(String::new())
                .extend_pairs(f.iter())
                .finish();
            req = req
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body);
        }
        let resp = req.send().await.expect("the provider answers");
        for c in resp.headers().get_all("set-cookie") {
            let c = c.to_str().unwrap();
            if let Some((k, v)) = c.split(';').next().and_then(|kv| kv.split_once('=')) {
                cookies.insert(k.trim().to_owned(), v.to_owned());
            }
        }
        let status = resp.status();
        if status.is_redirection() {
            let loc = resp.headers()["location"].to_str().unwrap().to_owned();
            let abs = url::Url::parse(&url)
                .unwrap()
                .join(&loc)
                .unwrap()
                .to_string();
            next = (reqwest::Method::GET, abs, None);
            continue;
        }
        let html = resp.text().await.unwrap();
        assert!(status.is_success(), "{url}: {status}: {html}");
        // The provider's own login or consent page: one form.
        let action = html
            .split("action=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap_or_else(|| panic!("no form on {url}: {html}"))
            .to_owned();
        let mut fields = Vec::new();
        for input in html.split("<input").skip(1) {
            let attr = |name: &str| {
                input
                    .split(&format!("{name}=\""))
                    .nth(1)
                    .and_then(|s| s.split('"').next())
                    .map(str::to_owned)
            };
            match attr("name").as_deref() {
                Some("login") => fields.push(("login".to_owned(), user.to_owned())),
                Some("password") => fields.push(("password".to_owned(), "any".to_owned())),
                Some(name) => fields.push((name.to_owned(), attr("value").unwrap_or_default())),
                None => {}
            }
        }
        let abs = url::Url::parse(&url)
            .unwrap()
            .join(&action)
            .unwrap()
            .to_string();
        next = (reqwest::Method::POST, abs, Some(fields));
    }
    panic!("no redirect back to the client after 20 steps");
}

async fn exchange(app: &TestApp, id: &str, code: &str, state: &str) -> Resp {
    app.send(
        "POST",
        &format!("/v1/tenants/{}/grants/{id}/exchange", app.tenant),
        Some(&app.as_roles("carl", &["client"])),
        Some(json!({"code": code, "state": state})),
    )
    .await
}

/// Starts a grant for `plan`, drives the user through, exchanges the code.
async fn full_grant(app: &TestApp, issuer: &str, plan: Value) -> (String, Value, String, String) {
    let r = app
        .send(
            "POST",
            &format!("/v1/tenants/{}/grants", app.tenant),
            Some(&app.as_roles("carl", &["client"])),
            Some({
                let mut body = json!({"provider": "notes", "plan": plan, "redirect_uri": REDIRECT});
                // Without a server in the plan, the body names the resource.
                if plan.get("server").is_none() {
                    body["resource"] = json!("io.github.acme/notes");
                }
                body
            }),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    let g = r.json();
    let url = g["authorization_url"].as_str().unwrap().to_owned();
    assert_eq!(query(&url, "resource"), RESOURCE);
    let back = browse(&url, "carol").await;
    assert!(
        !back.contains_key("error"),
        "the provider refused: {back:?}"
    );
    assert_eq!(
        back["state"],
        query(&url, "state"),
        "the state comes back unchanged"
    );
    let id = g["id"].as_str().unwrap().to_owned();
    let before = token_requests(issuer).await.len();
    let r = exchange(app, &id, &back["code"], &back["state"]).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(r.header("cache-control").as_deref(), Some("no-store"));
    // The token request carried the resource too (the provider would
    // otherwise fall back to the one granted at authorization, and the
    // token would look the same).
    let seen = token_requests(issuer).await;
    assert_eq!(
        &seen[before..],
        [json!({"outcome": "issued", "grant_type": "authorization_code", "resource": RESOURCE})],
        "what the provider's token endpoint received"
    );
    (id, r.json(), back["code"].clone(), back["state"].clone())
}

/// What the provider's token endpoint received, request by request
/// (`GET /test/token-requests` of examples/oidc-provider).
async fn token_requests(issuer: &str) -> Vec<Value> {
    reqwest::get(format!("{issuer}/test/token-requests"))
        .await
        .expect("the provider answers")
        .json::<Vec<Value>>()
        .await
        .expect("a JSON list")
}

#[tokio::test]
async fn a_real_authorization_server_grants_through_pinfold_with_pkce_and_resource() {
    let Some(op) = start() else {
        return;
    };
    let app = TestApp::new().await;
    // Only the issuer: the endpoints are discovered (the metadata lists S256).
    let r = put(
        &app,
        "notes",
        &json!({
            "issuer": op.issuer,
            "client_id": "pinfold",
            "client_secret": "pinfold-test-client-secret-0123456789",
            "redirect_uris": [REDIRECT],
            "hierarchy": {"notes:admin": ["notes:write"], "notes:write": ["notes:read"]},
            "resources": {"io.github.acme/notes": RESOURCE}
        }),
        &[],
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    let v = r.json();
    assert_eq!(v["token_endpoint"], format!("{}/token", op.issuer));
    assert_ne!(v["endpoints_from"], "configured");

    // 1. Exactly what is needed.
    let (first, token, code, state) = full_grant(
        &app,
        &op.issuer,
        json!({"required": ["notes:read"], "request": ["notes:read"]}),
    )
    .await;
    assert!(
        token["access_token"]
            .as_str()
            .is_some_and(|t| !t.is_empty()),
        "{token}"
    );
    assert_eq!(
        token["token_type"]
            .as_str()
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Some("bearer")
    );
    assert_eq!(token["scope"], "notes:read");
    // A replayed state exchanges nothing.
    exchange(&app, &first, &code, &state)
        .await
        .problem(400, "invalid_state");

    // 2. More than needed: asking for notes:admin when the calls need read;
    // the plan's server names the resource, through the profile's
    // `resources`.
    let (second, token, _, _) = full_grant(
        &app,
        &op.issuer,
        json!({"required": ["notes:read"], "request": ["notes:admin"],
               "server": "io.github.acme/notes"}),
    )
    .await;
    assert_eq!(token["scope"], "notes:admin");

    let ledger = app
        .get(&format!("/v1/tenants/{}/grants", app.tenant), &app.admin())
        .await;
    assert_eq!(ledger.status, 200);
    let text = String::from_utf8_lossy(&ledger.bytes).into_owned();
    assert!(
        !text.contains(token["access_token"].as_str().unwrap()),
        "a token is in the ledger"
    );
    let items = ledger.json()["items"].as_array().unwrap().clone();
    assert_eq!(items.len(), 2);
    let one = items.iter().find(|i| i["id"] == first.as_str()).unwrap();
    assert_eq!(one["status"], "exchanged");
    assert_eq!(one["requested"], json!(["notes:read"]));
    assert_eq!(one["granted"], json!(["notes:read"]));
    assert_eq!(one["needed"], json!(["notes:read"]));
    assert_eq!(one["resource"], RESOURCE);
    assert_eq!(one["over_privileged"], false);
    let two = items.iter().find(|i| i["id"] == second.as_str()).unwrap();
    assert_eq!(two["requested"], json!(["notes:admin"]));
    assert_eq!(two["granted"], json!(["notes:admin"]));
    assert_eq!(two["needed"], json!(["notes:read"]));
    assert_eq!(two["over_privileged"], true);
    assert_eq!(two["unneeded"], json!(["notes:admin", "notes:write"]));
    assert_eq!(two["missing"], json!([]));
}
