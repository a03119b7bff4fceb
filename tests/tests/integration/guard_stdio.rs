//! `pinfold guard -- COMMAND`: the reference `@modelcontextprotocol/server-everything`
//! from npm run over stdio under its approved signature, driven by a
//! client on the official TypeScript SDK (`examples/mcp-peers/sdk-guarded.mjs`)
//! that starts the guard as desktop clients start servers. The signature
//! is what `pinfold capture` saw, approved in a running Pinfold, with one
//! tool left out (the server offers it anyway) and one description that
//! differs from what the server lists (as after a rug pull).
//!
//! Skipped with a notice without `npm ci --prefix examples/mcp-peers`,
//! unless `PINFOLD_REQUIRE_MCP_PEERS` is set (CI).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use pinfold_tests::*;
use serde_json::{Value, json};

use super::capture::{pinfold, publish};
use super::mcp_peers::peers;

const NAME: &str = "io.github.pinfold/everything-guarded";
const PINFOLD: &str = env!("CARGO_BIN_EXE_pinfold-under-test");

fn everything(dir: &Path) -> String {
    dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
        .display()
        .to_string()
}

/// Runs the SDK client against `pinfold guard <guard args> -- node
/// server-everything stdio`; its JSON output and the guard's stderr.
async fn through_guard(
    dir: &Path,
    token: &str,
    guard: &[&str],
    calls: Value,
) -> (Option<Value>, String) {
    let client = [
        "node".to_owned(),
        dir.join("sdk-guarded.mjs").display().to_string(),
    ];
    client_through_guard(&client, dir, token, guard, calls).await
}

/// The same with another client: `client` is its command line, which
/// takes the calls and then the server's command.
async fn client_through_guard(
    client: &[String],
    dir: &Path,
    token: &str,
    guard: &[&str],
    calls: Value,
) -> (Option<Value>, String) {
    let mut cmd = tokio::process::Command::new(&client[0]);
    cmd.args(&client[1..])
        .arg(calls.to_string())
        .arg(PINFOLD)
        .arg("guard")
        .args(guard)
        .args(["--", "node", &everything(dir), "stdio"])
        .env("PINFOLD_TOKEN", token)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(90), cmd.output())
        .await
        .expect("the SDK client finishes")
        .expect("node runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = out
        .status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten();
    (json, stderr)
}

fn names(report: &Value) -> BTreeSet<String> {
    report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// A TCP forwarder to `base`, on a port of its own: stopping it makes
/// Pinfold unreachable at that address while the app runs on.
struct Forwarder {
    url: String,
    task: tokio::task::JoinHandle<()>,
}

async fn forwarder(base: &str) -> Forwarder {
    let target = base.trim_start_matches("http://").to_owned();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut inbound, _)) = listener.accept().await else {
                return;
            };
            let target = target.clone();
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    Forwarder { url, task }
}

