//! Every way a bearer token can be wrong is a 401 problem with a
//! `WWW-Authenticate: Bearer` challenge; missing roles are 403; another
//! tenant's paths are 404.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair as _};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use pinfold_http::auth::{ClaimMapping, IssuerConfig, KeySource};
use pinfold_tests::*;
use serde_json::{Value, json};

fn path(app: &TestApp) -> String {
    format!("/v1/tenants/{}", app.tenant)
}

#[track_caller]
fn assert_rejected(r: &Resp, why: &str) {
    let body = r.problem(401, "invalid_token");
    let challenge = r.header("www-authenticate").expect("WWW-Authenticate");
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
    assert!(
        body["detail"].as_str().unwrap().contains(why),
        "expected {why:?} in {}",
        body["detail"]
    );
}

async fn check(app: &TestApp, token: &str, why: &str) {
    let r = app.get(&path(app), token).await;
    assert_rejected(&r, why);
}

fn good_claims(app: &TestApp) -> Value {
    claims("alice", Some(app.tenant.as_str()), &["admin"])
}

fn ed_header() -> Value {
    json!({"alg": "EdDSA", "typ": "JWT"})
}

#[tokio::test]
async fn a_valid_token_is_accepted_and_cached() {
    let app = TestApp::new().await;
    let t = app.admin();
    assert_eq!(app.get(&path(&app), &t).await.status, 200);
    assert_eq!(app.get(&path(&app), &t).await.status, 200);
    let hs = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &json!({"iss": HS_ISSUER, "aud": AUDIENCE, "sub": "bob", "tenant": app.tenant.as_str(), "roles": ["reader"], "exp": now() + 60}),
        &EncodingKey::from_secret(HS_SECRET.as_bytes()),
    )
    .unwrap();
    assert_eq!(app.get(&path(&app), &hs).await.status, 200);
}

#[tokio::test]
async fn missing_token_is_401_with_a_bare_challenge() {
    let app = TestApp::new().await;
    let r = app.send("GET", &path(&app), None, None).await;
    r.problem(401, "unauthenticated");
    // Bare: no error, only the realm and where Pinfold's RFC 9728 metadata is.
    assert_eq!(
        r.header("www-authenticate").as_deref(),
        Some(
            "Bearer realm=\"pinfold\", resource_metadata=\"http://localhost/.well-known/oauth-protected-resource\""
        )
    );
    // Another scheme is the same as no bearer token.
    let r = app
        .send_raw(
            "GET",
            &path(&app),
            None,
            None,
            &[("authorization", "Basic YTpi")],
        )
        .await;
    r.problem(401, "unauthenticated");
}

#[tokio::test]
async fn tokens_in_query_strings_are_ignored() {
    let app = TestApp::new().await;
    let t = app.admin();
    let r = app
        .send(
            "GET",
            &format!("{}?access_token={t}", path(&app)),
            None,
            None,
        )
        .await;
    r.problem(401, "unauthenticated");
}

#[tokio::test]
async fn bad_signature() {
    let app = TestApp::new().await;
    let t = app.admin();
    let (rest, sig) = t.rsplit_once('.').unwrap();
    let mut sig = sig.as_bytes().to_vec();
    sig[5] = if sig[5] == b'A' { b'B' } else { b'A' };
    check(
        &app,
        &format!("{rest}.{}", String::from_utf8(sig).unwrap()),
        "bad signature",
    )
    .await;
    // A token signed by another Ed25519 key.
    let other = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
    let forged = jsonwebtoken::encode(
        &Header::new(Algorithm::EdDSA),
        &good_claims(&app),
        &EncodingKey::from_ed_der(other.as_ref()),
    )
    .unwrap();
    check(&app, &forged, "bad signature").await;
}

#[tokio::test]
async fn alg_none_is_refused() {
    let app = TestApp::new().await;
    let input = format!(
        "{}.{}.",
        b64(br#"{"alg":"none","typ":"JWT"}"#),
        b64(good_claims(&app).to_string().as_bytes())
    );
    check(&app, &input, "unsupported algorithm").await;
}

#[tokio::test]
async fn hs_with_the_public_key_as_secret_is_refused() {
    // The classic confusion attack: sign HS256 with the issuer's public key.
    let app = TestApp::new().await;
    let forged = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &good_claims(&app),
        &EncodingKey::from_secret(&test_key().public),
    )
    .unwrap();
    check(&app, &forged, "algorithm not allowed").await;
    // And an RS256 header on the EdDSA issuer.
    let rs = sign_raw(&json!({"alg": "RS256", "typ": "JWT"}), &good_claims(&app));
    check(&app, &rs, "algorithm not allowed").await;
}

