//! Encryption keys and their rotation, on the backend under test: every
//! stored secret (attestation keys, upstream headers of sessions and of
//! guard routes, client secrets, PKCE verifiers) keeps working while the key rotates, `pinfold keys reseal`
//! moves them all under the new key (in batches, idempotently, under
//! PostgreSQL row-level security as the runtime role), and once the old key
//! is gone, what was re-sealed still works and what was not does not.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::post;
use base64::Engine as _;
use pinfold_core::ids::TenantId;
use pinfold_example_upstream::{Running, Switches};
use pinfold_registry::keys::{KeyError, Keyring, key_id_of};
use pinfold_server::reseal::{Counts, ResealOptions, Summary, reseal};
use pinfold_store_rows::{Replacement, SealedColumn};
use pinfold_tests::*;
use serde_json::{Value, json};
use sha2::Digest as _;

use crate::scope_grants::profile;

const CARD: &str = include_str!("../../../examples/manage-files-1.0.0.json");
/// The header every MCP request to the test upstream must carry.
const UPSTREAM_HEADER: &str = "X-Upstream-Key";
const UPSTREAM_SECRET: &str = "upstream-secret-for-rotation";
/// The tenant holding a value sealed before key ids existed.
const LEGACY_TENANT: &str = "legacy-keys";
/// Its provider, and that provider's client secret.
const LEGACY_PROVIDER: &str = "legacy-idp";
const LEGACY_CLIENT_SECRET: &str = "legacy-client-secret-0123456789";
/// [`LEGACY_CLIENT_SECRET`] as the code before key ids sealed it with
/// [`key_1`] for tenant [`LEGACY_TENANT`] and provider
/// [`LEGACY_PROVIDER`] (`seal_bound(tenant, "provider:legacy-idp", ...)`).
const LEGACY_SEALED_SECRET: &str =
    "1EBloUgbONd2vBArrxIpJUFTK50HATG9eLvHfoQtp9qQsh6flfCY_5D_wqwm6eZ39ft9Bnixpz-ldWs";

/// The first encryption key (the one [`LEGACY_SEALED_SECRET`] was sealed
/// with).
fn key_1() -> String {
    base64::engine::general_purpose::STANDARD.encode([0x11u8; 32])
}

