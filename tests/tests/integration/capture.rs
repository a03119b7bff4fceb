//! `pinfold capture` and `pinfold verify` end to end: the command line as a
//! real process (`pinfold-under-test`, the binary's own `main`), against live MCP
//! servers — the reference upstream over Streamable HTTP and over stdio,
//! and the TypeScript SDK peer — and, for `verify`, a Pinfold serving the
//! suite's application over TCP (on SQLite or PostgreSQL, as the suite
//! runs).
//!
//! What a server lists is fetched here by hand too (JSON-RPC over plain
//! HTTP, [`raw_tools_list`]), so that "the draft holds the server's own
//! lists" is checked against something neither rmcp nor the capture code
//! produced.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use pinfold_core::Mode;
use pinfold_core::card::{Limits, ServerCard};
use pinfold_core::digest::canonical_bytes;
use pinfold_example_upstream::{Running, Switches};
use pinfold_tests::*;
use serde_json::{Value, json};

const PINFOLD: &str = env!("CARGO_BIN_EXE_pinfold-under-test");
const UPSTREAM: &str = env!("CARGO_BIN_EXE_example-upstream-e2e");
const NAME: &str = "io.github.pinfold/capture-e2e";
const SECRET: &str = "s3cret-header-value";

pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Run {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {}\nstderr: {}",
                self.stdout, self.stderr
            )
        })
    }

    #[track_caller]
    pub(crate) fn expect(&self, code: i32) -> &Run {
        assert_eq!(
            self.code, code,
            "exit code\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }
}

/// Runs the `pinfold` command line; `PINFOLD_TOKEN` only when given in `env`.
pub(crate) async fn pinfold<S: AsRef<std::ffi::OsStr>>(args: &[S], env: &[(&str, &str)]) -> Run {
    let mut cmd = tokio::process::Command::new(PINFOLD);
    cmd.args(args)
        .env_remove("PINFOLD_TOKEN")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("pinfold finished within 2 minutes")
        .expect("pinfold runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

async fn upstream(switches: Switches) -> Arc<Running> {
    Running::start("127.0.0.1:0".parse().unwrap(), switches)
        .await
        .expect("reference upstream starts")
}

/// One JSON-RPC exchange over plain HTTP: the session id (kept or new) and
/// the answer (the JSON body, or the message carrying an id on an SSE
/// stream; `Null` for a notification).
async fn rpc(
    http: &reqwest::Client,
    url: &str,
    body: Value,
    session: Option<String>,
) -> (Option<String>, Value) {
    let mut req = http
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(&body);
    if let Some(s) = &session {
        req = req
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", "2025-11-25");
    }
    let resp = req.send().await.unwrap();
    let session = resp
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned())
        .or(session);
    let sse = resp
        .headers()
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap().starts_with("text/event-stream"));
    let text = resp.text().await.unwrap();
    let answer = if sse {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| m.get("id").is_some())
            .unwrap_or(Value::Null)
    } else if text.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap()
    };
    (session, answer)
}

/// `tools/list` of a Streamable HTTP server fetched by hand: `initialize`
/// (2025-11-25), `notifications/initialized`, `tools/list` in that session.
async fn raw_tools_list(url: &str) -> Value {
    let http = reqwest::Client::new();
    let (session, init) = rpc(
        &http,
        url,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "pinfold-tests", "version": "1"}}}),
        None,
    )
    .await;
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    let (session, _) = rpc(
        &http,
        url,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        session,
    )
    .await;
    let (_, list) = rpc(
        &http,
        url,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        session,
    )
    .await;
    let result = list["result"].clone();
    assert!(result["tools"].is_array(), "{list}");
    result
}

/// Checks `observed` against `card` with core's containment, strictly.
#[track_caller]
fn assert_conformant(card: &Value, observed: &Value) {
    let report = pinfold_core::ops::verify(card, observed, Mode::Strict).unwrap();
    assert!(
        report.conformant,
        "{:?}\ncard: {card}\nobserved: {observed}",
        report.violations
    );
}

fn tool<'a>(card: &'a Value, name: &str) -> &'a Value {
    card["signature"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tool {name} in {card}"))
}

fn write(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
    p
}

