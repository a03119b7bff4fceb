//! The bare baseline of `bench/load.sh`: the same axum and tokio as Pinfold,
//! answering what Pinfold's hot paths answer and doing nothing else — no
//! middleware, no authentication, no metrics, no tracing.
//!
//! ```text
//! bare PORT [UPSTREAM] # 0 picks a free port; the port is printed on stdout
//! GET  /healthz        200 "ok"
//! GET  /v              If-None-Match matching the fixed ETag → 304, else 200 + a small JSON document
//! POST /resolve        {name, arguments} → the cached resolve answer (a resolve-cache hit)
//! POST /forward        {name, arguments} → the UPSTREAM's tools/resolve result (a resolve miss)
//! POST /mcp            any JSON-RPC message → sent to UPSTREAM as it is, its answer back as it is
//!                      (the floor of an MCP pass-through proxy: `bench/guard.sh`)
//! POST /bytes          the bytes of the file named by BARE_BYTES_FILE, as JSON
//!                      (what the guard's served `tools/list` is compared with)
//! ```
//!
//! `POST /forward` does the transport work of a resolve miss and nothing
//! else: parse the body, send one sessionless (MCP 2026-07-28)
//! `tools/resolve` to the MCP endpoint `UPSTREAM` on a pooled reqwest
//! client, take the JSON-RPC result out of the JSON or event-stream answer,
//! and answer it. No check, no fingerprint, no cache: the floor any proxy
//! pays for the second HTTP hop, beside which `bench/miss-overhead.sh`
//! puts Pinfold's miss.
//!
//! `POST /resolve` does the work of a resolve-cache hit: parse the JSON
//! body, build the length-prefixed key (session id, tool name, RFC 8785
//! canonical bytes of the arguments), look it up in a bytes-weighted moka
//! cache, and answer the cached JSON bytes. The cache is filled at start with
//! one entry per `manage_files` action on [`BENCH_PATH`]; other arguments
//! answer 404 (the baseline never goes upstream).

use std::net::SocketAddr;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use moka::future::Cache;
use serde::Deserialize;
use serde_json::{Value, json};

/// The strong ETag of the `/v` document.
const ETAG: &str = "\"sha256:5d1c8a0b3f0e2a47c9d3b8e6f1a2c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5\"";
/// The session every cached entry belongs to (Pinfold takes it from the path).
const SESSION: &str = "0f8e4c2a-7b1d-4e5f-9a3c-6d2b8e1f4a7c";
/// The `path` argument of the pre-filled entries (and of `bench/resolve.lua`).
pub const BENCH_PATH: &str = "/tmp/notes.txt";

#[derive(Clone)]
struct AppState {
    cache: Cache<Box<[u8]>, Bytes>,
    version_doc: Bytes,
    upstream: Option<(reqwest::Client, reqwest::Url)>,
    bytes: Bytes,
}

/// Headers an MCP pass-through carries from the client to the upstream.
const PASSED: [&str; 5] = [
    "mcp-session-id",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "last-event-id",
];

/// `POST /mcp`: the message to the upstream and its answer back, bytes
/// for bytes (no parsing, no check).
async fn mcp(State(st): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let Some((client, url)) = &st.upstream else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mut req = client
        .post(url.clone())
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header(header::CONTENT_TYPE, "application/json");
    for name in PASSED {
        if let Some(v) = headers.get(name) {
            req = req.header(name, v.clone());
        }
    }
    let Ok(answer) = req.body(body).send().await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let status = answer.status();
    let content_type = answer.headers().get(header::CONTENT_TYPE).cloned();
    let Ok(bytes) = answer.bytes().await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let mut resp = (status, bytes).into_response();
    if let Some(ct) = content_type {
        resp.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    resp
}

/// `POST /bytes`: fixed JSON bytes, once the request's body is read (as
/// any server reading a JSON-RPC message does; a body left unread can make
/// hyper close the connection instead of keeping it alive).
async fn fixed_bytes(State(st): State<AppState>, _body: Bytes) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        st.bytes.clone(),
    )
        .into_response()
}

#[derive(Deserialize)]
struct ResolveRequest {
    name: String,
    #[serde(default)]
    arguments: Value,
}

/// `(session, tool, canonical arguments)`, each preceded by its length, so no
/// two tuples share a key.
fn cache_key(session: &str, tool: &str, canonical_args: &[u8]) -> Box<[u8]> {
    let mut k = Vec::with_capacity(24 + session.len() + tool.len() + canonical_args.len());
    for part in [session.as_bytes(), tool.as_bytes(), canonical_args] {
        k.extend_from_slice(&(part.len() as u64).to_le_bytes());
        k.extend_from_slice(part);
    }
    k.into_boxed_slice()
}

fn manage_files_tool(annotations: Value) -> Value {
    json!({
        "name": "manage_files",
        "description": "Read, append, replace, or delete file contents",
        "inputSchema": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path to operate on"},
                "action": {"type": "string", "enum": ["read", "append", "replace", "delete"],
                           "description": "Operation to perform"},
                "content": {"type": "string", "description": "Content for append/replace operations"}
            },
            "required": ["path", "action"]
        },
        "annotations": annotations,
        "resolve": true
    })
}

