//! `pinfold capture` and `pinfold verify` against real MCP servers from
//! npm, seen as real clients see them: the reference
//! `@modelcontextprotocol/server-everything` (which registers some tools
//! only for clients that advertise roots, sampling or elicitation), over
//! stdio and over Streamable HTTP, compared with a client on the official
//! TypeScript SDK that advertises what Claude Desktop and VS Code do
//! (`examples/mcp-peers/sdk-list-tools.mjs`).
//!
//! The packages come from `npm ci --prefix examples/mcp-peers` (CI runs
//! it); without them these tests print a notice and skip, unless
//! `PINFOLD_REQUIRE_MCP_PEERS` is set.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use pinfold_tests::*;
use serde_json::Value;

use super::capture::{Run, pinfold, publish};

/// The tools server-everything registers only for richer clients (the
/// ones this machine's version registers for roots, sampling and
/// elicitation).
const CONDITIONAL: [&str; 3] = [
    "get-roots-list",
    "trigger-elicitation-request",
    "trigger-sampling-request",
];

/// `examples/mcp-peers` with its packages installed; `None` (after saying
/// why) when they are missing and `PINFOLD_REQUIRE_MCP_PEERS` is not set.
pub(crate) fn peers() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/mcp-peers");
    let required = std::env::var_os("PINFOLD_REQUIRE_MCP_PEERS").is_some();
    let installed = dir
        .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
        .is_file();
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed || !node {
        assert!(
            !required,
            "run `npm ci --prefix examples/mcp-peers` first (and have node on PATH)"
        );
        eprintln!(
            "skipped: examples/mcp-peers has no node_modules or node is missing (npm ci --prefix examples/mcp-peers)"
        );
        return None;
    }
    Some(dir)
}

fn everything(dir: &Path) -> String {
    dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
        .display()
        .to_string()
}

/// The tool names an SDK client advertising roots, sampling and
/// elicitation sees.
async fn sdk_tools(dir: &Path, args: &[&str]) -> BTreeSet<String> {
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new("node")
            .arg(dir.join("sdk-list-tools.mjs"))
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the SDK client finishes")
    .expect("node runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    names(&v["tools"])
}

fn names(tools: &Value) -> BTreeSet<String> {
    tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            t.as_str()
                .or_else(|| t["name"].as_str())
                .unwrap()
                .to_owned()
        })
        .collect()
}

fn card_tools(r: &Run) -> BTreeSet<String> {
    names(&r.json()["signature"]["tools"])
}

/// server-everything over Streamable HTTP on a spare port; stopped when
/// dropped.
struct HttpEverything {
    child: tokio::process::Child,
    url: String,
}

