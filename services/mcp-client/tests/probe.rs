//! The `server/discover` probe against a tiny hand-written server over an
//! in-memory pipe, one answer to the probe at a time: every row of the
//! crate's decision table, the connection still usable afterwards, and
//! what the server saw (`initialize` on 2025-11-25 with the client's
//! capabilities, or no `initialize` at all).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pinfold_mcp_client::{ClientProfile, Fallback, Negotiation, open};
use rmcp::ClientHandler;
use rmcp::model::{
    ClientConfig, DiscoverResult, Implementation, ProtocolVersion, ServerCapabilities,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

/// How the test server answers `server/discover`.
#[derive(Clone)]
enum Discover {
    /// `{}`, as it answers every method it does not know.
    Empty,
    /// A JSON-RPC error with this code.
    Error(i32),
    /// An error without an id.
    ErrorWithoutId,
    /// This result.
    Result(Value),
    /// Nothing at all.
    Silence,
    /// This result, after a delay.
    Late(Value, Duration),
}

struct Client(ClientProfile);

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::new(
            self.0.capabilities(),
            Implementation::new("probe-test", "1.0.0"),
        );
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info
    }
}

fn modern_result(versions: &[&str]) -> Value {
    let versions = versions
        .iter()
        .map(|v| serde_json::from_value(json!(v)).unwrap())
        .collect();
    let caps = ServerCapabilities::builder().enable_tools().build();
    let mut r = DiscoverResult::new(versions, caps);
    r.set_server_info(Implementation::new("tiny", "1.0.0"));
    serde_json::to_value(r).unwrap()
}

/// Serves the pipe: `initialize` and `tools/list` as a 2025-11-25 server
/// does, `server/discover` as told, `{}` for everything else. Returns
/// the requests it saw.
fn serve(io: tokio::io::DuplexStream, discover: Discover) -> Arc<Mutex<Vec<Value>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        let (r, w) = tokio::io::split(io);
        let w = Arc::new(tokio::sync::Mutex::new(w));
        let mut lines = BufReader::new(r).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let msg: Value = serde_json::from_str(&line).unwrap();
            log.lock().unwrap().push(msg.clone());
            let Some(id) = msg.get("id").cloned() else {
                continue;
            };
            let result = |r: Value| json!({"jsonrpc": "2.0", "id": id, "result": r});
            let answer = match msg["method"].as_str().unwrap_or("") {
                "initialize" => result(json!({
                    "protocolVersion": msg["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "tiny", "version": "1.0.0"},
                })),
                "tools/list" => result(json!({"tools": [
                    {"name": "add", "inputSchema": {"type": "object"}}
                ]})),
                "server/discover" => match &discover {
                    Discover::Empty => result(json!({})),
                    Discover::Error(code) => json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": code, "message": "no"}}),
                    Discover::ErrorWithoutId => json!({"jsonrpc": "2.0",
                        "error": {"code": -32600, "message": "Bad Request: Server not initialized"}}),
                    Discover::Result(v) => result(v.clone()),
                    Discover::Silence => continue,
                    Discover::Late(v, after) => {
                        let late = result(v.clone());
                        let w = w.clone();
                        let after = *after;
                        tokio::spawn(async move {
                            tokio::time::sleep(after).await;
                            let mut w = w.lock().await;
                            let _ = w.write_all(format!("{late}\n").as_bytes()).await;
                        });
                        continue;
                    }
                },
                _ => result(json!({})),
            };
            let mut w = w.lock().await;
            if w.write_all(format!("{answer}\n").as_bytes()).await.is_err() {
                break;
            }
        }
    });
    seen
}

struct Outcome {
    negotiation: Negotiation,
    protocol: String,
    tools: Vec<String>,
    seen: Vec<Value>,
}

async fn connect(discover: Discover, profile: ClientProfile, budget: Duration) -> Outcome {
    let (client_io, server_io) = tokio::io::duplex(1 << 16);
    let seen = serve(server_io, discover);
    let (r, w) = tokio::io::split(client_io);
    let opened = open(Client(profile), (r, w), budget)
        .await
        .expect("the connection opens");
    let protocol = opened
        .service
        .peer()
        .peer_info()
        .unwrap()
        .protocol_version
        .as_str()
        .to_owned();
    let tools = opened
        .service
        .peer()
        .list_tools(None)
        .await
        .expect("tools/list after the handshake")
        .tools
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    let _ = opened.service.cancel().await;
    let seen = seen.lock().unwrap().clone();
    Outcome {
        negotiation: opened.negotiation,
        protocol,
        tools,
        seen,
    }
}

fn methods(seen: &[Value]) -> Vec<&str> {
    seen.iter().filter_map(|m| m["method"].as_str()).collect()
}

