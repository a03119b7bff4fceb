//! `pinfold publish` end to end: the real command line (the `pinfold` binary's
//! own `main.rs`, built by this package as `pinfold-under-test`) run as a
//! child process against a Pinfold served over TCP, on both databases. Every
//! outcome's exit code and stdout line; `--wait-approved` while a reviewer
//! acts; `--github-oidc` against a stand-in for the GitHub Actions token
//! endpoint and a JWKS-configured issuer whose claim rules decide the role.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::{KeyPair as RsaKeyPair, KeySize};
use aws_lc_rs::signature::{KeyPair as _, RSA_PKCS1_SHA256};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use pinfold_tests::*;
use serde_json::{Value, json};

const SERVER: &str = "io.github.acme/files";

/// The `pinfold` binary under test.
fn pinfold_bin() -> &'static str {
    env!("CARGO_BIN_EXE_pinfold-under-test")
}

/// What a run of the binary produced.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    /// The stdout lines.
    fn lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }
}

/// A command for the binary with a clean environment (nothing inherited:
/// neither a `PINFOLD_TOKEN` nor, when the suite itself runs in GitHub
/// Actions, the runner's `ACTIONS_ID_TOKEN_REQUEST_*`).
fn command(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(pinfold_bin());
    cmd.args(args).env_clear();
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Runs the binary to completion (off the async workers, so the served
/// Pinfold keeps answering).
async fn pinfold(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = command(args, env);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .expect("run the pinfold binary");
    Run {
        code: out.status.code().expect("exited"),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

async fn listen() -> (tokio::net::TcpListener, String) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    (l, base)
}

/// The app's router over TCP; its base URL.
async fn serve(app: &TestApp) -> String {
    let (l, base) = listen().await;
    serve_on(l, app.router.clone());
    base
}

/// A server card of `SERVER` at `version`, written to a file in `dir`.
fn card_file(dir: &std::path::Path, version: &str, description: &str) -> String {
    let doc = json!({
        "name": SERVER, "version": version, "description": description,
        "signature": {"tools": [{
            "name": "read_file", "description": "Read a file",
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        }], "prompts": [], "resources": [], "resourceTemplates": []}
    });
    write_json(
        dir,
        &format!("card-{version}-{}.json", description.len()),
        &doc,
    )
}

fn write_json(dir: &std::path::Path, name: &str, doc: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(doc).unwrap()).unwrap();
    path.display().to_string()
}

fn vpath(app: &TestApp, version: &str) -> String {
    format!(
        "/v1/tenants/{}/servers/{}/versions/{version}",
        app.tenant,
        SERVER.replace('/', "%2F")
    )
}

/// `publish FILE --server BASE --tenant T` with extra flags, the token in
/// `PINFOLD_TOKEN`.
async fn publish(base: &str, tenant: &str, file: &str, token: Option<&str>, extra: &[&str]) -> Run {
    let mut args = vec!["publish", file, "--server", base, "--tenant", tenant];
    args.extend_from_slice(extra);
    let env: Vec<(&str, &str)> = token.map(|t| ("PINFOLD_TOKEN", t)).into_iter().collect();
    pinfold(&args, &env).await
}

#[track_caller]
fn assert_code(run: &Run, code: i32) {
    assert_eq!(
        run.code, code,
        "exit code\nstdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
}

#[tokio::test]
async fn created_identical_and_conflict_have_their_exit_codes() {
    let app = TestApp::new().await;
    let base = serve(&app).await;
    let dir = tempfile::tempdir().unwrap();
    let file = card_file(dir.path(), "1.0.0", "Files in an Acme workspace");
    let token = app.as_roles("ci-bot", &["publisher"]);
    let t = app.tenant.as_str();

    let run = publish(&base, t, &file, Some(&token), &[]).await;
    assert_code(&run, 0);
    let record = app.get(&vpath(&app, "1.0.0"), &app.admin()).await.json();
    let digest = record["digest"].as_str().unwrap();
    assert_eq!(
        run.lines(),
        vec![format!("created {SERVER} 1.0.0 {digest} (pending)")]
    );
    assert_eq!(record["published_by"], "ci-bot");

    // The same content again: identical, exit 0 (a retried CI job is fine).
    let again = publish(&base, t, &file, Some(&token), &[]).await;
    assert_code(&again, 0);
    assert_eq!(
        again.lines(),
        vec![format!("identical {SERVER} 1.0.0 {digest} (pending)")]
    );

    // Other content under the same version: conflict with both digests.
    let other = card_file(dir.path(), "1.0.0", "Files, changed");
    let conflict = publish(&base, t, &other, Some(&token), &[]).await;
    assert_code(&conflict, 3);
    let doc: Value = serde_json::from_slice(&std::fs::read(&other).unwrap()).unwrap();
    let yours = pinfold_core::digest::digest(&doc);
    assert_ne!(yours, digest);
    assert_eq!(
        conflict.lines(),
        vec![format!(
            "conflict {SERVER} 1.0.0: published {digest}, yours {yours}"
        )]
    );

    // From stdin, `-`.
    let mut cmd = command(
        &["publish", "-", "--server", &base, "--tenant", t],
        &[("PINFOLD_TOKEN", token.as_str())],
    );
    cmd.stdin(Stdio::from(std::fs::File::open(&file).unwrap()));
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("identical "));
}

#[tokio::test]
async fn an_invalid_card_lists_every_pointer() {
    let app = TestApp::new().await;
    let base = serve(&app).await;
    let dir = tempfile::tempdir().unwrap();
    let token = app.as_roles("ci-bot", &["publisher"]);
    let t = app.tenant.as_str();
    let bad = json!({
        "name": SERVER, "version": "1.0.0", "description": "x",
        "signature": {"tools": [
            {"name": "read_file", "inputSchema": "not a schema", "annotations": {"readOnlyHint": "yes"}},
            {"name": "read_file", "inputSchema": {"type": "object"}}
        ], "prompts": [], "resources": [], "resourceTemplates": []}
    });
    let expected = pinfold_core::card::ServerCard::check(&bad, &Default::default())
        .expect_err("the card is invalid")
        .errors;
    assert!(expected.len() >= 3, "{expected:?}");
    let file = write_json(dir.path(), "bad.json", &bad);
    let run = publish(&base, t, &file, Some(&token), &[]).await;
    assert_code(&run, 4);
    let lines = run.lines();
    assert_eq!(lines.len(), 1, "{}", run.stdout);
    assert!(lines[0].starts_with("invalid: "), "{}", lines[0]);
    for e in &expected {
        assert!(
            lines[0].contains(&format!("{}: {}", e.pointer, e.message)),
            "{} missing from {}",
            e.pointer,
            lines[0]
        );
    }
    // Nothing was stored.
    assert_eq!(
        app.get(&vpath(&app, "1.0.0"), &app.admin()).await.status,
        404
    );

    // Without a name and version there is no URL: core's check, locally,
    // still lists every problem; no request is made.
    let nameless = json!({"description": 7, "signature": {"tools": []}});
    let file = write_json(dir.path(), "nameless.json", &nameless);
    let run = publish("http://127.0.0.1:9", t, &file, Some(&token), &[]).await;
    assert_code(&run, 4);
    for p in ["/name", "/version", "/description"] {
        assert!(
            run.stdout.contains(&format!("{p}: ")),
            "{p}: {}",
            run.stdout
        );
    }

    // Not JSON, or no file at all: usage (2), reason on stderr, nothing on stdout.
    std::fs::write(
        dir.path().join("dup.json"),
        br#"{"name": "a", "name": "b"}"#,
    )
    .unwrap();
    for f in [
        dir.path().join("dup.json").display().to_string(),
        dir.path().join("missing.json").display().to_string(),
    ] {
        let run = publish(&base, t, &f, Some(&token), &[]).await;
        assert_code(&run, 2);
        assert!(run.stdout.is_empty(), "{}", run.stdout);
        assert!(run.stderr.starts_with("pinfold: "), "{}", run.stderr);
    }
    // A bad server URL and conflicting flags are usage errors too.
    let file = card_file(dir.path(), "1.0.0", "ok");
    assert_code(&publish("ftp://x", t, &file, Some(&token), &[]).await, 2);
    assert_code(
        &publish(
            &base,
            t,
            &file,
            Some(&token),
            &["--github-oidc", "--token-env", "X"],
        )
        .await,
        2,
    );
    assert_code(
        &publish(
            &base,
            t,
            &file,
            Some(&token),
            &["--wait-approved", "--timeout", "soon"],
        )
        .await,
        2,
    );
}

#[tokio::test]
async fn unauthorised_is_its_own_exit_code() {
    let app = TestApp::new().await;
    let base = serve(&app).await;
    let dir = tempfile::tempdir().unwrap();
    let file = card_file(dir.path(), "1.0.0", "Files in an Acme workspace");
    let t = app.tenant.as_str();

    // No token in the environment: refused before any request.
    let run = publish(&base, t, &file, None, &[]).await;
    assert_code(&run, 5);
    assert!(
        run.stdout
            .starts_with("unauthorised: no token: environment variable PINFOLD_TOKEN"),
        "{}",
        run.stdout
    );
    // A token that is not one.
    let run = publish(&base, t, &file, Some("not-a-jwt"), &[]).await;
    assert_code(&run, 5);
    assert!(run.stdout.contains("401 invalid_token"), "{}", run.stdout);
    // A reader may not publish.
    let reader = app.as_roles("rob-reader", &["reader"]);
    let run = publish(&base, t, &file, Some(&reader), &[]).await;
    assert_code(&run, 5);
    assert!(run.stdout.contains("403 forbidden_role"), "{}", run.stdout);
    assert!(!run.stdout.contains(&reader) && !run.stderr.contains(&reader));
    // A publisher of another tenant does not even see this one.
    let other = app.new_tenant().await;
    let stranger = token("ci-bot", Some(other.as_str()), &["publisher"]);
    let run = publish(&base, t, &file, Some(&stranger), &[]).await;
    assert_code(&run, 5);
    assert!(
        run.stdout.contains("404 tenant_not_found"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains(&stranger) && !run.stderr.contains(&stranger));
    assert_eq!(
        app.get(&vpath(&app, "1.0.0"), &app.admin()).await.status,
        404
    );
}

#[tokio::test]
async fn unreachable_after_bounded_retries() {
    let dir = tempfile::tempdir().unwrap();
    let file = card_file(dir.path(), "1.0.0", "Files in an Acme workspace");
    // A closed port: refused at once, retried with backoff, then code 6.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let run = publish(&format!("http://{closed}"), "acme", &file, Some("t"), &[]).await;
    assert_code(&run, 6);
    assert!(
        run.stdout.starts_with("unreachable: PUT http://"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("(4 attempts)"), "{}", run.stdout);
    assert_eq!(
        run.stderr.matches("retrying in").count(),
        3,
        "{}",
        run.stderr
    );

    // A server that keeps answering 503 with Retry-After: honoured, bounded.
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let (l, base) = listen().await;
    serve_on(
        l,
        axum::Router::new().fallback(move || {
            let h = h.clone();
            async move {
                h.fetch_add(1, Ordering::SeqCst);
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    [
                        ("retry-after", "0"),
                        ("content-type", "application/problem+json"),
                    ],
                    r#"{"code": "unavailable", "title": "Unavailable", "status": 503}"#,
                )
            }
        }),
    );
    let started = std::time::Instant::now();
    let run = publish(&base, "acme", &file, Some("t"), &[]).await;
    assert_code(&run, 6);
    assert_eq!(hits.load(Ordering::SeqCst), 4);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "Retry-After: 0 was not honoured"
    );
    assert!(run.stdout.contains("503 unavailable"), "{}", run.stdout);
    assert!(
        run.stderr.contains("retrying in 0.0s (attempt 2 of 4)"),
        "{}",
        run.stderr
    );

    // A 500 is a bug, not an outage: no retry, still code 6 (Pinfold failed).
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let (l, base) = listen().await;
    serve_on(
        l,
        axum::Router::new().fallback(move || {
            let h = h.clone();
            async move {
                h.fetch_add(1, Ordering::SeqCst);
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }),
    );
    let run = publish(&base, "acme", &file, Some("t"), &[]).await;
    assert_code(&run, 6);
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    // A server without the registry's routes: an unexpected answer, code 1.
    let (l, base) = listen().await;
    serve_on(
        l,
        axum::Router::new().fallback(|| async {
            (
                StatusCode::NOT_FOUND,
                [("content-type", "application/problem+json")],
                r#"{"code": "route_not_found", "title": "Not found", "status": 404}"#,
            )
        }),
    );
    let run = publish(&base, "acme", &file, Some("t"), &[]).await;
    assert_code(&run, 1);
    assert!(
        run.stdout
            .starts_with("error: unexpected answer 404 route_not_found"),
        "{}",
        run.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_to_another_host_needs_insecure_http() {
    let dir = tempfile::tempdir().unwrap();
    let file = card_file(dir.path(), "1.0.0", "Files in an Acme workspace");
    let server = "http://ci:pw-secret@pinfold.example";
    let verify = |extra: &'static [&'static str]| {
        let mut args = vec![
            "verify",
            "--server",
            server,
            "--tenant",
            "acme",
            "--name",
            SERVER,
            "--against",
            "http://127.0.0.1:1/mcp",
        ];
        args.extend_from_slice(extra);
        args
    };
    // Refused before any token is looked for: usage, exit 2, and the
    // password is not repeated.
    for run in [
        publish(server, "acme", &file, Some("t"), &[]).await,
        pinfold(&verify(&[]), &[("PINFOLD_TOKEN", "t")]).await,
    ] {
        assert_code(&run, 2);
        let text = format!("{}{}", run.stdout, run.stderr);
        assert!(text.contains("--insecure-http"), "{text}");
        assert!(text.contains("http://pinfold.example"), "{text}");
        assert!(!text.contains("pw-secret"), "{text}");
    }
    // With the flag the URL is accepted: the run goes on to the token,
    // which is missing here (exit 5), with no network needed.
    for run in [
        publish(server, "acme", &file, None, &["--insecure-http"]).await,
        pinfold(&verify(&["--insecure-http"]), &[]).await,
    ] {
        assert_code(&run, 5);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalling_pinfold_cannot_stretch_the_wait_past_its_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let file = card_file(dir.path(), "1.0.0", "Files in an Acme workspace");
    // Publishing succeeds (pending); every poll then hangs, far longer than
    // the request timeout and its retries together.
    let polls = Arc::new(AtomicUsize::new(0));
    let p = polls.clone();
    let (l, base) = listen().await;
    serve_on(
        l,
        axum::Router::new().fallback(move |method: axum::http::Method| {
            let p = p.clone();
            async move {
                if method == axum::http::Method::PUT {
                    return (
                        StatusCode::CREATED,
                        [("content-type", "application/json")],
                        json!({"server": SERVER, "version": "1.0.0", "digest": "sha256:00",
                               "status": "pending"})
                        .to_string(),
                    );
                }
                p.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(600)).await;
                (
                    StatusCode::OK,
                    [("content-type", "application/json")],
                    String::new(),
                )
            }
        }),
    );
    let started = std::time::Instant::now();
    let run = publish(
        &base,
        "acme",
        &file,
        Some("t"),
        &["--wait-approved", "--timeout", "3s"],
    )
    .await;
    let took = started.elapsed();
    assert_code(&run, 8);
    assert!(
        run.lines().iter().any(|l| l.starts_with("timeout ")),
        "{}",
        run.stdout
    );
    assert!(polls.load(Ordering::SeqCst) >= 1, "a poll was sent");
    assert!(
        took < Duration::from_secs(8),
        "--timeout 3s ended after {took:?}\n{}",
        run.stderr
    );
}

/// Starts `publish --wait-approved` in the background and returns once it
/// says it is waiting; the child and its stderr so far.
async fn start_waiting(
    base: &str,
    tenant: &str,
    file: &str,
    token: &str,
    timeout: &str,
) -> (std::process::Child, String) {
    let mut child = command(
        &[
            "publish",
            file,
            "--server",
            base,
            "--tenant",
            tenant,
            "--wait-approved",
            "--timeout",
            timeout,
        ],
        &[("PINFOLD_TOKEN", token)],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let stderr = child.stderr.take();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stderr?);
        let mut seen = String::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).ok()? == 0 {
                return None;
            }
            seen.push_str(&line);
            if line.contains("waiting up to") {
                tx.send(seen).ok()?;
                // Keep draining stderr so the child never blocks on it.
                return std::io::copy(&mut reader, &mut std::io::sink()).ok();
            }
        }
    });
    match rx.await {
        Ok(seen) => (child, seen),
        Err(_) => {
            let out = child.wait_with_output().unwrap();
            panic!(
                "exited before waiting ({:?}): {}",
                out.status,
                String::from_utf8_lossy(&out.stdout)
            );
        }
    }
}