impl Drop for HttpEverything {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

async fn http_everything(dir: &Path) -> HttpEverything {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let child = tokio::process::Command::new("node")
        .args([everything(dir).as_str(), "streamableHttp"])
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node starts");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "server-everything listens within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    HttpEverything {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    }
}

/// Capture (default profile) sees exactly the tools the SDK client sees;
/// `--client-capabilities none` sees fewer: those registered only for
/// richer clients are missing. The card records the profile.
async fn compare(sdk: BTreeSet<String>, target: &[&str]) {
    let mut args = vec!["capture"];
    args.extend_from_slice(target);
    let r = pinfold(&args, &[]).await;
    r.expect(0);
    assert_eq!(card_tools(&r), sdk, "{}", r.stderr);
    assert!(
        r.stderr.contains("client capabilities: default ("),
        "{}",
        r.stderr
    );
    let recorded = &r.json()["_meta"]["io.github.pinfold/capture"]["clientCapabilities"];
    assert_eq!(recorded[0]["profile"], "default", "{recorded}");
    assert_eq!(
        recorded[0]["capabilities"]["roots"]["listChanged"], true,
        "{recorded}"
    );

    let mut args = vec!["capture", "--client-capabilities", "none"];
    args.extend_from_slice(target);
    let bare = pinfold(&args, &[]).await;
    bare.expect(0);
    let bare_tools = card_tools(&bare);
    let only_richer: Vec<&str> = sdk.difference(&bare_tools).map(String::as_str).collect();
    for t in CONDITIONAL {
        assert!(only_richer.contains(&t), "{t} in {only_richer:?}");
    }
    assert!(bare_tools.is_subset(&sdk));
    assert_eq!(
        bare.json()["_meta"]["io.github.pinfold/capture"]["clientCapabilities"][0]["profile"],
        "none"
    );

    // Captures under several profiles, merged: the union of the lists and
    // of the profiles.
    let dir = tempfile::tempdir().unwrap();
    let bare_file = dir.path().join("none.json");
    std::fs::write(&bare_file, &bare.stdout).unwrap();
    let mut args = vec!["capture"];
    args.extend_from_slice(target);
    args.extend_from_slice(&["--merge", bare_file.to_str().unwrap()]);
    let merged = pinfold(&args, &[]).await;
    merged.expect(0);
    assert_eq!(card_tools(&merged), sdk);
    let profiles: Vec<Value> =
        merged.json()["_meta"]["io.github.pinfold/capture"]["clientCapabilities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["profile"].clone())
            .collect();
    assert_eq!(profiles, [Value::from("default"), Value::from("none")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_sees_what_an_sdk_client_sees_of_server_everything_over_stdio() {
    let Some(dir) = peers() else {
        return;
    };
    let server = everything(&dir);
    let sdk = sdk_tools(&dir, &["stdio", "node", &server, "stdio"]).await;
    for t in CONDITIONAL {
        assert!(sdk.contains(t), "the SDK client sees {t}: {sdk:?}");
    }
    let command = format!("node {server} stdio");
    compare(sdk, &["--command", &command]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_sees_what_an_sdk_client_sees_of_server_everything_over_http() {
    let Some(dir) = peers() else {
        return;
    };
    let server = http_everything(&dir).await;
    let sdk = sdk_tools(&dir, &["http", &server.url]).await;
    for t in CONDITIONAL {
        assert!(sdk.contains(t), "the SDK client sees {t}: {sdk:?}");
    }
    compare(sdk, &[&server.url]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signature_captured_without_capabilities_fails_verify_naming_what_richer_clients_see() {
    let Some(dir) = peers() else {
        return;
    };
    let server = http_everything(&dir).await;
    let app = TestApp::new().await;
    let base = serve_local(app.router.clone()).await;
    let name = "io.github.pinfold/everything";
    let r = pinfold(
        &[
            "capture",
            &server.url,
            "--client-capabilities",
            "none",
            "--name",
            name,
            "--version",
            "1.0.0",
        ],
        &[],
    )
    .await;
    r.expect(0);
    publish(&app, &r.json(), true).await;
    let token = app.as_roles("ci-bot", &["reader"]);
    let verify = |extra: &'static [&'static str]| {
        let mut args = vec![
            "verify".to_owned(),
            "--server".into(),
            base.clone(),
            "--tenant".into(),
            app.tenant.to_string(),
            "--name".into(),
            name.into(),
            "--against".into(),
            server.url.clone(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let token = token.clone();
        async move { pinfold(&args, &[("PINFOLD_TOKEN", token.as_str())]).await }
    };
    // The default profile: what real clients see is more than was signed.
    let r = verify(&["--json"]).await;
    r.expect(1);
    assert!(
        r.stderr.contains("verify: client capabilities: default ("),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains(
            "the signature was captured under client capabilities none; this check advertises default"
        ),
        "{}",
        r.stderr
    );
    let report = r.json();
    assert_eq!(report["client_capabilities"]["profile"], "default");
    let undeclared: BTreeSet<&str> = report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["kind"] == "undeclared_tool")
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    for t in CONDITIONAL {
        assert!(undeclared.contains(t), "{t} named in {report}");
    }
    // The table says which profile it used.
    let r = verify(&[]).await;
    r.expect(1);
    assert!(
        r.stdout.contains("Client capabilities: default"),
        "{}",
        r.stdout
    );
    // Under the profile it was captured with, it conforms.
    let r = verify(&["--client-capabilities", "none"]).await;
    r.expect(0);
    assert!(!r.stderr.contains("captured under"), "{}", r.stderr);
    assert!(
        r.stdout.contains("Client capabilities: none"),
        "{}",
        r.stdout
    );
}
