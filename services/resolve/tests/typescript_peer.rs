//! The engine against a second, independent peer: `examples/ts-upstream`,
//! an MCP server on the official TypeScript SDK (Streamable HTTP, stateless or
//! with protocol sessions; no `server/discover`, so the client falls back to `initialize`).
//!
//! Needs `node` and `npm ci --prefix examples/ts-upstream`. Without them the
//! tests say so and pass, unless `PINFOLD_REQUIRE_TS_PEER` is set (CI sets
//! it), in which case they fail.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use pinfold_core::Mode;
use pinfold_core::card::Limits;
use pinfold_core::ids::TenantId;
use pinfold_resolve::{
    CachePolicy, Engine, EngineConfig, PreparedSignature, SessionCtx, Source, UpstreamTarget,
};
use serde_json::{Value, json};

struct Peer {
    child: Child,
    url: String,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Peer {
    fn calls_url(&self) -> String {
        self.url.replace("/mcp", "/calls")
    }
}

/// Starts the TypeScript server; `None` (after saying why) when it cannot
/// run here and it is not required.
fn start(shape: &str, stateful: bool) -> Option<Peer> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/ts-upstream");
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
    let mut cmd = Command::new("node");
    cmd.arg("server.mjs")
        .args(["--shape", shape, "--port", "0"])
        .current_dir(&dir);
    if !stateful {
        cmd.arg("--stateless");
    }
    let spawned = cmd.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            assert!(!required, "cannot run node: {e}");
            eprintln!("skipped: cannot run node: {e}");
            return None;
        }
    };
    // Readiness: the server prints its port alone once it listens.
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped stdout"))
        .read_line(&mut line)
        .expect("read the server's first line");
    let port: u16 = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("unexpected first line {line:?}"));
    let url = format!("http://127.0.0.1:{port}/mcp");
    Some(Peer { child, url })
}

fn ctx(url: &str) -> SessionCtx {
    let card: Value =
        serde_json::from_str(include_str!("../../../examples/manage-files-1.0.0.json")).unwrap();
    SessionCtx {
        tenant: TenantId::parse("acme").unwrap(),
        session: "ts-1".into(),
        expires_at: SystemTime::now() + Duration::from_secs(3600),
        signature: Arc::new(PreparedSignature::new(&card, &Limits::default()).unwrap()),
        mode: Mode::Strict,
        cache: CachePolicy::Session,
        upstream: UpstreamTarget {
            url: url.to_owned(),
            headers: vec![],
            // The upstream runs on loopback, which only the operator allows.
            rules: pinfold_egress::Rules::new(pinfold_egress::AllowList::default(), true),
        },
    }
}

async fn calls(peer: &Peer) -> u64 {
    let v: Value = reqwest::get(peer.calls_url())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["resolve"].as_u64().unwrap()
}

async fn resolves_against(shape: &str, stateful: bool) {
    let Some(peer) = start(shape, stateful) else {
        return;
    };
    let e = Engine::new(EngineConfig::default());
    let c = ctx(&peer.url);
    let read = e
        .resolve(
            &c,
            "manage_files",
            &json!({"path": "/notes.txt", "action": "read"}),
        )
        .await
        .unwrap();
    assert_eq!(read.source, Source::Upstream, "{read:?}");
    assert!(read.conformant, "{read:?}");
    assert_eq!(read.tool["annotations"]["readOnlyHint"], json!(true));
    assert!(read.tool["inputSchema"].is_object());
    let delete = e
        .resolve(
            &c,
            "manage_files",
            &json!({"path": "/notes.txt", "action": "delete"}),
        )
        .await
        .unwrap();
    assert_eq!(delete.source, Source::Upstream, "{delete:?}");
    assert_eq!(delete.tool["annotations"]["destructiveHint"], json!(true));
    assert_eq!(calls(&peer).await, 2);
    let again = e
        .resolve(
            &c,
            "manage_files",
            &json!({"action": "read", "path": "/notes.txt"}),
        )
        .await
        .unwrap();
    assert_eq!(again.source, Source::Cache);
    assert_eq!(calls(&peer).await, 2);
}

#[tokio::test]
async fn typescript_sdk_peer_seed_shape() {
    resolves_against("seed", false).await;
}

#[tokio::test]
async fn typescript_sdk_peer_extension_shape() {
    resolves_against("extension", false).await;
}

#[tokio::test]
async fn typescript_sdk_peer_with_protocol_sessions() {
    resolves_against("seed", true).await;
}