#[tokio::test]
async fn algorithm_outside_the_allow_list() {
    let app = TestApp::new().await;
    let hs512 = jsonwebtoken::encode(
        &Header::new(Algorithm::HS512),
        &json!({"iss": HS_ISSUER, "aud": AUDIENCE, "sub": "bob", "tenant": app.tenant.as_str(), "roles": ["reader"], "exp": now() + 60}),
        &EncodingKey::from_secret(HS_SECRET.as_bytes()),
    )
    .unwrap();
    check(&app, &hs512, "algorithm not allowed").await;
}

#[tokio::test]
async fn wrong_issuer_and_audience() {
    let app = TestApp::new().await;
    let mut c = good_claims(&app);
    c["iss"] = json!("https://evil.test");
    check(&app, &sign_raw(&ed_header(), &c), "untrusted issuer").await;
    let mut c = good_claims(&app);
    c["aud"] = json!("someone-else");
    check(&app, &sign_raw(&ed_header(), &c), "wrong audience").await;
    let mut c = good_claims(&app);
    c["aud"] = json!(["someone-else", "another"]);
    check(&app, &sign_raw(&ed_header(), &c), "wrong audience").await;
}

#[tokio::test]
async fn each_required_claim_must_be_present() {
    let app = TestApp::new().await;
    for claim in ["exp", "aud", "sub"] {
        let mut c = good_claims(&app);
        c.as_object_mut().unwrap().remove(claim);
        check(
            &app,
            &sign_raw(&ed_header(), &c),
            &format!("missing required claim {claim}"),
        )
        .await;
    }
    let mut c = good_claims(&app);
    c.as_object_mut().unwrap().remove("iss");
    check(
        &app,
        &sign_raw(&ed_header(), &c),
        "missing required claim iss",
    )
    .await;
}

#[tokio::test]
async fn exp_and_nbf_of_the_wrong_type() {
    let app = TestApp::new().await;
    let mut c = good_claims(&app);
    c["exp"] = json!((now() + 600).to_string());
    check(&app, &sign_raw(&ed_header(), &c), "exp").await;
    let mut c = good_claims(&app);
    c["nbf"] = json!("yesterday");
    check(
        &app,
        &sign_raw(&ed_header(), &c),
        "claim nbf has the wrong type",
    )
    .await;
    let mut c = good_claims(&app);
    c["iss"] = json!(42);
    check(
        &app,
        &sign_raw(&ed_header(), &c),
        "claim iss must be a string",
    )
    .await;
}