/// A running Pinfold with server-everything's capture approved, less
/// get-env and with get-sum's description as reviewed; its base URL and
/// the tools the capture listed.
async fn approved_everything(dir: &Path) -> (TestApp, String, BTreeSet<String>) {
    let app = TestApp::new().await;
    let base = serve_local(app.router.clone()).await;
    let command = format!("node {} stdio", everything(dir));
    let r = pinfold(
        &[
            "capture",
            "--command",
            &command,
            "--name",
            NAME,
            "--version",
            "1.0.0",
        ],
        &[],
    )
    .await;
    r.expect(0);
    let mut card = r.json();
    let tools = card["signature"]["tools"].as_array_mut().unwrap();
    let listed: BTreeSet<String> = tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    for t in ["echo", "get-env", "get-sum", "toggle-simulated-logging"] {
        assert!(
            listed.contains(t),
            "server-everything lists {t}: {listed:?}"
        );
    }
    // Reviewed without get-env (which prints the server's environment), and
    // with get-sum's description as it was at review: the server now says
    // something else.
    tools.retain(|t| t["name"] != "get-env");
    for t in tools.iter_mut() {
        if t["name"] == "get-sum" {
            t["description"] = json!("Returns the sum of two numbers (as reviewed).");
        }
    }
    publish(&app, &card, true).await;
    (app, base, listed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_client_sees_only_the_reviewed_tools_of_a_real_server_over_stdio() {
    let Some(dir) = peers() else {
        return;
    };
    let (app, base, listed) = approved_everything(&dir).await;
    let token = app.as_roles("desktop", &["reader"]);
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().to_str().unwrap().to_owned();
    let tenant = app.tenant.to_string();

    let calls = json!([
        {"name": "echo", "arguments": {"message": "through the guard"}},
        {"name": "get-env", "arguments": {}},
        {"name": "get-sum", "arguments": {"a": 1, "b": 2}},
        {"name": "echo", "arguments": {"message": 5}},
    ]);
    let guard = [
        "--url",
        &base,
        "--tenant",
        &tenant,
        "--server",
        NAME,
        "--cache-dir",
        &cache_dir,
    ];
    let (report, stderr) = through_guard(&dir, &token, &guard, calls.clone()).await;
    let report = report.unwrap_or_else(|| panic!("the client ran through the guard: {stderr}"));
    let mut expected = listed.clone();
    expected.remove("get-env");
    expected.remove("get-sum");
    assert_eq!(names(&report), expected, "{stderr}");
    let results = report["calls"].as_array().unwrap();
    // A reviewed tool: the server's own answer.
    let echoed = results[0]["result"]["content"][0]["text"].as_str().unwrap();
    assert!(echoed.contains("through the guard"), "{report}");
    // Not reviewed, and drifted: refused by the guard with its code.
    assert_eq!(results[1]["error"]["code"], -32010, "{report}");
    assert_eq!(results[1]["error"]["data"]["reason"], "undeclared");
    assert_eq!(results[2]["error"]["code"], -32010);
    assert_eq!(results[2]["error"]["data"]["reason"], "drifted");
    assert_eq!(
        results[2]["error"]["data"]["changes"],
        json!(["description_changed"])
    );
    // Arguments outside the reviewed schema: a tool execution error.
    assert_eq!(results[3]["result"]["isError"], true, "{report}");
    assert!(
        results[3]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("/message")
    );
    assert!(
        stderr.contains(&format!("enforcing {NAME} 1.0.0")),
        "{stderr}"
    );
    assert!(stderr.contains("\"get-env\""), "{stderr}");

    // --calls read_only: a tool that is not read-only is refused before
    // the server, a read-only one goes through.
    let mut read_only = guard.to_vec();
    read_only.extend(["--calls", "read_only"]);
    let (report, stderr) = through_guard(
        &dir,
        &token,
        &read_only,
        json!([
            {"name": "toggle-simulated-logging", "arguments": {}},
            {"name": "echo", "arguments": {"message": "read"}},
        ]),
    )
    .await;
    let report = report.unwrap_or_else(|| panic!("{stderr}"));
    // The cached signature was revalidated, not read again.
    assert!(
        stderr.contains("unchanged since it was cached (ETag)"),
        "{stderr}"
    );
    let results = report["calls"].as_array().unwrap();
    assert_eq!(results[0]["result"]["isError"], true, "{report}");
    assert!(
        results[0]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("read_only")
    );
    assert!(results[1]["result"]["isError"].is_null(), "{report}");

    // Pinfold unreachable: the cached signature is enforced. Through a
    // forwarder first (so the cache is keyed by its address), then with
    // the forwarder stopped.
    let fwd = forwarder(&base).await;
    let mut via = guard.to_vec();
    via[1] = &fwd.url;
    let (report, stderr) = through_guard(
        &dir,
        &token,
        &via,
        json!([{"name": "get-env", "arguments": {}}]),
    )
    .await;
    assert_eq!(
        report.unwrap_or_else(|| panic!("{stderr}"))["calls"][0]["error"]["code"],
        -32010
    );
    fwd.task.abort();
    let _ = fwd.task.await;
    let (report, stderr) = through_guard(
        &dir,
        &token,
        &via,
        json!([{"name": "get-env", "arguments": {}}]),
    )
    .await;
    let report = report.unwrap_or_else(|| panic!("started offline: {stderr}"));
    assert_eq!(names(&report), expected);
    assert_eq!(report["calls"][0]["error"]["data"]["reason"], "undeclared");
    assert!(stderr.contains("enforcing the cached"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_approved_signature_strict_does_not_start_the_server() {
    let app = TestApp::new().await;
    let base = serve_local(app.router.clone()).await;
    let token = app.as_roles("desktop", &["reader"]);
    let cache = tempfile::tempdir().unwrap();
    let marker = cache.path().join("started");
    let script = format!("touch {}", marker.display());
    let tenant = app.tenant.to_string();
    let args = |mode: &'static str| {
        vec![
            "guard".to_owned(),
            "--url".into(),
            base.clone(),
            "--tenant".into(),
            tenant.clone(),
            "--server".into(),
            "io.github.pinfold/never-published".into(),
            "--cache-dir".into(),
            cache.path().display().to_string(),
            "--mode".into(),
            mode.into(),
            "--".into(),
            "sh".into(),
            "-c".into(),
            script.clone(),
        ]
    };
    let r = pinfold(&args("strict"), &[("PINFOLD_TOKEN", token.as_str())]).await;
    r.expect(6);
    assert!(r.stderr.contains("no approved signature"), "{}", r.stderr);
    assert!(!marker.exists(), "the server was started");
    // Permissive runs it, every tool undeclared (here: it exits at once).
    // (Its end and the end of the guard's empty stdin race: 3 or 0.)
    let r = pinfold(&args("permissive"), &[("PINFOLD_TOKEN", token.as_str())]).await;
    assert!(matches!(r.code, 0 | 3), "{} {}", r.code, r.stderr);
    assert!(
        r.stderr.contains("every tool is undeclared"),
        "{}",
        r.stderr
    );
    assert!(marker.exists());
    // No token: refused before anything else.
    let r = pinfold(&args("strict"), &[]).await;
    r.expect(5);
    assert!(r.stderr.contains("PINFOLD_TOKEN"), "{}", r.stderr);
}

/// A Python with the official Python SDK (`mcp` from PyPI), named by
/// `PINFOLD_MCP_PYTHON` (`.ci/run` makes one in `target/mcp-py-venv`);
/// `None` (after saying why) without it, unless `PINFOLD_REQUIRE_MCP_PY`
/// is set.
pub(crate) fn python_sdk() -> Option<String> {
    let python = std::env::var("PINFOLD_MCP_PYTHON")
        .ok()
        .filter(|p| !p.is_empty());
    let works = python.as_ref().is_some_and(|p| {
        std::process::Command::new(p)
            .args(["-c", "import mcp"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if !works {
        assert!(
            std::env::var_os("PINFOLD_REQUIRE_MCP_PY").is_none(),
            "PINFOLD_MCP_PYTHON must name a python with the mcp package"
        );
        eprintln!("skipped: set PINFOLD_MCP_PYTHON to a python with `pip install mcp`");
        return None;
    }
    python
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_client_sees_the_same_through_the_guard() {
    let (Some(dir), Some(python)) = (peers(), python_sdk()) else {
        return;
    };
    let client = [python, dir.join("py-guarded.py").display().to_string()];
    // What the Python client sees of the server itself (it advertises no
    // roots, sampling or elicitation, so it is offered fewer tools).
    let direct = tokio::process::Command::new(&client[0])
        .arg(&client[1])
        .arg("[]")
        .args(["node", &everything(&dir), "stdio"])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .expect("python runs");
    assert!(
        direct.status.success(),
        "{}",
        String::from_utf8_lossy(&direct.stderr)
    );
    let direct: Value = serde_json::from_slice(&direct.stdout).unwrap();
    let (app, base, _) = approved_everything(&dir).await;
    let token = app.as_roles("desktop", &["reader"]);
    let cache = tempfile::tempdir().unwrap();
    let tenant = app.tenant.to_string();
    let guard = [
        "--url",
        &base,
        "--tenant",
        &tenant,
        "--server",
        NAME,
        "--cache-dir",
        cache.path().to_str().unwrap(),
    ];
    let (report, stderr) = client_through_guard(
        &client,
        &dir,
        &token,
        &guard,
        json!([
            {"name": "echo", "arguments": {"message": "from python"}},
            {"name": "get-env", "arguments": {}},
        ]),
    )
    .await;
    let report =
        report.unwrap_or_else(|| panic!("the Python client ran through the guard: {stderr}"));
    let mut expected = names(&direct);
    assert!(expected.remove("get-env") && expected.remove("get-sum"));
    assert_eq!(names(&report), expected, "{stderr}");
    let results = report["calls"].as_array().unwrap();
    let echoed = results[0]["result"]["content"][0]["text"].as_str().unwrap();
    assert!(echoed.contains("from python"), "{report}");
    assert_eq!(results[1]["error"]["code"], -32010, "{report}");
    assert_eq!(results[1]["error"]["data"]["reason"], "undeclared");
}

/// `examples/ts-upstream` with its packages; `None` (after saying why)
/// without them, unless `PINFOLD_REQUIRE_TS_PEER` is set (CI).
fn ts_upstream() -> Option<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/ts-upstream");
    if dir.join("node_modules/@modelcontextprotocol/sdk").is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("PINFOLD_REQUIRE_TS_PEER").is_none(),
        "run `npm ci --prefix examples/ts-upstream` first"
    );
    eprintln!("skipped: npm ci --prefix examples/ts-upstream");
    None
}

/// A read-only route over a tool that resolves its annotations per call
/// (the TypeScript SDK upstream, extension shape, over stdio): the guard
/// asks the server how each call resolves, forwards the read and refuses
/// the delete of the same tool, and the tool listed with its worst case
/// is shown as reviewed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_route_forwards_a_read_and_refuses_a_delete_of_a_resolvable_tool() {
    let (Some(dir), Some(ts)) = (peers(), ts_upstream()) else {
        return;
    };
    let app = TestApp::new().await;
    let base = serve_local(app.router.clone()).await;
    let card: Value = serde_json::from_slice(
        &std::fs::read(ts.join("manage-files-extension-1.0.0.json")).unwrap(),
    )
    .unwrap();
    let name = card["name"].as_str().unwrap().to_owned();
    publish(&app, &card, true).await;
    let token = app.as_roles("desktop", &["reader"]);
    let cache = tempfile::tempdir().unwrap();
    let tenant = app.tenant.to_string();
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(dir.join("sdk-guarded.mjs"))
        .arg(
            json!([
                {"name": "manage_files", "arguments": {"path": "/notes.txt", "action": "read"}},
                {"name": "manage_files", "arguments": {"path": "/notes.txt", "action": "delete"}},
            ])
            .to_string(),
        )
        .arg(PINFOLD)
        .args([
            "guard",
            "--url",
            &base,
            "--tenant",
            &tenant,
            "--server",
            &name,
            "--calls",
            "read_only",
            "--cache-dir",
            cache.path().to_str().unwrap(),
            "--",
            "node",
        ])
        .arg(ts.join("server.mjs"))
        .args(["--stdio", "--shape", "extension"])
        .env("PINFOLD_TOKEN", &token)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(90), cmd.output())
        .await
        .expect("the SDK client finishes")
        .expect("node runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        names(&report),
        BTreeSet::from(["manage_files".to_owned()]),
        "{stderr}"
    );
    let results = report["calls"].as_array().unwrap();
    // The read resolved read-only: the server answered it.
    assert_eq!(
        results[0]["result"]["content"][0]["text"], "manage_files: read /notes.txt",
        "{report}"
    );
    // The delete resolved destructive: refused before the server.
    assert_eq!(results[1]["result"]["isError"], true, "{report}");
    let text = results[1]["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("read_only") && text.contains("as resolved"),
        "{text}"
    );
}
