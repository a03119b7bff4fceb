//! The review console over HTTP (`/console`), on both databases: sign-in
//! (the suite's one-click sign-in, a token of the test issuer verified
//! like any other), the queue, a version with its escalations first,
//! approve and the attestation, separation of duties (no approve button
//! for the publisher, a forged POST refused), CSRF, the CSP on every page,
//! escaping, cross-tenant URLs, sign-out, and that a session holds only
//! its token's roles.

use std::collections::BTreeMap;

use pinfold_tests::*;
use serde_json::{Value, json};

const SERVER: &str = "io.github.acme/files";
const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>()
}

fn card(version: &str, tools: Value) -> Value {
    json!({"name": SERVER, "version": version, "description": "Files",
        "signature": {"tools": tools, "prompts": [], "resources": [], "resourceTemplates": []}})
}

fn read_tool() -> Value {
    json!({"name": "read_file", "description": "Read a file",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
        "annotations": {"readOnlyHint": true, "openWorldHint": false}})
}

fn read_or_delete_tool() -> Value {
    json!({"name": "read_file", "description": "Read or delete a file",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
        "annotations": [{"readOnlyHint": true, "openWorldHint": false},
                        {"readOnlyHint": false, "destructiveHint": true, "openWorldHint": false}]})
}

fn api_path(app: &TestApp, version: &str) -> String {
    format!(
        "/v1/tenants/{}/servers/{}/versions/{version}",
        app.tenant,
        enc(SERVER)
    )
}

fn page_path(app: &TestApp, version: &str) -> String {
    format!(
        "/console/t/{}/servers/{}/versions/{version}",
        app.tenant,
        enc(SERVER).replace('+', "%20")
    )
}

async fn publish(app: &TestApp, who: &str, doc: &Value) {
    let version = doc["version"].as_str().unwrap();
    let r = app
        .send(
            "PUT",
            &api_path(app, version),
            Some(&app.as_roles(who, &["publisher"])),
            Some(doc.clone()),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
}

async fn status_of(app: &TestApp, version: &str) -> String {
    let r = app.get(&api_path(app, version), &app.admin()).await;
    r.json()["status"].as_str().unwrap().to_owned()
}

/// 1.0.0 approved (published by bob, approved by carol), 1.1.0 pending
/// (published by bob) with an escalation: `read_file` may now delete.
async fn pending_escalation(app: &TestApp) {
    publish(app, "bob", &card("1.0.0", json!([read_tool()]))).await;
    let r = app
        .send(
            "POST",
            &format!("{}/review", api_path(app, "1.0.0")),
            Some(&app.as_roles("carol", &["reviewer"])),
            Some(json!({"decision": "approve"})),
        )
        .await;
    assert_eq!(r.status, 200);
    publish(app, "bob", &card("1.1.0", json!([read_or_delete_tool()]))).await;
}

/// A browser: cookies kept, redirects not followed.
struct Browser<'a> {
    app: &'a TestApp,
    cookies: BTreeMap<String, String>,
}

impl<'a> Browser<'a> {
    fn new(app: &'a TestApp) -> Self {
        Browser {
            app,
            cookies: BTreeMap::new(),
        }
    }

    async fn request(&mut self, method: &str, path: &str, form: Option<&[(&str, &str)]>) -> Resp {
        let jar = self
            .cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ");
        let body = form.map(|f| {
            let mut s = url::form_urlencoded::Serializer::new(String::new());
            for (k, v) in f {
                s.append_pair(k, v);
            }
            s.finish()
        });
        let mut headers = vec![("cookie", jar.as_str())];
        if body.is_some() {
            headers.push(("content-type", "application/x-www-form-urlencoded"));
        }
        let r = self
            .app
            .send_raw(
                method,
                path,
                None,
                body.as_deref().map(str::as_bytes),
                &headers,
            )
            .await;
        for c in r.headers.get_all("set-cookie") {
            let c = c.to_str().unwrap();
            assert!(c.contains("HttpOnly") && c.contains("SameSite=Lax"), "{c}");
            let (k, v) = c.split(';').next().unwrap().split_once('=').unwrap();
            if v.is_empty() {
                self.cookies.remove(k);
            } else {
                self.cookies.insert(k.to_owned(), v.to_owned());
            }
        }
        let csp = r.header("content-security-policy").unwrap_or_default();
        // The sign-in page's form leads on to the identity provider, whose
        // origin its `form-action` adds; nothing else differs.
        let to_provider = csp.starts_with(
            "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self' http://127.0.0.1:",
        ) && csp.ends_with("; frame-ancestors 'none'; base-uri 'none'")
            && (path.contains("/sign-in") || path.starts_with("/console/callback"));
        assert!(csp == CSP || to_provider, "{path}: {csp}");
        r
    }