#[tokio::test]
async fn expired_and_not_yet_valid() {
    let app = TestApp::new().await;
    let mut c = good_claims(&app);
    c["exp"] = json!(now() - 120);
    check(&app, &sign_raw(&ed_header(), &c), "token expired").await;
    let mut c = good_claims(&app);
    c["nbf"] = json!(now() + 600);
    check(&app, &sign_raw(&ed_header(), &c), "not valid yet").await;
    // Within the leeway (30 s) is still fine.
    let mut c = good_claims(&app);
    c["exp"] = json!(now() - 5);
    assert_eq!(
        app.get(&path(&app), &sign_raw(&ed_header(), &c))
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn garbage_and_wrong_segment_counts() {
    let app = TestApp::new().await;
    check(&app, "garbage", "three segments").await;
    check(&app, "a.b", "three segments").await;
    check(&app, "a.b.c.d", "three segments").await;
    let t = app.admin();
    check(&app, &format!("{t}.extra"), "three segments").await;
    check(&app, "a.b.c", "malformed token header").await;
    let body_not_json = format!(
        "{}.{}.{}",
        b64(br#"{"alg":"EdDSA"}"#),
        b64(b"not json"),
        b64(b"sig")
    );
    check(&app, &body_not_json, "payload is not JSON").await;
}

#[tokio::test]
async fn a_16_kib_authorization_header_is_refused() {
    let app = TestApp::new().await;
    let big = "a".repeat(16 * 1024);
    check(&app, &big, "too large").await;
}

#[tokio::test]
async fn roles_are_enforced_with_403() {
    let app = TestApp::new().await;
    // A reader may read but not write the policy.
    let reader = app.as_roles("rita", &["reader"]);
    assert_eq!(
        app.get(&format!("{}/policy", path(&app)), &reader)
            .await
            .status,
        200
    );
    let r = app
        .send(
            "PUT",
            &format!("{}/policy", path(&app)),
            Some(&reader),
            Some(json!({"enforcement_mode": "strict", "approval_required": true})),
        )
        .await;
    r.problem(403, "forbidden_role");
    // A token with no roles at all cannot read.
    let none = app.as_roles("nobody", &[]);
    app.get(&path(&app), &none)
        .await
        .problem(403, "forbidden_role");
    // Only platform tokens create tenants.
    let r = app
        .send(
            "POST",
            "/v1/tenants",
            Some(&app.admin()),
            Some(json!({"id": "new-one", "name": "x"})),
        )
        .await;
    r.problem(403, "forbidden_role");
}

#[tokio::test]
async fn invalid_tenant_claim_is_refused() {
    let app = TestApp::new().await;
    let c = claims("x", Some("NOT VALID"), &["admin"]);
    check(&app, &sign_raw(&ed_header(), &c), "claim tenant").await;
}

#[tokio::test]
async fn embedded_jwk_and_jku_headers_are_never_followed() {
    // A JWKS server that counts every request it receives.
    let hits = Arc::new(AtomicUsize::new(0));
    let (addr, _jwks_task) = jwks_server(hits.clone(), json!({"keys": []})).await;
    let app = TestApp::new().await;
    let attacker = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
    let attacker_pub = Ed25519KeyPair::from_pkcs8(attacker.as_ref()).unwrap();
    let header = json!({
        "alg": "EdDSA", "typ": "JWT",
        "jku": format!("http://{addr}/jwks.json"),
        "x5u": format!("http://{addr}/cert.pem"),
        "jwk": {"kty": "OKP", "crv": "Ed25519", "x": b64(attacker_pub.public_key().as_ref())},
    });
    let input = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(good_claims(&app).to_string().as_bytes())
    );
    let sig = attacker_pub.sign(input.as_bytes());
    let forged = format!("{input}.{}", b64(sig.as_ref()));
    let r = app.get(&path(&app), &forged).await;
    r.problem(401, "invalid_token");
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "jku/x5u must never be fetched"
    );
}

async fn jwks_server(
    hits: Arc<AtomicUsize>,
    initial: Value,
) -> (std::net::SocketAddr, Arc<tokio::sync::Mutex<Value>>) {
    let doc = Arc::new(tokio::sync::Mutex::new(initial));
    let d = doc.clone();
    let app = axum::Router::new().fallback(move || {
        let hits = hits.clone();
        let d = d.clone();
        async move {
            hits.fetch_add(1, Ordering::SeqCst);
            axum::Json(d.lock().await.clone())
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, doc)
}

fn ed_jwk(kid: &str, public: &[u8]) -> Value {
    json!({"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig", "kid": kid, "x": b64(public)})
}

const JWKS_ISSUER: &str = "https://oidc.test";

fn jwks_issuer(addr: std::net::SocketAddr, min_refetch: Duration) -> Vec<IssuerConfig> {
    let mut v = test_issuers();
    v.push(IssuerConfig {
        issuer: JWKS_ISSUER.into(),
        audience: AUDIENCE.into(),
        algorithms: vec![Algorithm::EdDSA],
        keys: KeySource::Jwks {
            url: format!("http://{addr}/jwks.json"),
            min_refetch,
        },
        mapping: ClaimMapping::FromToken,
    });
    v
}

fn kid_token(app: &TestApp, kid: &str, pkcs8: &[u8]) -> String {
    let mut c = good_claims(app);
    c["iss"] = json!(JWKS_ISSUER);
    let mut h = Header::new(Algorithm::EdDSA);
    h.kid = Some(kid.into());
    jsonwebtoken::encode(&h, &c, &EncodingKey::from_ed_der(pkcs8)).unwrap()
}

#[tokio::test]
async fn jwks_keys_by_kid_and_unknown_kids_refetch_at_most_once_a_minute() {
    let k1 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
    let k1_pub = Ed25519KeyPair::from_pkcs8(k1.as_ref())
        .unwrap()
        .public_key()
        .as_ref()
        .to_vec();
    let hits = Arc::new(AtomicUsize::new(0));
    let (addr, _doc) = jwks_server(hits.clone(), json!({"keys": [ed_jwk("k1", &k1_pub)]})).await;
    let app = TestApp::with_issuers(jwks_issuer(addr, Duration::from_secs(60))).await;

    // A good token: one fetch, then served from the key cache.
    let good = kid_token(&app, "k1", k1.as_ref());
    assert_eq!(app.get(&path(&app), &good).await.status, 200);
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    // A flood of unknown kids inside the minute causes no further fetch.
    for i in 0..10 {
        let t = kid_token(&app, &format!("unknown-{i}"), k1.as_ref());
        assert_rejected(&app.get(&path(&app), &t).await, "unknown key id");
    }
    assert_eq!(
        hits.load(Ordering::SeqCst),
        1,
        "at most one JWKS fetch per minute"
    );
    assert_eq!(app.authn.jwks_fetches(JWKS_ISSUER).await, 1);

    // A token without kid on a JWKS issuer is refused.
    let mut c = good_claims(&app);
    c["iss"] = json!(JWKS_ISSUER);
    let no_kid = jsonwebtoken::encode(
        &Header::new(Algorithm::EdDSA),
        &c,
        &EncodingKey::from_ed_der(k1.as_ref()),
    )
    .unwrap();
    assert_rejected(&app.get(&path(&app), &no_kid).await, "no kid");
}

#[tokio::test]
async fn jwks_rotation_is_picked_up_on_an_unknown_kid() {
    let k1 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
    let k1_pub = Ed25519KeyPair::from_pkcs8(k1.as_ref())
        .unwrap()
        .public_key()
        .as_ref()
        .to_vec();
    let k2 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
    let k2_pub = Ed25519KeyPair::from_pkcs8(k2.as_ref())
        .unwrap()
        .public_key()
        .as_ref()
        .to_vec();
    let hits = Arc::new(AtomicUsize::new(0));
    let (addr, doc) = jwks_server(hits.clone(), json!({"keys": [ed_jwk("k1", &k1_pub)]})).await;
    let app = TestApp::with_issuers(jwks_issuer(addr, Duration::ZERO)).await;
    assert_eq!(
        app.get(&path(&app), &kid_token(&app, "k1", k1.as_ref()))
            .await
            .status,
        200
    );
    // The provider rotates to k2.
    *doc.lock().await = json!({"keys": [ed_jwk("k1", &k1_pub), ed_jwk("k2", &k2_pub)]});
    assert_eq!(
        app.get(&path(&app), &kid_token(&app, "k2", k2.as_ref()))
            .await
            .status,
        200
    );
    assert_eq!(hits.load(Ordering::SeqCst), 2);
    // A key published under k2 does not verify a token claiming k1.
    let wrong = kid_token(&app, "k1", k2.as_ref());
    assert_rejected(&app.get(&path(&app), &wrong).await, "bad signature");
}

#[tokio::test]
async fn roles_and_tenant_claims_of_the_wrong_type() {
    let app = TestApp::new().await;
    let mut c = good_claims(&app);
    c["roles"] = json!("admin");
    check(&app, &sign_raw(&ed_header(), &c), "claim roles").await;
    let mut c = good_claims(&app);
    c["tenant"] = json!(["a"]);
    check(&app, &sign_raw(&ed_header(), &c), "claim tenant").await;
    let mut c = good_claims(&app);
    c["sub"] = json!("");
    check(&app, &sign_raw(&ed_header(), &c), "claim sub").await;
    // Unknown roles are ignored, known ones still count.
    let mut c = good_claims(&app);
    c["roles"] = json!(["superuser", "reader"]);
    assert_eq!(
        app.get(&path(&app), &sign_raw(&ed_header(), &c))
            .await
            .status,
        200
    );
}