// ----------------------------------------------------------------- capture

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_over_http_writes_a_publishable_draft_of_the_servers_lists() {
    let up = upstream(Switches::default()).await;
    let r = pinfold(&["capture", &up.url()], &[]).await;
    r.expect(0);
    let card = r.json();
    let parsed = ServerCard::from_value(&card, &Limits::default())
        .expect("the draft passes the registry's validation");
    // serverInfo.name is not a registry name: a default, said on stderr.
    assert_eq!(
        parsed.name.as_str(),
        "local.capture/pinfold-example-upstream"
    );
    assert!(
        r.stderr
            .contains("the draft is named local.capture/pinfold-example-upstream"),
        "{}",
        r.stderr
    );
    assert_eq!(card["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        card["remotes"],
        json!([{"type": "streamable-http", "url": up.url()}])
    );
    assert_eq!(parsed.signature.tools.len(), 3);
    assert_eq!(card["signature"]["prompts"], json!([]));
    // The draft holds exactly what the server lists.
    let lists = raw_tools_list(&up.url()).await;
    assert_conformant(&card, &lists);
    let listed: Vec<&Value> = lists["tools"].as_array().unwrap().iter().collect();
    for t in listed {
        let name = t["name"].as_str().unwrap();
        assert_eq!(
            canonical_bytes(tool(&card, name)),
            canonical_bytes(t),
            "{name} is kept as listed"
        );
    }
    // Progress: plain lines on stderr (no terminal here), the card alone on stdout.
    assert!(r.stderr.contains("capture: tools/list\n"), "{}", r.stderr);
    assert!(r.stderr.contains("speaks MCP 2026-07-28"), "{}", r.stderr);
    assert!(!r.stderr.contains('\r'), "{:?}", r.stderr);
    assert!(r.stdout.trim_start().starts_with('{'));

    // A server with only the initialize handshake gives the same signature.
    let legacy = upstream(Switches {
        legacy_only: true,
        ..Switches::default()
    })
    .await;
    let r2 = pinfold(&["capture", &legacy.url()], &[]).await;
    r2.expect(0);
    assert!(r2.stderr.contains("speaks MCP 2025-11-25"), "{}", r2.stderr);
    assert_eq!(
        canonical_bytes(&r2.json()["signature"]),
        canonical_bytes(&card["signature"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_runs_every_advertised_list_and_follows_cursors() {
    // Prompts, resources and templates too, one item per page.
    let up = upstream(Switches {
        catalog: true,
        page_size: Some(1),
        ..Switches::default()
    })
    .await;
    let r = pinfold(&["capture", &up.url()], &[]).await;
    r.expect(0);
    assert!(
        r.stderr
            .contains("lists: tools/list, prompts/list, resources/list, resources/templates/list"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("tools/list, page 3 (2 so far)"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("3 tools, 1 prompt, 1 resource, 1 resource template"),
        "{}",
        r.stderr
    );
    let card = r.json();
    ServerCard::from_value(&card, &Limits::default()).expect("valid card");
    let sig = &card["signature"];
    assert_eq!(sig["tools"].as_array().unwrap().len(), 3);
    assert_eq!(
        sig["prompts"],
        json!(pinfold_example_upstream::catalog_prompts())
    );
    assert_eq!(
        sig["resources"],
        json!(pinfold_example_upstream::catalog_resources())
    );
    assert_eq!(
        sig["resourceTemplates"],
        json!(pinfold_example_upstream::catalog_resource_templates())
    );
    // Every page of every list conforms, and so does a resource under the template.
    assert_conformant(&card, &raw_tools_list(&up.url()).await);
    assert_conformant(
        &card,
        &json!({
            "prompts": pinfold_example_upstream::catalog_prompts(),
            "resources": [{"uri": "file:///todo.txt", "name": "todo"}],
            "resourceTemplates": pinfold_example_upstream::catalog_resource_templates(),
        }),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_over_stdio_with_out_name_and_version() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("card.json");
    let command = format!("'{UPSTREAM}' --stdio");
    let r = pinfold(
        &[
            "capture",
            "--command",
            &command,
            "--out",
            out.to_str().unwrap(),
            "--name",
            NAME,
            "--version",
            "1.2.3",
        ],
        &[],
    )
    .await;
    r.expect(0);
    assert!(r.stdout.is_empty(), "the card goes to --out: {}", r.stdout);
    assert!(r.stderr.contains("(stdio)"), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("to {}", out.display())),
        "{}",
        r.stderr
    );
    let card: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    ServerCard::from_value(&card, &Limits::default()).expect("valid card");
    assert_eq!(card["name"], NAME);
    assert_eq!(card["version"], "1.2.3");
    assert!(
        card.get("remotes").is_none(),
        "no remote for a local server"
    );
    // The same server over HTTP lists the same things.
    let up = upstream(Switches::default()).await;
    let http = pinfold(&["capture", &up.url()], &[]).await;
    http.expect(0);
    assert_eq!(
        canonical_bytes(&card["signature"]),
        canonical_bytes(&http.json()["signature"])
    );
    assert_conformant(&card, &raw_tools_list(&up.url()).await);
    // The stdio switches work too: a capture of the flipped server differs.
    let flipped = pinfold(
        &[
            "capture",
            "--command",
            &format!("{command} --flip-destructive"),
        ],
        &[],
    )
    .await;
    flipped.expect(0);
    assert_eq!(
        tool(&flipped.json(), "list_files")["annotations"]["destructiveHint"],
        true
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merging_captures_with_different_annotations_gives_an_array_of_both() {
    let dir = tempfile::tempdir().unwrap();
    let up = upstream(Switches::default()).await;
    let plain = dir.path().join("plain.json");
    pinfold(
        &["capture", &up.url(), "--out", plain.to_str().unwrap()],
        &[],
    )
    .await
    .expect(0);
    // The same server under another "role": list_files turns destructive.
    up.update(|s| s.flip_destructive = true);
    let r = pinfold(
        &[
            "capture",
            &up.url(),
            "--merge",
            plain.to_str().unwrap(),
            "--name",
            NAME,
            "--version",
            "2.0.0",
        ],
        &[],
    )
    .await;
    r.expect(0);
    let card = r.json();
    ServerCard::from_value(&card, &Limits::default()).expect("valid card");
    assert_eq!(
        (card["name"].as_str(), card["version"].as_str()),
        (Some(NAME), Some("2.0.0"))
    );
    let plain_ann = pinfold_example_upstream::list_files_tool()["annotations"].clone();
    let flipped_ann = pinfold_example_upstream::flipped_list_files_annotations();
    let anns = tool(&card, "list_files")["annotations"]
        .as_array()
        .expect("an array of possibilities")
        .clone();
    assert_eq!(anns.len(), 2, "{anns:?}");
    assert!(
        anns.contains(&plain_ann) && anns.contains(&flipped_ann),
        "{anns:?}"
    );
    // Tools that did not change keep one object.
    assert!(tool(&card, "manage_files")["annotations"].is_object());
    // The merged signature holds the server in both states.
    assert_conformant(&card, &raw_tools_list(&up.url()).await);
    up.update(|s| s.flip_destructive = false);
    assert_conformant(&card, &raw_tools_list(&up.url()).await);

    // Files alone merge too; the first card's identity is kept.
    let merged = write(dir.path(), "merged.json", &card);
    let r = pinfold(
        &[
            "capture",
            "--merge",
            plain.to_str().unwrap(),
            merged.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    r.expect(0);
    let again = r.json();
    assert_eq!(again["name"], "local.capture/pinfold-example-upstream");
    assert_eq!(
        canonical_bytes(&again["signature"]),
        canonical_bytes(&card["signature"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_conflict_exits_non_zero_with_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let up = upstream(Switches::default()).await;
    let r = pinfold(&["capture", &up.url()], &[]).await;
    r.expect(0);
    let card = r.json();
    let a = write(dir.path(), "a.json", &card);
    let mut changed = card.clone();
    let i = changed["signature"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .position(|t| t["name"] == "list_files")
        .unwrap();
    changed["signature"]["tools"][i]["inputSchema"]["properties"]["recursive"] =
        json!({"type": "boolean"});
    let b = write(dir.path(), "b.json", &changed);
    let r = pinfold(
        &[
            "capture",
            "--merge",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    r.expect(1);
    let out = r.json();
    assert!(out.get("signature").is_none(), "no card is written: {out}");
    let conflicts = out["conflicts"].as_array().unwrap();
    assert_eq!(conflicts.len(), 1, "{out}");
    let c = &conflicts[0];
    assert_eq!(c["kind"], "input_schema");
    assert_eq!(c["item"], "list_files");
    let versions = c["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 2);
    let pointer = format!("/signature/tools/{i}/inputSchema");
    let original = &card["signature"]["tools"][i]["inputSchema"];
    let modified = &changed["signature"]["tools"][i]["inputSchema"];
    for (v, file) in [(original, &a), (modified, &b)] {
        let found = versions
            .iter()
            .find(|x| &x["value"] == v)
            .unwrap_or_else(|| panic!("version {v} missing: {out}"));
        assert_eq!(
            found["found_in"],
            json!([{"capture": file.display().to_string(), "pointer": pointer}])
        );
    }
    assert_eq!(versions[1]["differs_at"], json!(["/properties/recursive"]));
    assert!(r.stderr.contains("conflict"), "{}", r.stderr);
    assert!(r.stderr.contains("no card written"), "{}", r.stderr);
    // A live capture conflicting with a file: the same.
    let r = pinfold(&["capture", &up.url(), "--merge", b.to_str().unwrap()], &[]).await;
    r.expect(1);
    assert_eq!(r.json()["conflicts"][0]["item"], "list_files");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_reach_the_server_and_are_never_printed() {
    let up = upstream(Switches {
        require_header: Some(("X-Capture-Key".into(), SECRET.into())),
        ..Switches::default()
    })
    .await;
    let r = pinfold(&["capture", &up.url()], &[]).await;
    r.expect(3);
    assert!(r.stderr.contains("401"), "{}", r.stderr);
    let refused = up.rejected();
    assert!(refused >= 1);
    let header = format!("X-Capture-Key: {SECRET}");
    let r = pinfold(&["capture", &up.url(), "--header", &header], &[]).await;
    r.expect(0);
    assert_eq!(up.rejected(), refused, "every request carried the header");
    assert!(!r.stdout.contains(SECRET) && !r.stderr.contains(SECRET));
    let r = pinfold(&["capture", &up.url(), "-H", "X-Capture-Key s3cret"], &[]).await;
    r.expect(2);
    assert!(r.stderr.contains("Name: value"), "{}", r.stderr);
    let r = pinfold(&["capture", &up.url(), "-H", "Mcp-Session-Id: x"], &[]).await;
    r.expect(2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_failures_have_their_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens on port 1.
    let r = pinfold(&["capture", "http://127.0.0.1:1/mcp?token=abc"], &[]).await;
    r.expect(3);
    assert!(r.stderr.contains("cannot reach"), "{}", r.stderr);
    assert!(
        !r.stderr.contains("token=abc"),
        "the query is never shown: {}",
        r.stderr
    );
    let r = pinfold(&["capture", "--command", "/nonexistent/mcp-server"], &[]).await;
    r.expect(3);
    assert!(r.stderr.contains("cannot start"), "{}", r.stderr);
    // A program that is no MCP server: its stderr is quoted.
    let r = pinfold(
        &["capture", "--command", "sh -c 'echo not-an-mcp-server >&2'"],
        &[],
    )
    .await;
    r.expect(3);
    assert!(r.stderr.contains("not-an-mcp-server"), "{}", r.stderr);
    for args in [
        vec!["capture"],
        vec!["capture", "ftp://x/"],
        vec!["capture", "--merge", "/nonexistent.json"],
        vec!["capture", "http://127.0.0.1:1/", "--command", "x"],
        vec!["capture", "--command", "x", "-H", "A: b"],
    ] {
        pinfold(&args, &[]).await.expect(2);
    }
    let junk = write(dir.path(), "junk.json", &json!({"hello": 1}));
    let r = pinfold(&["capture", "--merge", junk.to_str().unwrap()], &[]).await;
    r.expect(2);
    assert!(r.stderr.contains("neither a card"), "{}", r.stderr);
    // Lists without a card need a name and version.
    let lists = write(dir.path(), "lists.json", &json!({"tools": []}));
    let r = pinfold(&["capture", "--merge", lists.to_str().unwrap()], &[]).await;
    r.expect(2);
    let r = pinfold(
        &[
            "capture",
            "--merge",
            lists.to_str().unwrap(),
            "--name",
            NAME,
            "--version",
            "0.1.0",
        ],
        &[],
    )
    .await;
    r.expect(0);
    assert_eq!(r.json()["signature"]["tools"], json!([]));
    // A URL after --merge is taken for a file: say so.
    let r = pinfold(
        &[
            "capture",
            "--merge",
            lists.to_str().unwrap(),
            "http://127.0.0.1:1/mcp",
        ],
        &[],
    )
    .await;
    r.expect(2);
    assert!(r.stderr.contains("URL before --merge"), "{}", r.stderr);
    // 4: a draft the registry would refuse is written, with the problems.
    let no_schema = write(
        dir.path(),
        "no-schema.json",
        &json!({"tools": [{"name": "t"}]}),
    );
    let r = pinfold(
        &[
            "capture",
            "--merge",
            no_schema.to_str().unwrap(),
            "--name",
            NAME,
            "--version",
            "0.1.0",
        ],
        &[],
    )
    .await;
    r.expect(4);
    assert_eq!(r.json()["signature"]["tools"][0]["name"], "t");
    assert!(
        r.stderr
            .contains("missing_field /signature/tools/0/inputSchema"),
        "{}",
        r.stderr
    );
    // An invalid --name is refused.
    let r = pinfold(
        &[
            "capture",
            "--merge",
            lists.to_str().unwrap(),
            "--name",
            "noslash",
            "--version",
            "1.0.0",
        ],
        &[],
    )
    .await;
    r.expect(2);
}

/// A TCP proxy in front of `upstream` that passes everything through until a
/// request carries `needle`, then drops that connection: a server that
/// fails in the middle of the listing, after a good handshake.
async fn failing_proxy(upstream: std::net::SocketAddr, needle: &'static [u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                    return;
                };
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                let back = tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut sr, &mut cw).await;
                });
                let mut buf = vec![0u8; 64 * 1024];
                let mut tail: Vec<u8> = Vec::new();
                loop {
                    let n = match cr.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    tail.extend_from_slice(&buf[..n]);
                    if tail.windows(needle.len()).any(|w| w == needle) {
                        // Both halves dropped: the client sees the
                        // connection close without an answer.
                        back.abort();
                        return;
                    }
                    let keep = tail.len().saturating_sub(needle.len());
                    tail.drain(..keep);
                    if sw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
                back.abort();
            });
        }
    });
    format!("http://{addr}/mcp")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_while_listing_never_shows_the_urls_secrets() {
    let p = Published::new().await;
    let base = failing_proxy(p.up.addr(), b"tools/list").await;
    let url =
        format!("{base}?api_key=q-secret-4711").replace("http://", "http://user:pw-secret-0815@");
    let with_token = [("PINFOLD_TOKEN", p.reader())];
    let with_token: Vec<(&str, &str)> = with_token.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let capture = pinfold(&["capture", &url], &[]).await;
    let verify = p.verify_against(NAME, &url, &[], &with_token).await;
    for (cmd, r) in [("capture", capture), ("verify", verify)] {
        // The handshake passed; the listing failed.
        r.expect(3);
        assert!(r.stderr.contains("tools/list"), "{cmd}: {}", r.stderr);
        assert!(r.stderr.contains(&base), "{cmd}: {}", r.stderr);
        for secret in ["q-secret-4711", "pw-secret-0815", "api_key"] {
            assert!(
                !r.stderr.contains(secret) && !r.stdout.contains(secret),
                "{cmd}: {secret} shown: {}",
                r.stderr
            );
        }
    }
}

/// A `--command` that is a wrapper: it forks the real server (which
/// ignores SIGTERM) and a helper, and never answers the handshake. When
/// the handshake times out, the whole process group goes, not only the
/// wrapper.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrapper_whose_server_hangs_the_handshake_leaves_no_process_behind() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("wrapper.pid");
    let script = dir.path().join("wrapper.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\necho $$ > \"$1\"\n(trap '' TERM; exec sleep 300) &\necho $! >> \"$1\"\nsleep 300 &\necho $! >> \"$1\"\nwait\n",
    )
    .unwrap();
    let command = format!("sh {} {}", script.display(), pid_file.display());
    let started = std::time::Instant::now();
    let r = pinfold(&["capture", "--command", &command, "--timeout", "2"], &[]).await;
    r.expect(3);
    assert!(
        r.stderr
            .contains("did not complete the MCP handshake within 2 s"),
        "{}",
        r.stderr
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    let pids: Vec<i32> = std::fs::read_to_string(&pid_file)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 3, "the wrapper and the two processes it forked");
    // None of them runs any more (gone, or a zombie awaiting its reaper)...
    for pid in &pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .unwrap_or("gone");
        assert!(
            matches!(state, "gone" | "Z"),
            "process {pid} still runs: {stat}"
        );
    }
    // ...and the wrapper led its own group (its pid is the group's id),
    // of which nothing is left.
    let left = process_group_members(pids[0]);
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A command where the URL belongs (`capture -- npx -y pkg`, `capture
/// npx`): a usage error that says to use --command, with the command as
/// it should be given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_given_as_the_url_is_told_to_use_command() {
    let r = pinfold(&["capture", "--", "npx", "-y", "@acme/mcp-server"], &[]).await;
    r.expect(2);
    assert!(
        r.stderr
            .contains("use --command: pinfold capture --command 'npx -y @acme/mcp-server'"),
        "{}",
        r.stderr
    );
    let r = pinfold(&["capture", "npx"], &[]).await;
    r.expect(2);
    assert!(
        r.stderr
            .contains("\"npx\" is not an http:// or https:// URL")
            && r.stderr.contains("--command npx"),
        "{}",
        r.stderr
    );
}

/// A server that wants credentials (HTTP 401) is reported as refusing
/// them, not as unreachable, with the flag that sends them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_is_reported_as_refused_credentials() {
    let up = upstream(Switches {
        require_header: Some(("authorization".into(), "Bearer good".into())),
        ..Switches::default()
    })
    .await;
    let r = pinfold(&["capture", &up.url()], &[]).await;
    r.expect(3);
    assert!(
        r.stderr
            .contains("refused the request: HTTP 401 Unauthorized")
            && r.stderr.contains("--header 'Authorization: Bearer ...'"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("cannot reach"), "{}", r.stderr);
    let ok = pinfold(
        &["capture", &up.url(), "-H", "Authorization: Bearer good"],
        &[],
    )
    .await;
    ok.expect(0);
}

/// Lists are sorted by name (uri, uriTemplate) whatever order the server
/// sent them in, each item kept exactly as sent; the summary counts "1
/// tool", not "1 tools".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_are_kept_as_sent_in_lists_sorted_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let b =
        json!({"name": "b_tool", "inputSchema": {"type": "object"}, "x-vendor": {"kept": true}});
    let a = json!({"name": "a_tool", "description": "first in the card", "inputSchema": {"type": "object"}});
    let two = write(dir.path(), "two.json", &json!({"tools": [b, a]}));
    let r = pinfold(
        &[
            "capture",
            "--merge",
            two.to_str().unwrap(),
            "--name",
            NAME,
            "--version",
            "1.0.0",
        ],
        &[],
    )
    .await;
    r.expect(0);
    let card = r.json();
    assert_eq!(
        card["signature"]["tools"],
        json!([a, b]),
        "sorted by name, each item as sent"
    );
    assert!(r.stderr.contains("(2 tools; digest"), "{}", r.stderr);
    let one = write(dir.path(), "one.json", &json!({"tools": [a]}));
    let r = pinfold(
        &[
            "capture",
            "--merge",
            one.to_str().unwrap(),
            "--name",
            NAME,
            "--version",
            "1.0.0",
        ],
        &[],
    )
    .await;
    r.expect(0);
    assert!(r.stderr.contains("(1 tool; digest"), "{}", r.stderr);
}

// --------------------------------------------------- TypeScript SDK peer

struct TsPeer {
    child: std::process::Child,
    url: String,
}

impl Drop for TsPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `examples/ts-upstream`; `None` (after saying why) when node or
/// its packages are missing and `PINFOLD_REQUIRE_TS_PEER` is not set.
fn ts_peer(shape: &str) -> Option<TsPeer> {
    use std::io::{BufRead as _, BufReader};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/ts-upstream");
    let required = std::env::var_os("PINFOLD_REQUIRE_TS_PEER").is_some();
    if !dir.join("node_modules/@modelcontextprotocol/sdk").is_dir() {
        assert!(
            !required,
            "run `npm ci --prefix examples/ts-upstream` first"
        );
        eprintln!(
            "skipped: examples/ts-upstream has no node_modules (npm ci --prefix examples/ts-upstream)"
        );
        return None;
    }
    let spawned = std::process::Command::new("node")
        .args(["server.mjs", "--shape", shape, "--port", "0"])
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
    BufReader::new(child.stdout.take().expect("piped stdout"))
        .read_line(&mut line)
        .expect("the server's first line");
    let port: u16 = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("unexpected first line {line:?}"));
    Some(TsPeer {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_of_the_typescript_sdk_peer_holds_its_lists_in_both_shapes() {
    for shape in ["seed", "extension"] {
        let Some(peer) = ts_peer(shape) else {
            return;
        };
        let r = pinfold(&["capture", &peer.url], &[]).await;
        r.expect(0);
        // The SDK has no server/discover: the initialize handshake.
        assert!(r.stderr.contains("speaks MCP 2025-11-25"), "{}", r.stderr);
        let card = r.json();
        ServerCard::from_value(&card, &Limits::default()).expect("valid card");
        assert_eq!(
            card["name"],
            format!("local.capture/pinfold-ts-upstream-{shape}")
        );
        let lists = raw_tools_list(&peer.url).await;
        assert_conformant(&card, &lists);
        let t = tool(&card, "manage_files");
        assert_eq!(
            canonical_bytes(t),
            canonical_bytes(&lists["tools"][0]),
            "kept exactly as listed"
        );
        if shape == "seed" {
            // A member rmcp's Tool type does not know survives the capture.
            assert_eq!(t["resolve"], true, "{t}");
        } else {
            assert_eq!(
                t["_meta"]["io.modelcontextprotocol/tool-resolution"]["resolvable"],
                true
            );
        }
    }
}

// ------------------------------------------------------------------ verify

/// A Pinfold over TCP with the reference upstream's draft published and
/// approved as `NAME` 1.0.0.
struct Published {
    app: TestApp,
    base: String,
    up: Arc<Running>,
    card: Value,
    digest: String,
}

impl Published {
    async fn new() -> Published {
        let app = TestApp::new().await;
        let base = serve_local(app.router.clone()).await;
        let up = upstream(Switches::default()).await;
        let r = pinfold(
            &["capture", &up.url(), "--name", NAME, "--version", "1.0.0"],
            &[],
        )
        .await;
        r.expect(0);
        let card = r.json();
        let digest = publish(&app, &card, true).await;
        Published {
            app,
            base,
            up,
            card,
            digest,
        }
    }

    fn reader(&self) -> String {
        self.app.as_roles("ci-bot", &["reader"])
    }

    /// `pinfold verify` of `NAME` against the upstream, as a reader.
    async fn verify(&self, extra: &[&str]) -> Run {
        let token = self.reader();
        self.verify_with(NAME, extra, &[("PINFOLD_TOKEN", token.as_str())])
            .await
    }

    /// `pinfold verify --name name` against the upstream with `env`.
    async fn verify_with(&self, name: &str, extra: &[&str], env: &[(&str, &str)]) -> Run {
        self.verify_against(name, &self.up.url(), extra, env).await
    }

    /// `pinfold verify --name name --against url` with `env`.
    async fn verify_against(
        &self,
        name: &str,
        against: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Run {
        let mut args = vec![
            "verify",
            "--server",
            &self.base,
            "--tenant",
            self.app.tenant.as_str(),
            "--name",
            name,
            "--against",
            against,
        ];
        args.extend_from_slice(extra);
        pinfold(&args, env).await
    }
}

/// Publishes `card` as is (the registry's own validation); approves it
/// when asked. Returns the digest.
pub(crate) async fn publish(app: &TestApp, card: &Value, approve: bool) -> String {
    let path = format!(
        "/v1/tenants/{}/servers/{}/versions/{}",
        app.tenant,
        card["name"].as_str().unwrap().replace('/', "%2F"),
        card["version"].as_str().unwrap()
    );
    let r = app
        .send(
            "PUT",
            &path,
            Some(&app.as_roles("pat", &["publisher"])),
            Some(card.clone()),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    let digest = r.json()["digest"].as_str().unwrap().to_owned();
    if approve {
        let r = app
            .send(
                "POST",
                &format!("{path}/review"),
                Some(&app.as_roles("rita", &["reviewer"])),
                Some(json!({"decision": "approve"})),
            )
            .await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    }
    digest
}

fn violation<'a>(report: &'a Value, kind: &str) -> &'a Value {
    report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {report}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_passes_a_conformant_server_and_catches_rug_pulls() {
    let p = Published::new().await;
    // Conformant: a table, exit 0, against `latest` (1.0.0).
    let r = p.verify(&[]).await;
    r.expect(0);
    assert!(
        r.stdout.contains("CONFORMANT: 0 violation(s)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains(&format!("{NAME} 1.0.0 (approved, {})", p.digest)),
        "{}",
        r.stdout
    );
    assert!(r.stderr.contains("capture: tools/list"), "{}", r.stderr);
    // --json: the report and what it was checked against.
    let r = p.verify(&["--json"]).await;
    r.expect(0);
    let report = r.json();
    assert_eq!(report["conformant"], true);
    assert_eq!(report["fails"], false);
    assert_eq!(report["violations"], json!([]));
    assert_eq!(report["server"], NAME);
    assert_eq!(report["version"], "1.0.0");
    assert_eq!(report["digest"], p.digest.as_str());
    assert_eq!(report["status"], "approved");
    assert_eq!(report["mode"], "permissive", "the tenant's default mode");
    assert_eq!(report["against"], p.up.url());
    assert_eq!(report["protocol_version"], "2026-07-28");
    assert!(report["notices"].is_array());

    // Rug pull 1: a tool appears.
    p.up.update(|s| s.extra_tool = true);
    let r = p.verify(&["--json"]).await;
    r.expect(1);
    let report = r.json();
    assert_eq!(report["conformant"], false);
    let v = violation(&report, "undeclared_tool");
    assert_eq!(v["name"], "purge_files");
    assert_eq!(v["pointer"], "/tools/3");
    assert_eq!(v["less_safe"], true);
    let table = p.verify(&[]).await;
    table.expect(1);
    assert!(table.stdout.contains("undeclared_tool"), "{}", table.stdout);
    assert!(
        table.stdout.contains("NOT CONFORMANT: 1 violation(s)"),
        "{}",
        table.stdout
    );

    // Rug pull 2: list_files turns destructive.
    p.up.update(|s| {
        s.extra_tool = false;
        s.flip_destructive = true;
    });
    let r = p.verify(&["--json"]).await;
    r.expect(1);
    let report = r.json();
    assert_eq!(
        report["violations"].as_array().unwrap().len(),
        1,
        "{report}"
    );
    let v = violation(&report, "annotation_not_declared");
    assert_eq!(v["name"], "list_files");
    assert_eq!(v["pointer"], "/tools/2/annotations");
    assert_eq!(v["less_safe"], true);
    assert_eq!(v["observed"]["destructiveHint"], true);
    // The table says which hint got worse, as --json does.
    let table = p.verify(&[]).await;
    table.expect(1);
    let row = table
        .stdout
        .lines()
        .find(|l| l.starts_with("annotation_not_declared"))
        .unwrap_or_else(|| panic!("{}", table.stdout));
    assert!(
        row.contains("destructiveHint") && row.contains("\"destructiveHint\":true"),
        "{row}"
    );

    // The mode decides the exit: advisory reports and passes, strict blocks.
    let r = p.verify(&["--json", "--mode", "advisory"]).await;
    r.expect(0);
    let report = r.json();
    assert_eq!(
        (report["conformant"].clone(), report["fails"].clone()),
        (json!(false), json!(false))
    );
    let r = p
        .verify(&["--json", "--mode", "strict", "--version", "1.0.0"])
        .await;
    r.expect(1);
    assert_eq!(r.json()["blocking"], true);

    // Back to normal: conformant again.
    p.up.update(|s| s.flip_destructive = false);
    p.verify(&[]).await.expect(0);
    // The published card is the capture itself.
    assert_eq!(p.card["name"], NAME);
}

/// The card records the serverInfo it was captured from; verify pointed at
/// a server that calls itself something else says so and fails (advisory
/// reports it and passes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_notices_a_different_server_than_the_one_signed() {
    let p = Published::new().await;
    let recorded = &p.card["_meta"]["io.github.pinfold/capture"]["serverInfo"];
    assert_eq!(recorded["name"], "pinfold-example-upstream", "{recorded}");
    let r = p.verify(&["--json"]).await;
    r.expect(0);
    assert_eq!(r.json()["server_info"]["matches"], true);

    // 2.0.0: the same lists, signed from a server of another name.
    let mut other = p.card.clone();
    other["version"] = json!("2.0.0");
    other["_meta"]["io.github.pinfold/capture"]["serverInfo"]["name"] = json!("acme-billing");
    publish(&p.app, &other, true).await;
    let r = p.verify(&["--json", "--version", "2.0.0"]).await;
    r.expect(1);
    let report = r.json();
    assert_eq!(
        report["server_info"],
        json!({"signed": "acme-billing", "observed": "pinfold-example-upstream", "matches": false})
    );
    assert_eq!(report["conformant"], false);
    assert_eq!(
        report["violations"],
        json!([]),
        "the lists themselves conform"
    );
    assert!(
        r.stderr
            .contains("captured from a server calling itself \"acme-billing\""),
        "{}",
        r.stderr
    );
    let table = p.verify(&["--version", "2.0.0"]).await;
    table.expect(1);
    assert!(
        table.stdout.contains("DIFFERENT SERVER: the signature was captured from \"acme-billing\", this server calls itself \"pinfold-example-upstream\""),
        "{}",
        table.stdout
    );
    p.verify(&["--version", "2.0.0", "--mode", "advisory"])
        .await
        .expect(0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_exit_codes_for_each_failure() {
    let p = Published::new().await;
    let token = p.reader();
    let with_token = [("PINFOLD_TOKEN", token.as_str())];

    // 6: unknown server or version; a version that is not approved.
    let r = p
        .verify_with("io.github.pinfold/nope", &[], &with_token)
        .await;
    r.expect(6);
    assert!(r.stderr.contains("not_found"), "{}", r.stderr);
    p.verify(&["--version", "9.9.9"]).await.expect(6);
    let mut pending = p.card.clone();
    pending["version"] = json!("1.1.0");
    publish(&p.app, &pending, false).await;
    let r = p.verify(&["--version", "1.1.0"]).await;
    r.expect(6);
    assert!(r.stderr.contains("pending, not approved"), "{}", r.stderr);
    // `latest` is still the approved 1.0.0.
    let r = p.verify(&["--json"]).await;
    r.expect(0);
    assert_eq!(r.json()["version"], "1.0.0");

    // 5: no token, a token Pinfold refuses; --token-env names the variable.
    let r = p.verify_with(NAME, &[], &[]).await;
    r.expect(5);
    assert!(r.stderr.contains("PINFOLD_TOKEN"), "{}", r.stderr);
    let r = p
        .verify_with(NAME, &[], &[("PINFOLD_TOKEN", "not-a-jwt")])
        .await;
    r.expect(5);
    assert!(
        !r.stderr.contains("not-a-jwt"),
        "the token is never printed"
    );
    let r = p
        .verify_with(
            NAME,
            &["--token-env", "CI_PINFOLD"],
            &[("CI_PINFOLD", token.as_str())],
        )
        .await;
    r.expect(0);

    // 3: the MCP server cannot be reached (Pinfold was asked first: fine).
    let r = p
        .verify_against(NAME, "http://127.0.0.1:1/mcp", &[], &with_token)
        .await;
    r.expect(3);
    assert!(r.stderr.contains("cannot reach"), "{}", r.stderr);

    // 4: Pinfold cannot be reached.
    let url = p.up.url();
    let r = pinfold(
        &[
            "verify",
            "--server",
            "http://127.0.0.1:1",
            "--tenant",
            p.app.tenant.as_str(),
            "--name",
            NAME,
            "--against",
            &url,
        ],
        &with_token,
    )
    .await;
    r.expect(4);

    // 2: bad arguments.
    p.verify(&["--mode", "lenient"]).await.expect(2);
    p.verify_with("noslash", &[], &with_token).await.expect(2);
    let r = pinfold(
        &[
            "verify",
            "--server",
            &p.base,
            "--tenant",
            p.app.tenant.as_str(),
            "--name",
            NAME,
        ],
        &with_token,
    )
    .await;
    r.expect(2);
    assert!(r.stderr.contains("--against"), "{}", r.stderr);

    // Over stdio too: the same server, started by verify itself.
    let command = format!("'{UPSTREAM}' --stdio --extra-tool");
    let r = pinfold(
        &[
            "verify",
            "--server",
            &p.base,
            "--tenant",
            p.app.tenant.as_str(),
            "--name",
            NAME,
            "--command",
            &command,
            "--json",
        ],
        &with_token,
    )
    .await;
    r.expect(1);
    assert_eq!(
        violation(&r.json(), "undeclared_tool")["name"],
        "purge_files"
    );
}