    async fn get(&mut self, path: &str) -> (u16, String) {
        let r = self.request("GET", path, None).await;
        (r.status.as_u16(), String::from_utf8(r.bytes).unwrap())
    }

    async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Resp {
        self.request("POST", path, Some(form)).await
    }

    /// Signs in as `sub` with `roles` in `tenant`.
    async fn sign_in_to(&mut self, tenant: &str, sub: &str, roles: &str) {
        let (status, html) = self.get(&format!("/console/t/{tenant}/sign-in")).await;
        assert_eq!(status, 200, "{html}");
        let token = field(&html, "token");
        let who = format!("{sub}:{roles}");
        let r = self
            .post(
                &format!("/console/t/{tenant}/sign-in/dev"),
                &[("token", &token), ("as", &who)],
            )
            .await;
        assert_eq!(r.status, 303, "{}", String::from_utf8_lossy(&r.bytes));
        assert_eq!(
            r.header("location").unwrap(),
            format!("/console/t/{tenant}/queue")
        );
        assert!(self.cookies.contains_key("pinfold_console"));
    }

    async fn sign_in(&mut self, sub: &str, roles: &str) {
        let tenant = self.app.tenant.to_string();
        self.sign_in_to(&tenant, sub, roles).await;
    }
}

/// The value of the first hidden input named `name`.
fn field(html: &str, name: &str) -> String {
    let at = html
        .find(&format!("name=\"{name}\" value=\""))
        .unwrap_or_else(|| panic!("no {name} field in {html}"));
    let rest = &html[at + name.len() + 15..];
    rest[..rest.find('"').unwrap()].to_owned()
}