#[tokio::test]
async fn an_empty_result_falls_back_to_initialize_on_the_legacy_revision() {
    let o = connect(
        Discover::Empty,
        ClientProfile::Default,
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(
        o.negotiation,
        Negotiation::Fallback(Fallback::NotADiscoverResult("an empty result, {}".into()))
    );
    assert_eq!(o.protocol, "2025-11-25");
    assert_eq!(o.tools, ["add"]);
    let m = methods(&o.seen);
    assert_eq!(
        m[..3],
        ["server/discover", "initialize", "notifications/initialized"],
        "{m:?}"
    );
    // The initialize carries the profile's capabilities.
    let init = o.seen.iter().find(|m| m["method"] == "initialize").unwrap();
    assert_eq!(init["params"]["protocolVersion"], "2025-11-25");
    assert_eq!(
        init["params"]["capabilities"],
        ClientProfile::Default.capabilities_json()
    );
}

#[tokio::test]
async fn every_error_code_falls_back() {
    // Method not found, invalid params, unsupported protocol version, and
    // the two codes rmcp alone would treat as fatal (missing client
    // capability, header mismatch).
    for code in [-32601, -32602, -32022, -32021, -32020] {
        let o = connect(
            Discover::Error(code),
            ClientProfile::None,
            Duration::from_secs(5),
        )
        .await;
        assert!(
            matches!(&o.negotiation, Negotiation::Fallback(Fallback::Error { code: c, .. }) if *c == code),
            "{code}: {:?}",
            o.negotiation
        );
        assert_eq!(o.protocol, "2025-11-25", "{code}");
        assert_eq!(o.tools, ["add"], "{code}");
    }
    let o = connect(
        Discover::ErrorWithoutId,
        ClientProfile::None,
        Duration::from_secs(5),
    )
    .await;
    assert!(
        matches!(
            &o.negotiation,
            Negotiation::Fallback(Fallback::Error { code: -32600, .. })
        ),
        "{:?}",
        o.negotiation
    );
    assert_eq!(o.tools, ["add"]);
}

#[tokio::test]
async fn a_wrong_shape_or_no_common_version_falls_back() {
    let o = connect(
        Discover::Result(json!({"supportedVersions": "2026-07-28"})),
        ClientProfile::None,
        Duration::from_secs(5),
    )
    .await;
    assert!(
        matches!(&o.negotiation, Negotiation::Fallback(Fallback::NotADiscoverResult(s)) if s.contains("supportedVersions")),
        "{:?}",
        o.negotiation
    );
    assert_eq!(o.protocol, "2025-11-25");
    assert_eq!(o.tools, ["add"]);

    let o = connect(
        Discover::Result(modern_result(&["2099-01-01"])),
        ClientProfile::None,
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(
        o.negotiation,
        Negotiation::Fallback(Fallback::NoCommonVersion(vec!["2099-01-01".into()]))
    );
    assert_eq!(o.protocol, "2025-11-25");
    assert_eq!(o.tools, ["add"]);
}

#[tokio::test]
async fn silence_falls_back_after_the_budget_and_a_late_answer_is_dropped() {
    let budget = Duration::from_millis(300);
    let started = std::time::Instant::now();
    let o = connect(Discover::Silence, ClientProfile::None, budget).await;
    assert_eq!(
        o.negotiation,
        Negotiation::Fallback(Fallback::NoAnswer(budget))
    );
    assert!(started.elapsed() >= budget);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(o.protocol, "2025-11-25");
    assert_eq!(o.tools, ["add"]);

    // The answer arrives after the fallback began: it is not mistaken for
    // the answer to initialize (which would fail the handshake).
    let o = connect(
        Discover::Late(modern_result(&["2026-07-28"]), Duration::from_millis(400)),
        ClientProfile::None,
        Duration::from_millis(200),
    )
    .await;
    assert_eq!(
        o.negotiation,
        Negotiation::Fallback(Fallback::NoAnswer(Duration::from_millis(200)))
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(o.protocol, "2025-11-25");
    assert_eq!(o.tools, ["add"]);
}

#[tokio::test]
async fn a_valid_discover_result_opens_a_sessionless_connection() {
    let o = connect(
        Discover::Result(modern_result(&["2025-11-25", "2026-07-28"])),
        ClientProfile::Default,
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(o.negotiation, Negotiation::Discovered);
    assert_eq!(o.protocol, "2026-07-28");
    assert_eq!(o.tools, ["add"]);
    let m = methods(&o.seen);
    assert!(!m.contains(&"initialize"), "{m:?}");
    // Each request carries the client's capabilities in its _meta.
    let list = o.seen.iter().find(|m| m["method"] == "tools/list").unwrap();
    assert_eq!(
        list["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"],
        ClientProfile::Default.capabilities_json(),
        "{list}"
    );
}