async fn prefill(cache: &Cache<Box<[u8]>, Bytes>) {
    let actions = [
        ("read", [true, false, true, false]),
        ("append", [false, false, false, false]),
        ("replace", [false, true, true, false]),
        ("delete", [false, true, true, false]),
    ];
    for (action, [ro, de, id, ow]) in actions {
        let args = json!({"path": BENCH_PATH, "action": action});
        let canonical = serde_json_canonicalizer::to_vec(&args).expect("canonical arguments");
        let answer = json!({
            "tool": manage_files_tool(json!({
                "readOnlyHint": ro, "destructiveHint": de, "idempotentHint": id, "openWorldHint": ow
            })),
            "source": "cache",
            "conformant": true,
            "violations": [],
            "notices": []
        });
        let bytes = Bytes::from(serde_json::to_vec(&answer).expect("answer bytes"));
        cache
            .insert(cache_key(SESSION, "manage_files", &canonical), bytes)
            .await;
    }
}

async fn healthz() -> &'static str {
    "ok"
}

fn etag_matches(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t) == ETAG)
}

async fn version(State(st): State<AppState>, headers: HeaderMap) -> Response {
    let etag = (header::ETAG, HeaderValue::from_static(ETAG));
    if etag_matches(&headers) {
        return (StatusCode::NOT_MODIFIED, [etag]).into_response();
    }
    (
        [
            etag,
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
        ],
        st.version_doc.clone(),
    )
        .into_response()
}

async fn resolve(State(st): State<AppState>, body: Bytes) -> Response {
    let req: ResolveRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(_) => return StatusCode::BAD_REQUEST.into_response(),
    };
    let Ok(canonical) = serde_json_canonicalizer::to_vec(&req.arguments) else {
        return StatusCode::UNPROCESSABLE_ENTITY.into_response();
    };
    let key = cache_key(SESSION, &req.name, &canonical);
    match st.cache.get(&key).await {
        Some(bytes) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            bytes,
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The `_meta` a sessionless request carries (protocol version and client
/// capabilities, as Pinfold sends them).
fn request_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":
            {"extensions": {"io.modelcontextprotocol/tool-resolution": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "bare", "version": "0.1.0"},
    })
}

async fn forward(State(st): State<AppState>, body: Bytes) -> Response {
    let Some((client, url)) = &st.upstream else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let req: ResolveRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(_) => return StatusCode::BAD_REQUEST.into_response(),
    };
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/resolve", "params": {
        "name": req.name, "arguments": req.arguments, "_meta": request_meta()}});
    let sent = client
        .post(url.clone())
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header(header::CONTENT_TYPE, "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/resolve")
        .body(serde_json::to_vec(&call).unwrap_or_default())
        .send()
        .await;
    let Ok(answer) = sent else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let Ok(bytes) = answer.bytes().await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    // A JSON body, or the first `data:` line of an event stream.
    let json = bytes
        .split(|b| *b == b'\n')
        .find_map(|l| l.strip_prefix(b"data:"))
        .unwrap_or(&bytes);
    let Ok(mut message) = serde_json::from_slice::<Value>(json) else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    match message.get_mut("result").map(Value::take) {
        Some(result) => axum::Json(result).into_response(),
        None => StatusCode::BAD_GATEWAY.into_response(),
    }
}

/// The same allocator as Pinfold's binary.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    let port: u16 = match std::env::args().nth(1).map(|p| p.parse()) {
        Some(Ok(p)) => p,
        _ => {
            eprintln!("usage: bare PORT [UPSTREAM-MCP-URL]   (0 picks a free port)");
            std::process::exit(2);
        }
    };
    let cache = Cache::<Box<[u8]>, Bytes>::builder()
        .max_capacity(256 << 20)
        .weigher(|k, v| u32::try_from(k.len() + v.len()).unwrap_or(u32::MAX))
        .build();
    prefill(&cache).await;
    let upstream = std::env::args().nth(2).map(|u| {
        let url = reqwest::Url::parse(&u).unwrap_or_else(|e| {
            eprintln!("bad upstream URL {u:?}: {e}");
            std::process::exit(2);
        });
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .tcp_nodelay(true)
            .build()
            .expect("HTTP client");
        (client, url)
    });
    let version_doc = Bytes::from(
        serde_json::to_vec(&json!({
            "server": "io.github.acme/files", "version": "1.0.0", "status": "approved",
            "digest": ETAG.trim_matches('"')
        }))
        .expect("version document"),
    );
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/v", get(version))
        .route("/resolve", post(resolve))
        .route("/forward", post(forward))
        .route("/mcp", post(mcp))
        .route("/bytes", post(fixed_bytes))
        .with_state(AppState {
            cache,
            version_doc,
            upstream,
            bytes: std::env::var("BARE_BYTES_FILE")
                .ok()
                .and_then(|f| std::fs::read(f).ok())
                .map(Bytes::from)
                .unwrap_or_default(),
        });
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .unwrap_or_else(|e| {
            eprintln!("cannot listen on 127.0.0.1:{port}: {e}");
            std::process::exit(1);
        });
    println!("{}", listener.local_addr().expect("bound address").port());
    axum::serve(listener, app).await.expect("server error");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_different_tuples_differ() {
        // Without length prefixes these two would concatenate to the same bytes.
        assert_ne!(cache_key("ab", "c", b"{}"), cache_key("a", "bc", b"{}"));
    }

    #[tokio::test]
    async fn prefilled_entry_is_found_with_reordered_keys() {
        let cache = Cache::new(16);
        prefill(&cache).await;
        let args: Value =
            serde_json::from_str(r#"{"action":"read","path":"/tmp/notes.txt"}"#).unwrap();
        let canonical = serde_json_canonicalizer::to_vec(&args).unwrap();
        let hit = cache
            .get(&cache_key(SESSION, "manage_files", &canonical))
            .await
            .expect("hit");
        let v: Value = serde_json::from_slice(&hit).unwrap();
        assert_eq!(v["tool"]["annotations"]["readOnlyHint"], true);
    }
}