#[tokio::test]
async fn a_reviewer_sees_the_escalation_first_approves_and_sees_the_attestation() {
    let app = TestApp::new().await;
    pending_escalation(&app).await;
    let mut b = Browser::new(&app);
    b.sign_in("rita", "reviewer").await;
    let (status, queue) = b.get(&format!("/console/t/{}/queue", app.tenant)).await;
    assert_eq!(status, 200, "{queue}");
    // One pending row (1.1.0), compared with the approved 1.0.0.
    assert_eq!(queue.matches("<tr>").count(), 2, "{queue}");
    assert!(queue.contains("versions/1.1.0\">1.1.0</a>"), "{queue}");
    assert!(queue.contains("versions/1.0.0\">1.0.0</a>"), "{queue}");
    assert!(queue.contains("<td>bob<br>"), "who published: {queue}");
    assert!(
        queue.contains("<span class=\"chip danger\">1</span>"),
        "{queue}"
    );
    let (status, page) = b.get(&page_path(&app, "1.1.0")).await;
    assert_eq!(status, 200, "{page}");
    let esc = page.find("class=\"escalations\"").expect("escalations");
    assert!(esc < page.find("id=\"tools\"").unwrap());
    assert!(page[esc..].starts_with("class=\"escalations\"><li><span class=\"chip danger\">escalation</span> <code>read_file</code>"), "{page}");
    assert!(page.contains("value=\"approve\""));
    let csrf = field(&page, "csrf");
    let r = b
        .post(
            &format!("{}/review", page_path(&app, "1.1.0")),
            &[
                ("csrf", &csrf),
                ("decision", "approve"),
                ("note", "checked the delete path"),
            ],
        )
        .await;
    assert_eq!(r.status, 303, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(status_of(&app, "1.1.0").await, "approved");
    let (_, page) = b.get(r.header("location").as_deref().unwrap()).await;
    assert!(page.contains("id=\"attestation\""), "{page}");
    let jws = &page[page.find("class=\"jws\">").unwrap() + 12..];
    assert_eq!(jws[..jws.find('<').unwrap()].split('.').count(), 3);
    assert!(page.contains("checked the delete path"));
    // The decision is in the audit log, linked to its version.
    let (status, audit) = b
        .get(&format!(
            "/console/t/{}/audit?kind=version.approved&actor=rita",
            app.tenant
        ))
        .await;
    assert_eq!(status, 200, "{audit}");
    assert!(
        audit.contains(&format!("href=\"{}\"", page_path(&app, "1.1.0"))),
        "{audit}"
    );
    assert!(!audit.contains("carol"), "the actor filter: {audit}");
}

/// SEP-2243: a version whose tool now sends an argument in an
/// `Mcp-Param-*` header (a property gaining `x-mcp-header`) shows it among
/// the escalations at the top, the queue counts it, and the change's
/// schema notes say which header.
#[tokio::test]
async fn a_new_x_mcp_header_is_shown_among_the_escalations_at_the_top() {
    let app = TestApp::new().await;
    publish(&app, "bob", &card("1.0.0", json!([read_tool()]))).await;
    let r = app
        .send(
            "POST",
            &format!("{}/review", api_path(&app, "1.0.0")),
            Some(&app.as_roles("carol", &["reviewer"])),
            Some(json!({"decision": "approve"})),
        )
        .await;
    assert_eq!(r.status, 200);
    let mut mirrored = read_tool();
    mirrored["inputSchema"]["properties"]["path"]["x-mcp-header"] = json!("Path");
    publish(&app, "bob", &card("1.1.0", json!([mirrored]))).await;
    let mut b = Browser::new(&app);
    b.sign_in("rita", "reviewer").await;
    let (_, queue) = b.get(&format!("/console/t/{}/queue", app.tenant)).await;
    assert!(
        queue.contains("<span class=\"chip danger\">1</span>"),
        "one escalation in the queue: {queue}"
    );
    let (status, page) = b.get(&page_path(&app, "1.1.0")).await;
    assert_eq!(status, 200, "{page}");
    let esc = page.find("class=\"escalations\"").expect("escalations");
    assert!(esc < page.find("id=\"tools\"").unwrap());
    let list = &page[esc..esc + page[esc..].find("</ol>").unwrap()];
    assert!(
        list.contains("<code>read_file</code> tool &quot;read_file&quot; now sends argument &quot;path&quot; in HTTP header Mcp-Param-Path"),
        "{list}"
    );
    assert_eq!(list.matches("<li>").count(), 1, "{list}");
    assert!(
        page.contains("path: now sent in HTTP header Mcp-Param-Path"),
        "the schema note: {page}"
    );
    // The API's diff says the same: one rule.
    let r = app
        .get(
            &format!(
                "/v1/tenants/{}/servers/{}/diff?from=1.0.0&to=1.1.0",
                app.tenant,
                enc(SERVER)
            ),
            &app.admin(),
        )
        .await;
    let diff = r.json();
    assert_eq!(diff["classification"], "escalation");
    assert_eq!(diff["changes"][0]["kind"], "mcp_header_added");
    assert_eq!(diff["changes"][0]["class"], "escalation");
}

#[tokio::test]
async fn the_publisher_has_no_approve_button_and_a_forged_approve_is_refused() {
    let app = TestApp::new().await;
    pending_escalation(&app).await;
    let mut b = Browser::new(&app);
    b.sign_in("bob", "publisher+reviewer").await;
    let (_, page) = b.get(&page_path(&app, "1.1.0")).await;
    assert!(!page.contains("value=\"approve\""), "{page}");
    assert!(page.contains("No approve button: </strong>you published this version"));
    assert!(page.contains("value=\"reject\""));
    let csrf = field(&page, "csrf");
    let r = b
        .post(
            &format!("{}/review", page_path(&app, "1.1.0")),
            &[("csrf", &csrf), ("decision", "approve")],
        )
        .await;
    assert_eq!(r.status, 403, "{}", String::from_utf8_lossy(&r.bytes));
    assert!(String::from_utf8_lossy(&r.bytes).contains("publisher of a version cannot approve it"));
    assert_eq!(status_of(&app, "1.1.0").await, "pending");
}

#[tokio::test]
async fn a_post_without_the_csrf_token_or_with_another_sessions_is_refused() {
    let app = TestApp::new().await;
    pending_escalation(&app).await;
    let mut rita = Browser::new(&app);
    rita.sign_in("rita", "reviewer").await;
    let mut ann = Browser::new(&app);
    ann.sign_in("ann", "admin").await;
    let (_, page) = ann.get(&page_path(&app, "1.1.0")).await;
    let anns = field(&page, "csrf");
    let review = format!("{}/review", page_path(&app, "1.1.0"));
    for form in [
        vec![("decision", "approve")],
        vec![("csrf", ""), ("decision", "approve")],
        vec![("csrf", anns.as_str()), ("decision", "approve")],
    ] {
        let r = rita.post(&review, &form).await;
        assert_eq!(r.status, 403, "{form:?}");
        assert!(String::from_utf8_lossy(&r.bytes).contains("CSRF"));
    }
    // Nor without a session at all.
    let mut stranger = Browser::new(&app);
    let r = stranger
        .post(&review, &[("csrf", &anns), ("decision", "approve")])
        .await;
    assert_eq!(r.status, 403);
    let status = format!("{}/status", page_path(&app, "1.1.0"));
    let confirm = format!("{SERVER} 1.1.0");
    let r = rita
        .post(
            &status,
            &[
                ("status", "revoked"),
                ("reason", "x"),
                ("confirm", &confirm),
            ],
        )
        .await;
    assert_eq!(r.status, 403);
    let r = rita
        .post(
            &format!("/console/t/{}/sign-out", app.tenant),
            &[("csrf", &anns)],
        )
        .await;
    assert_eq!(r.status, 403, "sign-out needs the token too");
    assert_eq!(status_of(&app, "1.1.0").await, "pending");
    // The sign-in forms double-submit their own token.
    let r = stranger
        .post(
            &format!("/console/t/{}/sign-in/dev", app.tenant),
            &[("token", "forged"), ("as", "mallory:admin")],
        )
        .await;
    assert_eq!(r.status, 403);
    assert!(!stranger.cookies.contains_key("pinfold_console"));
}

#[tokio::test]
async fn every_page_carries_the_csp_and_no_script_and_descriptions_render_as_text() {
    let app = TestApp::new().await;
    publish(
        &app,
        "bob",
        &card(
            "1.0.0",
            json!([{"name": "evil", "description": "<script>alert(1)</script>",
                "inputSchema": {"type": "object"}}]),
        ),
    )
    .await;
    let mut b = Browser::new(&app);
    b.sign_in("ann", "admin").await;
    let t = app.tenant.to_string();
    for path in [
        "/console".to_owned(),
        format!("/console/t/{t}/sign-in"),
        format!("/console/t/{t}/queue"),
        page_path(&app, "1.0.0"),
        format!("/console/t/{t}/audit"),
        format!("/console/t/{t}/ledger"),
        format!("/console/t/{t}/servers/nope/versions/1.0.0"),
    ] {
        let (status, html) = b.get(&path).await;
        assert!(status == 200 || status == 404, "{path}: {status}");
        assert!(!html.contains("<script"), "{path}: {html}");
        assert!(html.starts_with("<!DOCTYPE html>"), "{path}");
    }
    let (_, page) = b.get(&page_path(&app, "1.0.0")).await;
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{page}"
    );
    let r = b.request("GET", "/console/static/console.css", None).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("x-content-type-options").as_deref(),
        Some("nosniff")
    );
}