fn server() -> String {
    serde_json::from_str::<Value>(CARD).unwrap()["name"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn version_path(t: &TenantId) -> String {
    format!(
        "/v1/tenants/{t}/servers/{}/versions/1.0.0",
        server().replace('/', "%2F")
    )
}

fn client_of(t: &TenantId) -> String {
    token("carl", Some(t.as_str()), &["client"])
}

/// The client secret of tenant `t`'s provider `notes`.
fn secret_of(t: &TenantId) -> String {
    format!("client-secret-of-{t}")
}

/// Creates tenant `id` through the API.
async fn create_tenant(app: &TestApp, id: &str) -> TenantId {
    let r = app
        .send(
            "POST",
            "/v1/tenants",
            Some(&app.platform()),
            Some(json!({"id": id, "name": "Rotation"})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    TenantId::parse(id).unwrap()
}

/// Publishes and approves the reference card in `t`.
async fn publish(app: &TestApp, t: &TenantId) {
    let base = version_path(t);
    let card: Value = serde_json::from_str(CARD).unwrap();
    let publisher = token("pat", Some(t.as_str()), &["publisher"]);
    let r = app.send("PUT", &base, Some(&publisher), Some(card)).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    let reviewer = token("rita", Some(t.as_str()), &["reviewer"]);
    let r = app
        .send(
            "POST",
            &format!("{base}/review"),
            Some(&reviewer),
            Some(json!({"decision": "approve"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
}

/// Opens a session in `t` on `up` with the upstream's secret header; its id.
async fn open_session(app: &TestApp, t: &TenantId, up: &Running) -> String {
    let r = app
        .send(
            "POST",
            &format!("/v1/tenants/{t}/sessions"),
            Some(&client_of(t)),
            Some(json!({"server": server(), "upstream": {"url": up.url(),
                "headers": {UPSTREAM_HEADER: UPSTREAM_SECRET}}})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    r.json()["id"].as_str().unwrap().to_owned()
}

/// Puts the reference server of `t` behind the guard, its upstream the
/// card's one remote, with the upstream's secret header.
async fn put_guard_route(app: &TestApp, t: &TenantId) {
    let admin = token("alice", Some(t.as_str()), &["admin"]);
    let r = app
        .send(
            "PUT",
            &format!(
                "/v1/tenants/{t}/servers/{}/guard",
                server().replace('/', "%2F")
            ),
            Some(&admin),
            Some(json!({"upstream": {"headers": {UPSTREAM_HEADER: UPSTREAM_SECRET}}})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
}

/// Resolves `read` through session `id` of `t`.
async fn resolve(app: &TestApp, t: &TenantId, id: &str) -> Resp {
    app.send(
        "POST",
        &format!("/v1/tenants/{t}/sessions/{id}/resolve"),
        Some(&client_of(t)),
        Some(json!({"name": "manage_files",
            "arguments": {"path": "/notes.txt", "action": "read"}})),
    )
    .await
}

/// A resolve that reached the upstream with the session's sealed header
/// (the upstream refuses requests without it).
async fn resolves_upstream(app: &TestApp, t: &TenantId, id: &str, up: &Running) {
    let r = resolve(app, t, id).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(r.json()["source"], "upstream", "{}", r.json());
    assert_eq!(
        up.rejected(),
        0,
        "a request reached the upstream without its header"
    );
}

/// Signs an attestation in `t` (opens the tenant's sealed private key).
async fn attests(app: &TestApp, t: &TenantId) {
    let reader = token("rob", Some(t.as_str()), &["reader"]);
    let r = app
        .get(&format!("{}/attestation", version_path(t)), &reader)
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
}

/// What the test token endpoint was sent: the client secret (from HTTP
/// Basic), and whether the PKCE verifier matched the code (the test sends
/// the S256 challenge as the code).
#[derive(Clone, Default)]
struct TokenEndpoint(Arc<Mutex<Vec<(String, bool)>>>);

async fn token_endpoint(
    State(seen): State<TokenEndpoint>,
    headers: HeaderMap,
    body: String,
) -> impl IntoResponse {
    let secret = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.split_once(':').map(|(_, secret)| secret.to_owned()))
        .unwrap_or_default();
    let form: BTreeMap<String, String> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    let verifier = form.get("code_verifier").cloned().unwrap_or_default();
    let challenge = b64(&sha2::Sha256::digest(verifier.as_bytes()));
    let pkce = form.get("code") == Some(&challenge);
    seen.0.lock().unwrap().push((secret, pkce));
    if pkce {
        (
            StatusCode::OK,
            axum::Json(
                json!({"access_token": "at", "token_type": "bearer", "scope": "notes:read"}),
            ),
        )
    } else {
        (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": "invalid_grant"})),
        )
    }
}

/// Puts provider `name` in `t` with `secret`, its endpoints at `base`.
async fn put_provider(app: &TestApp, t: &TenantId, name: &str, base: &str, secret: &str) {
    let mut body = profile(&format!("{base}/authorize"), &format!("{base}/token"));
    body["client_secret"] = json!(secret);
    let admin = token("alice", Some(t.as_str()), &["admin"]);
    let r = app
        .send(
            "PUT",
            &format!("/v1/tenants/{t}/providers/{name}"),
            Some(&admin),
            Some(body),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
}

/// A pending grant: its id, its state and its PKCE challenge.
struct Pending {
    tenant: TenantId,
    id: String,
    state: String,
    challenge: String,
}

async fn start_grant(app: &TestApp, t: &TenantId, provider: &str) -> Pending {
    let r = app
        .send(
            "POST",
            &format!("/v1/tenants/{t}/grants"),
            Some(&client_of(t)),
            Some(json!({"provider": provider, "scopes": ["notes:read"],
                "redirect_uri": "https://app.example/callback",
                "resource": "https://notes.example/mcp"})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    let g = r.json();
    let url = g["authorization_url"].as_str().unwrap();
    Pending {
        tenant: t.clone(),
        id: g["id"].as_str().unwrap().to_owned(),
        state: crate::scope_grants::query(url, "state"),
        challenge: crate::scope_grants::query(url, "code_challenge"),
    }
}

/// Exchanges `g` (opening its sealed verifier and its provider's sealed
/// client secret) and checks what the token endpoint received.
async fn exchanges(app: &TestApp, g: &Pending, seen: &TokenEndpoint, secret: &str) {
    let r = app
        .send(
            "POST",
            &format!("/v1/tenants/{}/grants/{}/exchange", g.tenant, g.id),
            Some(&client_of(&g.tenant)),
            Some(json!({"code": g.challenge, "state": g.state})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    let last = seen.0.lock().unwrap().last().cloned();
    assert_eq!(last, Some((secret.to_owned(), true)), "grant {}", g.id);
}

/// One stored sealed value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stored {
    tenant: TenantId,
    column: SealedColumn,
    key: String,
    sealed: String,
}

/// Every sealed value stored for `tenants`, read through the store as the
/// server uses it.
async fn stored(app: &TestApp, tenants: &[TenantId]) -> Vec<Stored> {
    let mut all = Vec::new();
    for t in tenants {
        for column in SealedColumn::ALL {
            for row in app.store.sealed_values(t, column, "", 1000).await.unwrap() {
                all.push(Stored {
                    tenant: t.clone(),
                    column,
                    key: row.key,
                    sealed: row.sealed,
                });
            }
        }
    }
    all
}

/// Opens `v` with `ring` for the tenant and context it is bound to.
fn open(ring: &Keyring, v: &Stored) -> Result<Vec<u8>, KeyError> {
    let t = &v.tenant;
    match v.column {
        SealedColumn::AttestationKey => ring.open(t, &v.sealed),
        SealedColumn::UpstreamHeaders => {
            ring.open_bound(t, pinfold_resolve::headers_context(&v.key), &v.sealed)
        }
        SealedColumn::ClientSecret => {
            ring.open_bound(t, &pinfold_scope::secret_context(&v.key), &v.sealed)
        }
        SealedColumn::PkceVerifier => {
            ring.open_bound(t, &pinfold_scope::verifier_context(&v.key), &v.sealed)
        }
        SealedColumn::GuardHeaders => {
            ring.open_bound(t, &pinfold_guard::model::headers_context(&v.key), &v.sealed)
        }
    }
}

/// Every value opens with `ring`, and holds what was sealed where the test
/// knows it.
fn all_open(ring: &Keyring, values: &[Stored]) {
    for v in values {
        let plain = open(ring, v).unwrap_or_else(|e| panic!("{v:?} does not open: {e}"));
        match v.column {
            SealedColumn::UpstreamHeaders | SealedColumn::GuardHeaders => {
                let pairs: Vec<(String, String)> = serde_json::from_slice(&plain).unwrap();
                assert_eq!(pairs, [(UPSTREAM_HEADER.into(), UPSTREAM_SECRET.into())]);
            }
            SealedColumn::ClientSecret if v.tenant.as_str() == LEGACY_TENANT => {
                assert_eq!(plain, LEGACY_CLIENT_SECRET.as_bytes());
            }
            SealedColumn::ClientSecret => assert_eq!(plain, secret_of(&v.tenant).as_bytes()),
            SealedColumn::AttestationKey | SealedColumn::PkceVerifier => {
                assert!(!plain.is_empty())
            }
        }
    }
}

/// How many of `values` name each key id (`legacy`: none).
fn by_key(values: &[Stored]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for v in values {
        *m.entry(key_id_of(&v.sealed).unwrap_or("legacy").to_owned())
            .or_default() += 1;
    }
    m
}

async fn run_reseal(app: &TestApp, batch_size: u32, dry_run: bool) -> (Summary, String) {
    let mut out = Vec::new();
    let summary = reseal(
        &app.store,
        &app.keyring(),
        ResealOptions {
            batch_size,
            dry_run,
        },
        &mut out,
    )
    .await
    .unwrap();
    (summary, String::from_utf8(out).unwrap())
}

fn counts(s: &Summary, column: SealedColumn) -> Counts {
    s.columns
        .iter()
        .find(|(c, _)| *c == column)
        .map(|(_, c)| *c)
        .unwrap()
}

#[tokio::test]
async fn rotating_the_encryption_key_keeps_every_secret_and_reseal_moves_them_all() {
    let (k1, k2) = (key_1(), Keyring::generate_base64().unwrap());
    let app1 = TestApp::build(test_issuers(), |c| c.encryption_key = Some(k1.clone())).await;
    let kid1 = app1.keyring().current_kid().to_owned();
    let a = app1.tenant.clone();
    let b = app1.new_tenant().await;
    let legacy = create_tenant(&app1, LEGACY_TENANT).await;
    let tenants = [a.clone(), b.clone(), legacy.clone()];
    let up = Running::start(
        "127.0.0.1:0".parse().unwrap(),
        Switches {
            require_header: Some((UPSTREAM_HEADER.into(), UPSTREAM_SECRET.into())),
            ..Switches::default()
        },
    )
    .await
    .expect("reference upstream starts");
    let seen = TokenEndpoint::default();
    let auth = serve_local(
        axum::Router::new()
            .route("/token", post(token_endpoint))
            .with_state(seen.clone()),
    )
    .await;

    // Under key 1: a session with sealed upstream headers, a provider with
    // a sealed client secret and two pending grants (sealed verifiers) in
    // every tenant.
    let mut sessions = Vec::new();
    let (mut early, mut late) = (Vec::new(), Vec::new());
    for t in &tenants {
        publish(&app1, t).await;
        put_guard_route(&app1, t).await;
        sessions.push((t.clone(), open_session(&app1, t, &up).await));
        let provider = if t == &legacy {
            LEGACY_PROVIDER
        } else {
            "notes"
        };
        let secret = if t == &legacy {
            LEGACY_CLIENT_SECRET.to_owned()
        } else {
            secret_of(t)
        };
        put_provider(&app1, t, provider, &auth, &secret).await;
        if t == &legacy {
            // As the code before key ids sealed it.
            let current = app1
                .store
                .sealed_values(t, SealedColumn::ClientSecret, "", 10)
                .await
                .unwrap();
            let written = app1
                .store
                .replace_sealed(
                    t,
                    SealedColumn::ClientSecret,
                    &[Replacement {
                        key: LEGACY_PROVIDER.into(),
                        old: current[0].sealed.clone(),
                        new: LEGACY_SEALED_SECRET.into(),
                    }],
                )
                .await
                .unwrap();
            assert_eq!(written, 1);
        }
        early.push((start_grant(&app1, t, provider).await, secret.clone()));
        late.push((start_grant(&app1, t, provider).await, secret));
    }
    let under_1 = stored(&app1, &tenants).await;
    let count = |column| under_1.iter().filter(|v| v.column == column).count();
    assert_eq!(count(SealedColumn::AttestationKey), 3);
    assert_eq!(count(SealedColumn::UpstreamHeaders), 3);
    assert_eq!(count(SealedColumn::ClientSecret), 3);
    assert_eq!(count(SealedColumn::PkceVerifier), 6);
    assert_eq!(count(SealedColumn::GuardHeaders), 3);
    assert_eq!(
        by_key(&under_1),
        BTreeMap::from([(kid1.clone(), 17), ("legacy".into(), 1)])
    );
    all_open(&app1.keyring(), &under_1);
    // Sealed for its tenant: another tenant's keys do not open it.
    let (x, y) = (&under_1[0], &under_1[under_1.len() - 1]);
    assert_ne!(x.tenant, y.tenant);
    assert!(
        open(
            &app1.keyring(),
            &Stored {
                tenant: y.tenant.clone(),
                ..x.clone()
            }
        )
        .is_err()
    );
    for (t, id) in &sessions {
        resolves_upstream(&app1, t, id, &up).await;
    }

    // Rotated: key 2 current, key 1 kept as old (every replica restarted).
    let app2 = app1
        .with_encryption_keys(&k2, std::slice::from_ref(&k1))
        .await;
    let kid2 = app2.keyring().current_kid().to_owned();
    assert_ne!(kid1, kid2);
    all_open(&app2.keyring(), &under_1);
    for (t, id) in &sessions {
        resolves_upstream(&app2, t, id, &up).await;
        attests(&app2, t).await;
    }
    for (g, secret) in &early {
        exchanges(&app2, g, &seen, secret).await;
    }
    // New secrets are sealed under key 2.
    let fresh = open_session(&app2, &a, &up).await;
    let row = app2
        .store
        .sessions()
        .session(&a, &fresh)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        key_id_of(&row.upstream_sealed.unwrap()),
        Some(kid2.as_str())
    );

    // A dry run counts and writes nothing; each count is exact.
    let before = stored(&app2, &tenants).await;
    let (dry, out) = run_reseal(&app2, 500, true).await;
    assert_eq!(stored(&app2, &tenants).await, before, "a dry run wrote");
    assert!(out.contains("dry run"), "{out}");
    let want = |resealed, current| Counts {
        resealed,
        current,
        unopenable: 0,
        changed: 0,
    };
    assert_eq!(dry.tenants, 3);
    assert_eq!(counts(&dry, SealedColumn::AttestationKey), want(3, 0));
    assert_eq!(counts(&dry, SealedColumn::UpstreamHeaders), want(3, 1));
    assert_eq!(counts(&dry, SealedColumn::ClientSecret), want(3, 0));
    // The early grants were exchanged: their states are gone.
    assert_eq!(counts(&dry, SealedColumn::PkceVerifier), want(3, 0));
    assert_eq!(counts(&dry, SealedColumn::GuardHeaders), want(3, 0));
    assert_eq!(
        dry.by_key,
        BTreeMap::from([(kid1.clone(), 14), (kid2.clone(), 1), ("legacy".into(), 1)])
    );

    // The re-seal, one value per transaction and one tenant per page.
    let (done, out) = run_reseal(&app2, 1, false).await;
    assert_eq!(done.total(), want(15, 1), "{out}");
    for t in &tenants {
        assert!(
            out.contains(&format!("tenant {t}: ")),
            "no progress line for {t}: {out}"
        );
    }
    assert!(
        out.contains("Summary: 3 tenant(s), 16 sealed value(s)"),
        "{out}"
    );
    assert!(!out.contains(UPSTREAM_SECRET) && !out.contains(&k1) && !out.contains(&k2));
    let under_2 = stored(&app2, &tenants).await;
    assert_eq!(by_key(&under_2), BTreeMap::from([(kid2.clone(), 16)]));
    all_open(&app2.keyring(), &under_2);
    // Again: nothing left to do.
    let (again, _) = run_reseal(&app2, 2, false).await;
    assert_eq!(again.total(), want(0, 16));
    assert_eq!(stored(&app2, &tenants).await, under_2);

    // Key 1 removed: everything still works with key 2 alone.
    let app3 = app1.with_encryption_keys(&k2, &[]).await;
    all_open(&app3.keyring(), &under_2);
    for (t, id) in &sessions {
        resolves_upstream(&app3, t, id, &up).await;
        attests(&app3, t).await;
    }
    for (g, secret) in &late {
        exchanges(&app3, g, &seen, secret).await;
    }

    // ... and a value that had not been re-sealed would not open: put two
    // of the old values back (key 1's headers of a session, the legacy
    // client secret).
    let headers_1 = under_1
        .iter()
        .find(|v| v.column == SealedColumn::UpstreamHeaders && v.tenant == a)
        .unwrap();
    let secret_0 = under_1
        .iter()
        .find(|v| v.column == SealedColumn::ClientSecret && v.tenant == legacy)
        .unwrap();
    assert_eq!(secret_0.sealed, LEGACY_SEALED_SECRET);
    let now_2 = stored(&app3, &tenants).await;
    for old in [headers_1, secret_0] {
        let current = now_2
            .iter()
            .find(|v| v.tenant == old.tenant && v.column == old.column && v.key == old.key)
            .unwrap();
        let put_back = Replacement {
            key: old.key.clone(),
            old: current.sealed.clone(),
            new: old.sealed.clone(),
        };
        let written = app3
            .store
            .replace_sealed(&old.tenant, old.column, &[put_back])
            .await
            .unwrap();
        assert_eq!(written, 1);
    }
    let ring = app3.keyring();
    assert!(matches!(open(&ring, headers_1), Err(KeyError::UnknownKey(k)) if k == kid1));
    assert!(matches!(open(&ring, secret_0), Err(KeyError::Unseal)));
    let app4 = app1.with_encryption_keys(&k2, &[]).await;
    resolve(&app4, &a, &headers_1.key)
        .await
        .problem(500, "internal_error");
    let r = app4
        .send(
            "POST",
            &format!("/v1/tenants/{legacy}/grants"),
            Some(&client_of(&legacy)),
            Some(
                json!({"provider": LEGACY_PROVIDER, "scopes": ["notes:read"],
                "redirect_uri": "https://app.example/callback"}),
            ),
        )
        .await;
    r.problem(500, "internal_error");
    // The re-seal now names both, leaves them, and reports the failure.
    let (failed, out) = run_reseal(&app4, 500, false).await;
    assert_eq!(failed.total().unopenable, 2, "{out}");
    assert!(
        out.contains(&format!(
            "cannot open: tenant {a}, upstream headers, row \"{}\"",
            headers_1.key
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "cannot open: tenant {legacy}, client secrets, row \"{LEGACY_PROVIDER}\""
        )),
        "{out}"
    );
    assert!(out.contains(&kid1), "the unknown key is named: {out}");
    assert!(out.contains("2 value(s) could not be opened"), "{out}");
    let left = stored(&app4, &tenants).await;
    assert!(left.contains(headers_1) && left.contains(secret_0));
    assert!(!out.contains(LEGACY_SEALED_SECRET) && !out.contains(&headers_1.sealed));
}

/// Runs `pinfold keys ARGS` as a process with a clean environment plus
/// `env`; its exit code, stdout and stderr.
fn pinfold_keys(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pinfold-under-test"))
        .arg("keys")
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .expect("run pinfold keys");
    (
        out.status.code().expect("exit code"),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[tokio::test]
async fn pinfold_keys_lists_the_key_ids_and_reseals_with_an_exit_code_per_outcome() {
    let (k1, k2, k3) = (
        key_1(),
        Keyring::generate_base64().unwrap(),
        Keyring::generate_base64().unwrap(),
    );
    let app = TestApp::build(test_issuers(), |c| c.encryption_key = Some(k1.clone())).await;
    let t = app.tenant.clone();
    put_provider(&app, &t, "notes", "https://as.example", &secret_of(&t)).await;
    let rotated = app
        .with_encryption_keys(&k2, std::slice::from_ref(&k1))
        .await;
    let (kid1, kid2) = (
        app.keyring().current_kid().to_owned(),
        rotated.keyring().current_kid().to_owned(),
    );
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().to_str().unwrap();
    let db = ["--data-dir", data_dir, "--database-url", &app.db.url];
    let env = |current: &str, old: &str| {
        let mut e = vec![("PINFOLD_ENCRYPTION_KEY", current.to_owned())];
        if !old.is_empty() {
            e.push(("PINFOLD_ENCRYPTION_KEYS_OLD", old.to_owned()));
        }
        e
    };
    let run = |args: Vec<&str>, env: Vec<(&str, String)>| {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (code, out, err) = pinfold_keys(&args, &env);
        for secret in [&k1, &k2, &k3, &secret_of(&t)] {
            assert!(
                !out.contains(secret.as_str()) && !err.contains(secret.as_str()),
                "a secret was printed: {out}{err}"
            );
        }
        (code, out, err)
    };
    let reseal_args = |extra: &[&'static str]| {
        let mut a = vec!["reseal"];
        a.extend(db);
        a.extend(extra);
        a
    };

    // The ids, the current one first.
    let both = format!("{k1},{k2}");
    let (code, out, err) = run(vec!["list", "--data-dir", data_dir], env(&k3, &both));
    assert_eq!(code, 0, "{err}");
    let kid3 = Keyring::from_base64(&k3).unwrap().current_kid().to_owned();
    assert_eq!(
        out,
        format!("current {kid3}\nold     {kid1}\nold     {kid2}\n")
    );

    // Re-seal under key 2 with key 1 old: exit 0, the summary on stdout.
    let (code, out, err) = run(reseal_args(&["--batch-size", "1"]), env(&k2, &k1));
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with(&format!(
            "Re-sealing every sealed value under encryption key {kid2} (old keys: {kid1})"
        )),
        "{out}"
    );
    // The attestation key and the client secret.
    assert!(
        out.contains("Summary: 1 tenant(s), 2 sealed value(s)"),
        "{out}"
    );
    assert!(
        out.contains("total             2 re-sealed, 0 already current"),
        "{out}"
    );
    // Idempotent.
    let (code, out, _) = run(reseal_args(&[]), env(&k2, &k1));
    assert_eq!(code, 0);
    assert!(
        out.contains("total             0 re-sealed, 2 already current"),
        "{out}"
    );
    all_open(
        &rotated.keyring(),
        &stored(&app, std::slice::from_ref(&t)).await,
    );

    // Under a key that sealed none of it: exit 1, each value named.
    let (code, out, _) = run(reseal_args(&["--dry-run"]), env(&k3, ""));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("2 value(s) could not be opened"), "{out}");
    assert!(out.contains(&format!(
        "cannot open: tenant {t}, client secrets, row \"notes\""
    )));

    // A bad old key is named by position: exit 2, one line on stderr.
    let (code, _, err) = run(reseal_args(&[]), env(&k2, &format!("{k1},c2hvcnQ=")));
    assert_eq!(code, 2);
    assert!(
        err.starts_with("pinfold: encryption_keys_old[1]: the encryption key must be 32 bytes"),
        "{err}"
    );
    // Without any key, `keys` does not make one up (dev mode keeps its key
    // in the data directory: none there).
    let (code, _, err) = run(vec!["list", "--data-dir", data_dir], Vec::new());
    assert_eq!(code, 2);
    assert!(err.contains("no encryption_key is configured"), "{err}");
    assert!(!dir.path().join("encryption-key").exists());
    // A database with pending migrations: migrate first.
    let empty = fresh_db().await;
    let (code, _, err) = run(
        vec![
            "reseal",
            "--data-dir",
            data_dir,
            "--database-url",
            &empty.url,
        ],
        env(&k2, ""),
    );
    assert_eq!(code, 2);
    assert!(err.contains("run `pinfold migrate` first"), "{err}");
}

#[tokio::test]
async fn a_sealed_value_is_replaced_only_over_the_value_read_and_only_in_its_tenant() {
    let app = TestApp::new().await;
    let (a, b) = (app.tenant.clone(), app.new_tenant().await);
    for (t, name) in [(&a, "one"), (&a, "two"), (&a, "three"), (&b, "one")] {
        put_provider(&app, t, name, "https://as.example", &secret_of(t)).await;
    }
    let page = |t: TenantId, after: &'static str, limit| {
        let app = &app;
        async move {
            app.store
                .sealed_values(&t, SealedColumn::ClientSecret, after, limit)
                .await
                .unwrap()
                .into_iter()
                .map(|r| r.key)
                .collect::<Vec<_>>()
        }
    };
    // Pages by key.
    assert_eq!(page(a.clone(), "", 2).await, ["one", "three"]);
    assert_eq!(page(a.clone(), "three", 2).await, ["two"]);
    assert!(page(a.clone(), "two", 2).await.is_empty());
    let ids = app.store.tenant_ids("", 10).await.unwrap();
    let mut both = vec![a.clone(), b.clone()];
    both.sort();
    assert_eq!(ids, both);
    assert_eq!(
        app.store.tenant_ids(both[0].as_str(), 10).await.unwrap(),
        [both[1].clone()]
    );

    let row = |t: TenantId| {
        let app = &app;
        async move {
            app.store
                .sealed_values(&t, SealedColumn::ClientSecret, "", 1)
                .await
                .unwrap()
                .remove(0)
        }
    };
    let (a1, b1) = (row(a.clone()).await, row(b.clone()).await);
    assert_eq!((a1.key.as_str(), b1.key.as_str()), ("one", "one"));
    let replace = |t: TenantId, old: String, new: &'static str| {
        let app = &app;
        async move {
            app.store
                .replace_sealed(
                    &t,
                    SealedColumn::ClientSecret,
                    &[Replacement {
                        key: "one".into(),
                        old,
                        new: new.into(),
                    }],
                )
                .await
                .unwrap()
        }
    };
    // A stale value read: nothing written.
    assert_eq!(replace(a.clone(), b1.sealed.clone(), "x").await, 0);
    // B's value through tenant A: nothing written (nor the other way).
    assert_eq!(replace(b.clone(), a1.sealed.clone(), "x").await, 0);
    assert_eq!(row(a.clone()).await, a1);
    assert_eq!(row(b.clone()).await, b1);
    // The value read: written, once.
    assert_eq!(
        replace(a.clone(), a1.sealed.clone(), "v2.000000000000.AAAA").await,
        1
    );
    assert_eq!(replace(a.clone(), a1.sealed.clone(), "x").await, 0);
    assert_eq!(row(a.clone()).await.sealed, "v2.000000000000.AAAA");
    assert_eq!(row(b.clone()).await, b1);
}

/// The words ending in `_sealed` in `text` (column names, by convention).
fn sealed_words(text: &str) -> std::collections::BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.ends_with("_sealed"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_reseal_walks_every_sealed_column_of_the_schema() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for backend in ["postgres", "sqlite"] {
        let mut schema = std::collections::BTreeSet::new();
        for entry in std::fs::read_dir(root.join("migrations").join(backend)).unwrap() {
            let path = entry.unwrap().path();
            schema.extend(sealed_words(&std::fs::read_to_string(path).unwrap()));
        }
        let source =
            std::fs::read_to_string(root.join(format!("services/store-{backend}/src/sealed.rs")))
                .unwrap();
        // The columns the store's walk maps `SealedColumn`s to.
        let target = &source[source.find("fn target").unwrap()..];
        let target = &target[..target.find("\n}\n").unwrap()];
        let walked = sealed_words(target);
        assert_eq!(
            walked, schema,
            "{backend}: a column holding sealed values that `pinfold keys reseal` does not walk \
             (add it to SealedColumn, the stores' `target` and `reseal::context_of`)"
        );
        assert_eq!(walked.len(), SealedColumn::ALL.len());
    }
}