async fn finish(child: std::process::Child) -> (i32, Vec<String>) {
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    (
        out.status.code().unwrap(),
        stdout.lines().map(str::to_owned).collect(),
    )
}

async fn review(app: &TestApp, version: &str, decision: &str, note: &str) {
    let r = app
        .send(
            "POST",
            &format!("{}/review", vpath(app, version)),
            Some(&app.as_roles("rita", &["reviewer"])),
            Some(json!({"decision": decision, "note": note})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
}

#[tokio::test]
async fn wait_approved_ends_approved_rejected_or_timed_out() {
    let app = TestApp::new().await;
    let base = serve(&app).await;
    let dir = tempfile::tempdir().unwrap();
    let token = app.as_roles("ci-bot", &["publisher"]);
    let t = app.tenant.as_str();

    // Approved while it waits: exit 0, one line on stdout (the approval);
    // the publish itself is progress on stderr.
    let file = card_file(dir.path(), "1.0.0", "Files in an Acme workspace");
    let (child, seen) = start_waiting(&base, t, &file, &token, "60s").await;
    assert!(seen.contains("(now pending)"), "{seen}");
    assert!(
        seen.contains(&format!("publish: created {SERVER} 1.0.0 sha256:")),
        "{seen}"
    );
    review(&app, "1.0.0", "approve", "fine").await;
    let (code, lines) = finish(child).await;
    assert_eq!(code, 0, "{lines:?}");
    let digest = app.get(&vpath(&app, "1.0.0"), &app.admin()).await.json()["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        lines,
        vec![format!("approved {SERVER} 1.0.0 {digest} by rita")]
    );
    // Already approved: the re-run does not wait.
    let run = publish(&base, t, &file, Some(&token), &["--wait-approved"]).await;
    assert_code(&run, 0);
    assert_eq!(
        run.lines(),
        vec![format!("approved {SERVER} 1.0.0 {digest} by rita")]
    );
    assert!(
        run.stderr.contains(&format!(
            "publish: identical {SERVER} 1.0.0 {digest} (approved)"
        )),
        "{}",
        run.stderr
    );

    // Rejected while it waits: exit 7 with the reviewer and the note.
    let file = card_file(dir.path(), "1.1.0", "Files in an Acme workspace");
    let (child, _) = start_waiting(&base, t, &file, &token, "60s").await;
    review(&app, "1.1.0", "reject", "too broad").await;
    let (code, lines) = finish(child).await;
    assert_eq!(code, 7, "{lines:?}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with(&format!("rejected {SERVER} 1.1.0 sha256:"))
            && lines[0].ends_with(" by rita: too broad"),
        "{lines:?}"
    );

    // Nobody acts: timeout, exit 8, after about the timeout.
    let file = card_file(dir.path(), "1.2.0", "Files in an Acme workspace");
    let started = std::time::Instant::now();
    let run = publish(
        &base,
        t,
        &file,
        Some(&token),
        &["--wait-approved", "--timeout", "2s"],
    )
    .await;
    assert_code(&run, 8);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_secs(10),
        "{waited:?}"
    );
    assert_eq!(run.lines().len(), 1, "{}", run.stdout);
    assert!(
        run.lines()[0].starts_with(&format!("timeout {SERVER} 1.2.0 sha256:"))
            && run.lines()[0].ends_with(" still pending after 2s"),
        "{}",
        run.stdout
    );
}

// ------------------------------------------------------------ GitHub Actions OIDC

/// The issuer of GitHub Actions ID tokens.
const GITHUB_ISSUER: &str = "https://token.actions.githubusercontent.com";
/// The Actions runtime's request token the stand-in expects.
const REQUEST_TOKEN: &str = "actions-runtime-request-token";
const MAIN_REF: &str = "acme/infra/.github/workflows/pinfold.yml@refs/heads/main";

/// A stand-in for GitHub: an RS256 key published as a JWKS, and the Actions
/// runtime's ID token endpoint minting GitHub-shaped tokens.
struct FakeGithub {
    key: RsaKeyPair,
    /// The claims the next token carries (besides iss/aud/exp/...).
    claims: Mutex<Value>,
    /// Token lifetime in seconds.
    lifetime: Mutex<u64>,
    /// Audiences asked for, in order.
    audiences: Mutex<Vec<String>>,
    /// JWKS fetches.
    jwks_hits: AtomicUsize,
}

fn github_claims(owner: &str, workflow_ref: &str) -> Value {
    let repo = format!("{owner}/infra");
    let git_ref = workflow_ref.split_once('@').map(|(_, r)| r).unwrap_or("");
    json!({
        "sub": format!("repo:{repo}:ref:{git_ref}"),
        "repository": repo, "repository_owner": owner, "repository_owner_id": "4242",
        "repository_id": "123456", "ref": git_ref, "ref_type": "branch",
        "job_workflow_ref": workflow_ref, "workflow_ref": workflow_ref,
        "event_name": "release", "actor": "octocat", "runner_environment": "github-hosted",
    })
}

impl FakeGithub {
    fn new() -> Arc<FakeGithub> {
        Arc::new(FakeGithub {
            key: RsaKeyPair::generate(KeySize::Rsa2048).unwrap(),
            claims: Mutex::new(github_claims("acme", MAIN_REF)),
            lifetime: Mutex::new(300),
            audiences: Mutex::new(Vec::new()),
            jwks_hits: AtomicUsize::new(0),
        })
    }

    fn jwks(&self) -> Value {
        let public = self.key.public_key();
        json!({"keys": [{
            "kty": "RSA", "alg": "RS256", "use": "sig", "kid": "gh-1",
            "n": b64(public.modulus().big_endian_without_leading_zero()),
            "e": b64(public.exponent().big_endian_without_leading_zero()),
        }]})
    }

    /// An RS256 token as GitHub signs it.
    fn mint(&self, audience: &str) -> String {
        let mut claims = self.claims.lock().unwrap().clone();
        let now = now();
        for (k, v) in [
            ("iss", json!(GITHUB_ISSUER)),
            ("aud", json!(audience)),
            ("iat", json!(now)),
            ("nbf", json!(now)),
            ("exp", json!(now + *self.lifetime.lock().unwrap())),
            ("jti", json!(uuid::Uuid::new_v4().to_string())),
        ] {
            claims[k] = v;
        }
        let input = format!(
            "{}.{}",
            b64(json!({"alg": "RS256", "typ": "JWT", "kid": "gh-1"})
                .to_string()
                .as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let mut sig = vec![0; self.key.public_modulus_len()];
        self.key
            .sign(
                &RSA_PKCS1_SHA256,
                &SystemRandom::new(),
                input.as_bytes(),
                &mut sig,
            )
            .unwrap();
        format!("{input}.{}", b64(&sig))
    }

    /// Serves `/.well-known/jwks` and the runtime's `/idtoken`; the base URL.
    async fn serve(self: &Arc<Self>) -> String {
        async fn jwks(State(gh): State<Arc<FakeGithub>>) -> impl IntoResponse {
            gh.jwks_hits.fetch_add(1, Ordering::SeqCst);
            axum::Json(gh.jwks())
        }
        async fn idtoken(
            State(gh): State<Arc<FakeGithub>>,
            headers: HeaderMap,
            Query(q): Query<std::collections::HashMap<String, String>>,
        ) -> axum::response::Response {
            let auth = headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            let ok_auth = auth
                .split_once(' ')
                .is_some_and(|(s, t)| s.eq_ignore_ascii_case("bearer") && t == REQUEST_TOKEN);
            if !ok_auth {
                return (
                    StatusCode::UNAUTHORIZED,
                    axum::Json(json!({"message": "Bad credentials"})),
                )
                    .into_response();
            }
            // The runtime's own query must survive: `&audience=` is appended.
            if q.get("api-version").map(String::as_str) != Some("2.0") {
                return (StatusCode::BAD_REQUEST, "api-version lost").into_response();
            }
            let Some(aud) = q.get("audience") else {
                return (StatusCode::BAD_REQUEST, "no audience").into_response();
            };
            gh.audiences.lock().unwrap().push(aud.clone());
            axum::Json(json!({"count": 1, "value": gh.mint(aud)})).into_response()
        }
        let (l, base) = listen().await;
        serve_on(
            l,
            axum::Router::new()
                .route("/.well-known/jwks", axum::routing::get(jwks))
                .route("/idtoken", axum::routing::get(idtoken))
                .with_state(self.clone()),
        );
        base
    }
}

/// A Pinfold whose configuration trusts the GitHub issuer (JWKS at the
/// stand-in) with claim rules for `tenant`, as `pinfold serve` would load
/// it from TOML; the test issuers too (to create the tenant and review).
async fn github_pinfold(gh_base: &str, tenant: &str, leeway: u64) -> (TestApp, String) {
    let (listener, base) = listen().await;
    let toml = format!(
        r#"
[auth]
leeway_secs = {leeway}
jwks_min_refetch_secs = 60

[[auth.issuers]]
issuer = "{GITHUB_ISSUER}"
audience = "{base}"
algorithms = ["RS256"]
jwks_url = "{gh_base}/.well-known/jwks"

[[auth.issuers.rules]]
match = {{ repository_owner = "acme", job_workflow_ref = "{MAIN_REF}" }}
tenant = "{tenant}"
roles = ["publisher"]

[[auth.issuers.rules]]
match = {{ repository_owner = "acme", job_workflow_ref = "acme/infra/.github/workflows/pinfold.yml@refs/tags/*" }}
tenant = "{tenant}"
roles = ["reader"]
"#
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pinfold.toml");
    std::fs::write(&file, toml).unwrap();
    let cfg = pinfold_server::config::Config::load(Some(&file), &Default::default()).unwrap();
    let mut issuers = pinfold_server::serve::issuer_configs(&cfg).unwrap();
    issuers.extend(test_issuers());
    let app = TestApp::build(issuers, |c| c.auth.leeway_secs = leeway).await;
    let r = app
        .send(
            "POST",
            "/v1/tenants",
            Some(&app.platform()),
            Some(json!({"id": tenant, "name": "Acme"})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    serve_on(listener, app.router.clone());
    (app, base)
}

fn fresh_tenant_id() -> String {
    format!("gh-{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

#[tokio::test]
async fn github_oidc_publishes_with_the_role_its_claim_rule_maps() {
    let gh = FakeGithub::new();
    let gh_base = gh.serve().await;
    let tenant = fresh_tenant_id();
    let (app, base) = github_pinfold(&gh_base, &tenant, 30).await;
    let dir = tempfile::tempdir().unwrap();
    let file = card_file(dir.path(), "1.0.0", "Files in an Acme workspace");
    let runtime_url = format!("{gh_base}/idtoken?api-version=2.0");
    let actions_env = [
        ("ACTIONS_ID_TOKEN_REQUEST_URL", runtime_url.as_str()),
        ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", REQUEST_TOKEN),
    ];
    let oidc = |file: String, extra: Vec<String>| {
        let base = base.clone();
        let tenant = tenant.clone();
        let env = actions_env;
        async move {
            let mut args = vec![
                "publish".to_owned(),
                file,
                "--server".into(),
                base,
                "--tenant".into(),
                tenant,
                "--github-oidc".into(),
            ];
            args.extend(extra);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            pinfold(&args, &env).await
        }
    };

    // The main-branch workflow maps to publisher: created, exit 0, with the
    // token the runtime issued for the --server URL as audience.
    let run = oidc(file.clone(), vec![]).await;
    assert_code(&run, 0);
    assert!(
        run.stdout
            .starts_with(&format!("created {SERVER} 1.0.0 sha256:")),
        "{}",
        run.stdout
    );
    assert_eq!(*gh.audiences.lock().unwrap(), vec![base.clone()]);
    assert_eq!(gh.jwks_hits.load(Ordering::SeqCst), 1);
    let path = format!(
        "/v1/tenants/{tenant}/servers/{}/versions/1.0.0",
        SERVER.replace('/', "%2F")
    );
    let admin = token("alice", Some(&tenant), &["admin"]);
    let record = app.get(&path, &admin).await.json();
    assert_eq!(
        record["published_by"],
        "repo:acme/infra:ref:refs/heads/main"
    );

    // `pinfold verify --github-oidc` takes its token the same way: the
    // record is read with it (still pending, so code 6, before any MCP
    // server is touched), and a runtime that refuses gives code 5.
    let verify = |env: [(&'static str, String); 2]| {
        let base = base.clone();
        let tenant = tenant.clone();
        async move {
            let env = [(env[0].0, env[0].1.as_str()), (env[1].0, env[1].1.as_str())];
            pinfold(
                &[
                    "verify",
                    "--server",
                    &base,
                    "--tenant",
                    &tenant,
                    "--name",
                    SERVER,
                    "--version",
                    "1.0.0",
                    "--against",
                    "http://127.0.0.1:9/mcp",
                    "--github-oidc",
                ],
                &env,
            )
            .await
        }
    };
    let run = verify([
        ("ACTIONS_ID_TOKEN_REQUEST_URL", runtime_url.clone()),
        ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", REQUEST_TOKEN.to_owned()),
    ])
    .await;
    assert_code(&run, 6);
    assert!(run.stderr.contains("pending"), "{}", run.stderr);
    assert_eq!(gh.audiences.lock().unwrap().len(), 2);
    let run = verify([
        ("ACTIONS_ID_TOKEN_REQUEST_URL", runtime_url.clone()),
        (
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
            "not-the-runtime-token".to_owned(),
        ),
    ])
    .await;
    assert_code(&run, 5);
    assert!(
        !run.stderr.contains("not-the-runtime-token"),
        "{}",
        run.stderr
    );

    // A release-tag run of the same workflow maps to reader only: the
    // mapped role is what decides, so publishing is refused (403), code 5.
    *gh.claims.lock().unwrap() = github_claims(
        "acme",
        "acme/infra/.github/workflows/pinfold.yml@refs/tags/v1.1.0",
    );
    let v110 = card_file(dir.path(), "1.1.0", "Files in an Acme workspace");
    let run = oidc(v110.clone(), vec![]).await;
    assert_code(&run, 5);
    assert!(run.stdout.contains("403 forbidden_role"), "{}", run.stdout);
    // ...while reading is allowed to it (the rule did admit it as reader).
    let reader_token = gh.mint(&base);
    assert_eq!(app.get(&path, &reader_token).await.status, 200);

    // Another owner's repository matches no rule: 401, code 5 (its own
    // `tenant`/`roles` claims would not help: the issuer has rules).
    let mut evil = github_claims(
        "evil",
        "evil/infra/.github/workflows/pinfold.yml@refs/heads/main",
    );
    evil["tenant"] = json!(tenant);
    evil["roles"] = json!(["admin"]);
    *gh.claims.lock().unwrap() = evil;
    let run = oidc(v110.clone(), vec![]).await;
    assert_code(&run, 5);
    assert!(
        run.stdout.contains("401 invalid_token") && run.stdout.contains("no claim rule"),
        "{}",
        run.stdout
    );

    // A token for another audience is refused by Pinfold.
    *gh.claims.lock().unwrap() = github_claims("acme", MAIN_REF);
    let run = oidc(
        v110.clone(),
        vec!["--audience".into(), "https://elsewhere.example".into()],
    )
    .await;
    assert_code(&run, 5);
    assert!(run.stdout.contains("wrong audience"), "{}", run.stdout);
    assert_eq!(
        gh.audiences.lock().unwrap().last().map(String::as_str),
        Some("https://elsewhere.example")
    );

    // The runtime refuses a wrong request token: code 5, its status shown,
    // the request token never printed.
    let wrong_env = [
        ("ACTIONS_ID_TOKEN_REQUEST_URL", runtime_url.as_str()),
        ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "not-the-runtime-token"),
    ];
    let run = pinfold(
        &[
            "publish",
            &v110,
            "--server",
            &base,
            "--tenant",
            &tenant,
            "--github-oidc",
        ],
        &wrong_env,
    )
    .await;
    assert_code(&run, 5);
    assert!(run.stdout.contains("HTTP 401"), "{}", run.stdout);
    assert!(
        !run.stdout.contains("not-the-runtime-token")
            && !run.stderr.contains("not-the-runtime-token")
    );

    // Outside Actions, or without `permissions: id-token: write`: code 5
    // and the fix named.
    let run = pinfold(
        &[
            "publish",
            &v110,
            "--server",
            &base,
            "--tenant",
            &tenant,
            "--github-oidc",
        ],
        &[],
    )
    .await;
    assert_code(&run, 5);
    assert!(
        run.stdout
            .contains("ACTIONS_ID_TOKEN_REQUEST_URL is not set")
            && run.stdout.contains("permissions: id-token: write"),
        "{}",
        run.stdout
    );

    // Finally the main-branch workflow publishes 1.1.0.
    let run = oidc(v110, vec![]).await;
    assert_code(&run, 0);
}

#[tokio::test]
async fn github_oidc_asks_for_a_fresh_token_when_a_wait_outlasts_it() {
    let gh = FakeGithub::new();
    *gh.lifetime.lock().unwrap() = 2;
    let gh_base = gh.serve().await;
    let tenant = fresh_tenant_id();
    let (app, base) = github_pinfold(&gh_base, &tenant, 0).await;
    let dir = tempfile::tempdir().unwrap();
    let file = card_file(dir.path(), "1.0.0", "Files in an Acme workspace");
    let runtime_url = format!("{gh_base}/idtoken?api-version=2.0");
    let mut child = command(
        &[
            "publish",
            &file,
            "--server",
            &base,
            "--tenant",
            &tenant,
            "--github-oidc",
            "--wait-approved",
            "--timeout",
            "60s",
        ],
        &[
            ("ACTIONS_ID_TOKEN_REQUEST_URL", runtime_url.as_str()),
            ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", REQUEST_TOKEN),
        ],
    );
    let child = child
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Let the first token expire (2 s, no leeway), then approve.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let path = format!(
        "/v1/tenants/{tenant}/servers/{}/versions/1.0.0/review",
        SERVER.replace('/', "%2F")
    );
    let r = app
        .send(
            "POST",
            &path,
            Some(&token("rita", Some(&tenant), &["reviewer"])),
            Some(json!({"decision": "approve"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    let (code, lines) = finish(child).await;
    assert_eq!(code, 0, "{lines:?}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with(&format!("approved {SERVER} 1.0.0 ")),
        "{lines:?}"
    );
    assert!(
        gh.audiences.lock().unwrap().len() >= 2,
        "a fresh token was asked for"
    );
}

/// Every claim-rule snippet the docs show (README, docs/CLI.md, the example
/// workflow's header) is a configuration Pinfold accepts, with its rules.
#[test]
fn documented_claim_rules_load() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let read = |rel: &str| std::fs::read_to_string(root.join(rel)).unwrap();
    let mut snippets = Vec::new();
    for doc in ["README.md", "docs/CLI.md"] {
        let text = read(doc);
        let mut lines = text.lines();
        while let Some(l) = lines.next() {
            if l.trim() == "```toml" {
                let body: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
                let body = body.join("\n");
                if body.contains("[[auth.issuers.rules]]") && body.starts_with("[[auth.issuers]]") {
                    snippets.push((doc.to_owned(), body));
                }
            }
        }
    }
    // The workflow's header comment: the lines between "(pinfold.toml)" and
    // the exit-code paragraph, without their "#   " prefix.
    let wf = read("examples/github-actions/pinfold.yml");
    let toml: Vec<&str> = wf
        .lines()
        .skip_while(|l| !l.contains("pinfold.toml"))
        .skip(1)
        .take_while(|l| !l.contains("Exit codes"))
        .map(|l| l.trim_start_matches('#').trim_start())
        .collect();
    snippets.push((
        "examples/github-actions/pinfold.yml".into(),
        toml.join("\n"),
    ));
    assert!(snippets.len() >= 3, "{snippets:?}");
    let dir = tempfile::tempdir().unwrap();
    for (doc, body) in snippets {
        let file = dir.path().join("snippet.toml");
        std::fs::write(&file, &body).unwrap();
        let cfg = pinfold_server::config::Config::load(Some(&file), &Default::default())
            .unwrap_or_else(|e| panic!("{doc}: {e:#}\n{body}"));
        let issuers = pinfold_server::serve::issuer_configs(&cfg).unwrap();
        assert!(
            issuers.iter().any(
                |i| matches!(&i.mapping, pinfold_http::auth::ClaimMapping::Rules(r) if !r.is_empty())
            ),
            "{doc}: no claim rules in\n{body}"
        );
        // What the documented rules grant the example workflow's jobs: the
        // job bound to the pinfold-publish environment publishes; the same
        // workflow's other jobs (verify runs the server under test) only
        // read; another repository of the same owner name gets nothing.
        let granted = |extra: Value| -> Option<Vec<pinfold_http::auth::Role>> {
            let mut claims = json!({
                "sub": "repo:acme/files:ref:refs/tags/v1.2.0",
                "repository": "acme/files", "repository_id": "123456789",
                "repository_owner": "acme", "repository_owner_id": "4242",
                "job_workflow_ref": "acme/files/.github/workflows/pinfold.yml@refs/tags/v1.2.0",
                "ref": "refs/tags/v1.2.0",
            });
            for (k, v) in extra.as_object().unwrap() {
                claims[k] = v.clone();
            }
            let claims = claims.as_object().unwrap();
            issuers.iter().find_map(|i| match &i.mapping {
                pinfold_http::auth::ClaimMapping::Rules(rules) => rules
                    .iter()
                    .find(|r| r.matches(claims))
                    .map(|r| r.roles().to_vec()),
                _ => None,
            })
        };
        use pinfold_http::auth::Role;
        assert_eq!(
            granted(json!({"environment": "pinfold-publish",
                           "sub": "repo:acme/files:environment:pinfold-publish"})),
            Some(vec![Role::Publisher]),
            "{doc}"
        );
        assert_eq!(granted(json!({})), Some(vec![Role::Reader]), "{doc}");
        assert_eq!(
            granted(json!({"environment": "prod"})),
            Some(vec![Role::Reader]),
            "{doc}"
        );
        assert_eq!(
            granted(
                json!({"environment": "pinfold-publish", "repository_owner_id": "666",
                           "repository_id": "777"})
            ),
            None,
            "{doc}: a re-registered owner name"
        );
    }
}