#[tokio::test]
async fn another_tenants_console_urls_answer_404() {
    let app = TestApp::new().await;
    pending_escalation(&app).await;
    let other = app.new_tenant().await;
    let mut b = Browser::new(&app);
    b.sign_in_to(other.as_str(), "olga", "admin").await;
    // Olga's session is of the other tenant: this tenant's pages are 404.
    for path in [
        format!("/console/t/{}/queue", app.tenant),
        page_path(&app, "1.1.0"),
        format!("/console/t/{}/audit", app.tenant),
    ] {
        let (status, _) = b.get(&path).await;
        assert_eq!(status, 404, "{path}");
    }
    // And her own tenant has no such server.
    let (status, _) = b
        .get(&format!(
            "/console/t/{other}/servers/{}/versions/1.1.0",
            enc(SERVER)
        ))
        .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn sign_out_ends_the_session_on_the_server() {
    let app = TestApp::new().await;
    let mut b = Browser::new(&app);
    b.sign_in("rita", "reviewer").await;
    let kept = b.cookies.get("pinfold_console").cloned().unwrap();
    let (_, queue) = b.get(&format!("/console/t/{}/queue", app.tenant)).await;
    let csrf = field(&queue, "csrf");
    let r = b
        .post(
            &format!("/console/t/{}/sign-out", app.tenant),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(r.status, 303);
    assert!(!b.cookies.contains_key("pinfold_console"));
    // The old cookie replayed: the session is gone, whatever the browser kept.
    b.cookies.insert("pinfold_console".into(), kept);
    let r = b
        .request("GET", &format!("/console/t/{}/queue", app.tenant), None)
        .await;
    assert_eq!(r.status, 303);
    assert!(r.header("location").unwrap().ends_with("/sign-in"));
}

#[tokio::test]
async fn a_session_holds_only_the_roles_of_its_token() {
    let app = TestApp::new().await;
    pending_escalation(&app).await;
    let mut b = Browser::new(&app);
    b.sign_in("rhea", "reader").await;
    let (status, page) = b.get(&page_path(&app, "1.1.0")).await;
    assert_eq!(status, 200);
    assert!(!page.contains("value=\"approve\"") && !page.contains("value=\"reject\""));
    assert!(page.contains("include neither reviewer nor admin"));
    let csrf = field(&page, "csrf");
    let r = b
        .post(
            &format!("{}/review", page_path(&app, "1.1.0")),
            &[("csrf", &csrf), ("decision", "approve")],
        )
        .await;
    assert_eq!(r.status, 403);
    assert_eq!(status_of(&app, "1.1.0").await, "pending");
    let (status, _) = b.get(&format!("/console/t/{}/audit", app.tenant)).await;
    assert_eq!(
        status, 403,
        "the audit log needs admin or reviewer, as in the API"
    );
    // A token holding no tenant role opens no session.
    let mut p = Browser::new(&app);
    let (_, html) = p.get(&format!("/console/t/{}/sign-in", app.tenant)).await;
    let token = field(&html, "token");
    let r = p
        .post(
            &format!("/console/t/{}/sign-in/dev", app.tenant),
            &[("token", &token), ("as", "pat:platform")],
        )
        .await;
    assert_eq!(r.status, 403);
}

#[tokio::test]
async fn revoking_needs_a_confirmation_naming_the_server_and_version() {
    let app = TestApp::new().await;
    pending_escalation(&app).await;
    let mut b = Browser::new(&app);
    b.sign_in("ann", "admin").await;
    let (_, page) = b.get(&page_path(&app, "1.0.0")).await;
    assert!(
        page.contains(&format!("value=\"{SERVER} 1.0.0\" required")),
        "{page}"
    );
    let csrf = field(&page, "csrf");
    let path = format!("{}/status", page_path(&app, "1.0.0"));
    let r = b
        .post(
            &path,
            &[
                ("csrf", &csrf),
                ("status", "revoked"),
                ("reason", "leaked"),
                ("confirm", "yes"),
            ],
        )
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(status_of(&app, "1.0.0").await, "approved");
    let confirm = format!("{SERVER} 1.0.0");
    let r = b
        .post(
            &path,
            &[
                ("csrf", &csrf),
                ("status", "revoked"),
                ("reason", "  "),
                ("confirm", &confirm),
            ],
        )
        .await;
    assert_eq!(r.status, 422, "a reason is required, as in the API");
    let r = b
        .post(
            &path,
            &[
                ("csrf", &csrf),
                ("status", "revoked"),
                ("reason", "leaked"),
                ("confirm", &confirm),
            ],
        )
        .await;
    assert_eq!(r.status, 303, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(status_of(&app, "1.0.0").await, "revoked");
}

/// The tenant the identity provider's claim rules map its users into.
const OIDC_TENANT: &str = "console-oidc";
/// The audience of the access tokens the provider issues the console.
const OIDC_AUDIENCE: &str = "https://pinfold.test";
/// Where the provider sends the browser back.
const OIDC_REDIRECT: &str = "http://127.0.0.1:9/console/callback";

/// Publishes `doc` in the OIDC tenant as `who` (a token of the test issuer).
async fn publish_in(app: &TestApp, tenant: &str, who: &str, roles: &[&str], doc: &Value) -> Resp {
    let version = doc["version"].as_str().unwrap();
    app.send(
        "PUT",
        &format!(
            "/v1/tenants/{tenant}/servers/{}/versions/{version}",
            enc(SERVER)
        ),
        Some(&token(who, Some(tenant), roles)),
        Some(doc.clone()),
    )
    .await
}

impl Browser<'_> {
    /// Signs in to `tenant` through the identity provider as `user`
    /// (its login and consent pages included).
    async fn sign_in_with_provider(&mut self, tenant: &str, user: &str) {
        let (status, html) = self.get(&format!("/console/t/{tenant}/sign-in")).await;
        assert_eq!(status, 200, "{html}");
        assert!(html.contains("Sign in with Test IdP"), "{html}");
        let token = field(&html, "token");
        let r = self
            .post(
                &format!("/console/t/{tenant}/sign-in/oidc"),
                &[("token", &token)],
            )
            .await;
        assert_eq!(r.status, 303, "{}", String::from_utf8_lossy(&r.bytes));
        let authorize = r.header("location").unwrap();
        assert!(
            authorize.contains("code_challenge_method=S256"),
            "{authorize}"
        );
        let back = crate::scope_oidc::browse_to(&authorize, user, OIDC_REDIRECT).await;
        let query = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(back.iter())
            .finish();
        let r = self
            .request("GET", &format!("/console/callback?{query}"), None)
            .await;
        assert_eq!(r.status, 303, "{}", String::from_utf8_lossy(&r.bytes));
        assert_eq!(
            r.header("location").unwrap(),
            format!("/console/t/{tenant}/queue")
        );
        assert!(self.cookies.contains_key("pinfold_console"));
    }
}

#[tokio::test]
async fn sign_in_through_the_real_identity_provider_then_review_and_sign_out() {
    let Some(provider) = crate::scope_oidc::start_with(&[
        "--console-redirect",
        OIDC_REDIRECT,
        "--console-resource",
        OIDC_AUDIENCE,
    ]) else {
        return;
    };
    let rule = |sub: &str, roles: &[&str]| {
        pinfold_http::auth::ClaimRule::new(
            [("sub", sub)],
            OIDC_TENANT,
            &roles.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
        )
        .unwrap()
    };
    let mut issuers = test_issuers();
    issuers.push(pinfold_http::auth::IssuerConfig {
        issuer: provider.issuer.clone(),
        audience: OIDC_AUDIENCE.into(),
        algorithms: vec![jsonwebtoken::Algorithm::RS256],
        keys: pinfold_http::auth::KeySource::Jwks {
            url: format!("{}/jwks", provider.issuer),
            min_refetch: std::time::Duration::from_secs(1),
        },
        mapping: pinfold_http::auth::ClaimMapping::Rules(vec![
            rule("rita", &["reviewer"]),
            rule("bob", &["publisher", "reviewer"]),
        ]),
    });
    let issuer = provider.issuer.clone();
    let app = TestApp::build(issuers, move |cfg| {
        cfg.public_url = "http://127.0.0.1:9".into();
        cfg.console.oidc = Some(pinfold_server::config::ConsoleOidcSettings {
            name: "Test IdP".into(),
            issuer,
            client_id: "pinfold-console".into(),
            client_secret: Some("pinfold-console-test-secret-0123456789".into()),
            client_secret_file: None,
            scopes: vec!["openid".into(), "pinfold".into()],
            resource: Some(OIDC_AUDIENCE.into()),
        });
    })
    .await;
    let r = app
        .send(
            "POST",
            "/v1/tenants",
            Some(&app.platform()),
            Some(json!({"id": OIDC_TENANT, "name": "Console"})),
        )
        .await;
    assert_eq!(r.status, 201);
    let t = OIDC_TENANT;
    let r = publish_in(
        &app,
        t,
        "bob",
        &["publisher"],
        &card("1.0.0", json!([read_tool()])),
    )
    .await;
    assert_eq!(r.status, 201);
    let r = app
        .send(
            "POST",
            &format!(
                "/v1/tenants/{t}/servers/{}/versions/1.0.0/review",
                enc(SERVER)
            ),
            Some(&token("carol", Some(t), &["reviewer"])),
            Some(json!({"decision": "approve"})),
        )
        .await;
    assert_eq!(r.status, 200);
    let doc = card("1.1.0", json!([read_or_delete_tool()]));
    assert_eq!(
        publish_in(&app, t, "bob", &["publisher"], &doc)
            .await
            .status,
        201
    );
    let page = format!("/console/t/{t}/servers/{}/versions/1.1.0", enc(SERVER));

    // Rita, a reviewer at the provider, approves.
    let mut rita = Browser::new(&app);
    rita.sign_in_with_provider(t, "rita").await;
    let (_, html) = rita.get(&page).await;
    assert!(
        html.contains("Signed in as <strong>rita</strong> (reviewer)"),
        "{html}"
    );
    let esc = html
        .find("class=\"escalations\"")
        .expect("the escalation on top");
    assert!(esc < html.find("id=\"tools\"").unwrap());
    let csrf = field(&html, "csrf");
    let r = rita
        .post(
            &format!("{page}/review"),
            &[("csrf", &csrf), ("decision", "approve")],
        )
        .await;
    assert_eq!(r.status, 303, "{}", String::from_utf8_lossy(&r.bytes));
    let (_, html) = rita.get(&page).await;
    assert!(html.contains("id=\"attestation\""), "{html}");

    // Bob published 1.2.0: he sees no approve button, and a forged one fails.
    let doc = card(
        "1.2.0",
        json!([read_or_delete_tool(), read_tool_named("stat")]),
    );
    assert_eq!(
        publish_in(&app, t, "bob", &["publisher"], &doc)
            .await
            .status,
        201
    );
    let mut bob = Browser::new(&app);
    bob.sign_in_with_provider(t, "bob").await;
    let page = format!("/console/t/{t}/servers/{}/versions/1.2.0", enc(SERVER));
    let (_, html) = bob.get(&page).await;
    assert!(!html.contains("value=\"approve\""), "{html}");
    assert!(html.contains("you published this version"));
    let csrf = field(&html, "csrf");
    let r = bob
        .post(
            &format!("{page}/review"),
            &[("csrf", &csrf), ("decision", "approve")],
        )
        .await;
    assert_eq!(r.status, 403);

    // Signing out ends the session.
    let r = bob
        .post(&format!("/console/t/{t}/sign-out"), &[("csrf", &csrf)])
        .await;
    assert_eq!(r.status, 303);
    let r = bob.request("GET", &page, None).await;
    assert_eq!(r.status, 303);

    // A callback whose state is not the browser's opens nothing.
    let mut eve = Browser::new(&app);
    let (_, html) = eve.get(&format!("/console/t/{t}/sign-in")).await;
    let token = field(&html, "token");
    eve.post(
        &format!("/console/t/{t}/sign-in/oidc"),
        &[("token", &token)],
    )
    .await;
    let r = eve
        .request("GET", "/console/callback?code=x&state=forged", None)
        .await;
    assert_eq!(r.status, 403);
    assert!(!eve.cookies.contains_key("pinfold_console"));
}

fn read_tool_named(name: &str) -> Value {
    let mut t = read_tool();
    t["name"] = json!(name);
    t
}

/// The hashes of every console session row of `tenant`, expired or not,
/// read past the store (as the owner on PostgreSQL).
async fn session_rows(app: &TestApp, tenant: &str) -> Vec<String> {
    match &app.store {
        pinfold_server::store::Store::Sqlite(s) => sqlx::query_scalar(
            "SELECT id_hash FROM console_sessions WHERE tenant_id = ? ORDER BY id_hash",
        )
        .bind(tenant)
        .fetch_all(s.pool())
        .await
        .unwrap(),
        pinfold_server::store::Store::Postgres(_) => sqlx::query_scalar(
            "SELECT id_hash FROM console_sessions WHERE tenant_id = $1 ORDER BY id_hash",
        )
        .bind(tenant)
        .fetch_all(&app.owner_pool().await.unwrap())
        .await
        .unwrap(),
    }
}

/// The server's background purge deletes expired console sessions of every
/// tenant without anyone signing in (on PostgreSQL as the runtime role,
/// under the purge binding row-level security admits), and leaves live
/// ones.
#[tokio::test]
async fn expired_console_sessions_are_purged_without_a_sign_in() {
    let app = TestApp::new().await;
    let other = app.new_tenant().await;
    let sessions = app.store.console();
    let at = |ms: i64| pinfold_core::ids::Timestamp::from_millis(ms);
    let now_ms = i64::try_from(now()).unwrap() * 1000;
    let session = |hash: char, expires: i64| pinfold_console::ConsoleSession {
        id_hash: std::iter::repeat_n(hash, 64).collect(),
        subject: "rita".into(),
        issuer: "https://issuer.test".into(),
        roles: "reviewer".into(),
        created_at: at(now_ms - 7_200_000),
        expires_at: at(expires),
    };
    let (expired, live, elsewhere) = (
        session('a', now_ms - 60_000),
        session('b', now_ms + 3_600_000),
        session('c', now_ms - 1),
    );
    for (tenant, s) in [
        (&app.tenant, &expired),
        (&app.tenant, &live),
        (&other, &elsewhere),
    ] {
        sessions.insert_console_session(tenant, s).await.unwrap();
    }
    assert_eq!(
        session_rows(&app, app.tenant.as_str()).await,
        [expired.id_hash.clone(), live.id_hash.clone()]
    );
    assert_eq!(session_rows(&app, other.as_str()).await.len(), 1);
    let purge = pinfold_server::console_wiring::spawn_session_purge(
        &app.store,
        std::time::Duration::from_millis(50),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let mine = session_rows(&app, app.tenant.as_str()).await;
        let theirs = session_rows(&app, other.as_str()).await;
        if mine == [live.id_hash.clone()] && theirs.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not purged: {mine:?} {theirs:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    purge.abort();
    // The live session still opens.
    assert!(
        sessions
            .console_session(&app.tenant, &live.id_hash, at(now_ms))
            .await
            .unwrap()
            .is_some()
    );
}

/// The console's requests are charged to a rate-limit class of their own
/// (`console`): past its burst a page or form answers 429 with
/// `Retry-After` and does nothing, while the API's `reads` keep their own
/// tokens, and the other way round.
#[tokio::test]
async fn console_requests_have_a_rate_limit_class_that_does_not_eat_the_apis() {
    let app = TestApp::build(test_issuers(), |c| {
        c.rate_limits.enabled = true;
        let tight = |tenant_burst| pinfold_server::config::ClassLimits {
            tenant_rate: 1.0,
            tenant_burst,
            principal_rate: 1.0,
            principal_burst: 100,
        };
        c.rate_limits.console = tight(3);
        c.rate_limits.reads = tight(3);
    })
    .await;
    let limiter = app.rate_limiter.clone().expect("limits are on");
    // Published and approved through the API (publish has its own class;
    // the review is `reads`).
    pending_escalation(&app).await;
    let mut b = Browser::new(&app);
    // Signing in is not charged: no caller is known yet.
    b.sign_in("rita", "reviewer").await;
    let queue = format!("/console/t/{}/queue", app.tenant);
    let mut csrf = String::new();
    for i in 0..3 {
        let (status, html) = b.get(&queue).await;
        assert_eq!(status, 200, "request {i}: {html}");
        csrf = field(&html, "csrf");
    }
    let r = b.request("GET", &queue, None).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after").as_deref(), Some("1"));
    assert!(String::from_utf8_lossy(&r.bytes).contains("rate limit is reached"));
    // A form over the limit changes nothing.
    let r = b
        .post(
            &format!("{}/review", page_path(&app, "1.1.0")),
            &[("csrf", &csrf), ("decision", "approve")],
        )
        .await;
    assert_eq!(r.status, 429);
    // The API's reads are untouched by the console's refusals: of their 3
    // tokens, one went to the review above, one goes to this status read
    // and one to the first listing.
    assert_eq!(status_of(&app, "1.1.0").await, "pending");
    let servers = format!("/v1/tenants/{}/servers", app.tenant);
    assert_eq!(app.get(&servers, &app.admin()).await.status, 200);
    let body = app
        .get(&servers, &app.admin())
        .await
        .problem(429, "rate_limited");
    assert_eq!(body["class"], "reads");
    // Once a second has passed each class has one token again: the API's
    // exhaustion did not spend the console's.
    limiter.clock().advance(std::time::Duration::from_secs(1));
    let (status, _) = b.get(&queue).await;
    assert_eq!(status, 200);
    assert_eq!(b.request("GET", &queue, None).await.status, 429);
    assert_eq!(app.get(&servers, &app.admin()).await.status, 200);
    let r = app.send("GET", "/metrics", None, None).await;
    let text = String::from_utf8(r.bytes).unwrap();
    assert!(
        text.contains("pinfold_rate_limited_total{class=\"console\",scope=\"tenant\"} 3"),
        "{text}"
    );
    assert!(text.contains("pinfold_rate_limited_total{class=\"reads\",scope=\"tenant\"} 1"));
}
