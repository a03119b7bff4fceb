//! One MCP connection to an upstream: opened through
//! `pinfold_mcp_client::open` (2026-07-28 `server/discover` when the server
//! offers it, else the 2025-11-25 `initialize` handshake), its resolve calls (through rmcp on a
//! 2025-11-25 connection, through [`Direct`] on a sessionless one), its
//! `subscriptions/listen` stream, and its closing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::RoleClient;
use rmcp::model::{
    ClientRequest, CustomRequest, ServerNotification, ServerResult, SubscriptionFilter,
};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::cancellable::Cancellable;
use super::direct::{Direct, DirectParts};
use super::error::{FetchError, redact, retry_after_in};
use super::handler::{Handler, ListChangedHook, client_info};
use super::pool::Pool;
use super::target::UpstreamTarget;
use pinfold_resolve_check::prepared::TOOL_RESOLUTION;

/// One initialized MCP connection.
pub(crate) struct Connection {
    service: RunningService<RoleClient, Handler>,
    url: String,
    /// The egress rules it was opened under.
    rules: pinfold_egress::Rules,
    /// The `subscriptions/listen` task of a 2026-07-28 connection.
    listener: Option<tokio::task::JoinHandle<()>>,
    /// Ends every HTTP request of this connection ([`Cancellable`]).
    http: CancellationToken,
    /// How resolve calls go on a sessionless connection ([`Direct`]);
    /// `None` on a 2025-11-25 connection, whose calls go through rmcp.
    direct: Option<Direct>,
    /// Whether list changes can reach us: on 2025-11-25 the server
    /// declared `tools.listChanged`; on 2026-07-28 its
    /// `subscriptions/listen` stream is open.
    channel: Arc<AtomicBool>,
}

impl Connection {
    /// Connects and initializes.
    pub(crate) async fn open(
        pool: &Pool,
        target: &UpstreamTarget,
        on_list_changed: ListChangedHook,
    ) -> Result<Connection, FetchError> {
        let http = CancellationToken::new();
        // Disarmed only once the connection is made: a failed or abandoned
        // opening (the engine's total timeout drops this future) ends its
        // requests.
        let opening = http.clone().drop_guard();
        let client = Cancellable {
            inner: pool.client(target)?,
            ct: http.clone(),
        };
        let headers = target.header_map().map_err(|e| FetchError::Transport {
            detail: e.to_string(),
            retry_after: None,
        })?;
        let transport = || {
            let mut config = StreamableHttpClientTransportConfig::with_uri(target.url.as_str())
                .custom_headers(headers.clone())
                .max_json_response_size(pool.max_response_bytes)
                .reinit_on_expired_session(true);
            config.max_sse_event_size = pool.max_response_bytes;
            config.max_concurrent_requests = 64;
            StreamableHttpClientTransport::with_client(client.clone(), config)
        };
        let handler = || Handler {
            info: client_info(),
            on_list_changed: on_list_changed.clone(),
        };
        let failed = |e: pinfold_mcp_client::OpenError| FetchError::Transport {
            detail: redact(e.cause(), &format!("initialize failed: {e}"), &target.url),
            retry_after: retry_after_in(e.cause()),
        };
        // The connection setup Pinfold shares with capture and verify: the
        // 2026-07-28 `server/discover` probe, and `initialize` on 2025-11-25
        // for anything but a valid discover result (an error, `{}`, another
        // shape, no answer within the probe budget).
        let service = pinfold_mcp_client::open(handler(), transport(), pool.probe_budget)
            .await
            .map_err(failed)?
            .service;
        let modern = service
            .peer()
            .peer_info()
            .is_some_and(|i| !i.protocol_version.has_initialize());
        // SEP-1862 leaves a resolution valid until the tool list changes;
        // without a way to hear of a change, the engine bounds how long an
        // answer is kept instead.
        let channel = Arc::new(AtomicBool::new(
            !modern
                && service
                    .peer()
                    .peer_info()
                    .and_then(|i| i.capabilities.tools.as_ref().and_then(|t| t.list_changed))
                    == Some(true),
        ));
        let listener = modern.then(|| {
            // Without a protocol session, list changes arrive on a
            // `subscriptions/listen` stream rather than the session's.
            let peer = service.peer().clone();
            let on_list_changed = on_list_changed.clone();
            let channel = channel.clone();
            tokio::spawn(async move {
                let filter = SubscriptionFilter::builder().tools_list_changed().build();
                let Ok(mut sub) = peer.listen(filter).await else {
                    tracing::debug!("upstream refused subscriptions/listen");
                    return;
                };
                channel.store(true, Ordering::Release);
                while let Ok(Some(n)) = sub.next().await {
                    if matches!(n, ServerNotification::ToolListChangedNotification(_)) {
                        on_list_changed();
                    }
                }
                channel.store(false, Ordering::Release);
            })
        });
        let direct = match service.peer().peer_info() {
            Some(i) if modern => {
                let info = client_info();
                Some(Direct::new(DirectParts {
                    client: client.inner.clone(),
                    url: &target.url,
                    headers: headers.into_iter().collect(),
                    protocol_version: i.protocol_version.as_str().to_owned(),
                    capabilities: serde_json::to_value(&info.capabilities).unwrap_or_default(),
                    client_info: serde_json::to_value(&info.client_info).unwrap_or_default(),
                    max: pool.max_response_bytes,
                    ct: http.clone(),
                    on_list_changed,
                })?)
            }
            _ => None,
        };
        opening.disarm();
        Ok(Connection {
            service,
            url: target.url.clone(),
            rules: target.rules.clone(),
            listener,
            http,
            direct,
            channel,
        })
    }

    /// Whether the upstream can tell us its tool list changed (see
    /// `channel`).
    pub(crate) fn has_list_changed_channel(&self) -> bool {
        self.channel.load(Ordering::Acquire)
    }

    /// The negotiated protocol version.
    pub(crate) fn protocol_version(&self) -> Option<String> {
        self.service
            .peer()
            .peer_info()
            .map(|i| i.protocol_version.as_str().to_owned())
    }

    /// The server's `initialize` answer, if any.
    pub(crate) fn server_capabilities(&self) -> Option<Value> {
        self.service
            .peer()
            .peer_info()
            .and_then(|i| serde_json::to_value(&i.capabilities).ok())
    }

    /// Sends `method` (`tools/resolve` or `tools/annotations`) and returns
    /// the raw result object.
    pub(crate) async fn call(
        &self,
        method: &str,
        name: &str,
        arguments: &Value,
    ) -> Result<Value, FetchError> {
        match &self.direct {
            Some(d) => d.call(method, name, arguments).await,
            None => self.call_rmcp(method, name, arguments).await,
        }
    }

    /// [`Connection::call`] through rmcp's transport (2025-11-25).
    async fn call_rmcp(
        &self,
        method: &str,
        name: &str,
        arguments: &Value,
    ) -> Result<Value, FetchError> {
        let mut params = Map::new();
        params.insert("name".into(), Value::String(name.to_owned()));
        params.insert("arguments".into(), arguments.clone());
        // The client repeats the capability in the request itself, as
        // 2026-07-28 asks of every request: an upstream without protocol
        // sessions (or a replica of one that never saw our `initialize`)
        // still knows we speak the tool-resolution extension, instead of
        // answering -32021.
        params.insert(
            "_meta".into(),
            serde_json::json!({
                "io.modelcontextprotocol/clientCapabilities": {
                    "extensions": {TOOL_RESOLUTION: {}}
                }
            }),
        );
        let req =
            ClientRequest::CustomRequest(CustomRequest::new(method, Some(Value::Object(params))));
        match self.service.peer().send_request(req).await {
            Ok(ServerResult::CustomResult(r)) => Ok(r.0),
            // Another result type matched the untagged union first; its
            // serialisation is what the upstream sent, less unknown members.
            Ok(other) => serde_json::to_value(&other)
                .map_err(|e| FetchError::Malformed(format!("unreadable result: {e}"))),
            Err(ServiceError::McpError(e)) => Err(FetchError::Rpc {
                code: e.code.0,
                message: e.message.to_string(),
            }),
            Err(e) => Err(FetchError::Transport {
                detail: redact(&e, &e.to_string(), &self.url),
                retry_after: retry_after_in(&e),
            }),
        }
    }

    /// True when the transport has closed (the connection must be made
    /// again).
    pub(crate) fn is_closed(&self) -> bool {
        self.service.peer().is_transport_closed()
    }

    /// Whether it was opened under `rules` (a tenant whose allow-list
    /// changed gets a new connection, made under the new rules).
    pub(crate) fn opened_under(&self, rules: &pinfold_egress::Rules) -> bool {
        self.rules == *rules
    }

    /// Closes the connection (ends the upstream session) in the background.
    pub(crate) fn close(&self) {
        if let Some(l) = &self.listener {
            l.abort();
        }
        let ct = self.service.cancellation_token();
        ct.cancel();
        self.http.cancel();
    }
}

/// The last holder of a connection closes it: a session state dropped
/// from the bounded state cache keeps its connection while a call still
/// runs on it, and no longer.
impl Drop for Connection {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use pinfold_example_upstream::{Running, Switches};

    /// On a sessionless connection, Pinfold's own request and rmcp's give
    /// the same answers and the same errors; a 2025-11-25 connection has
    /// no direct caller.
    #[tokio::test]
    async fn direct_calls_answer_as_rmcp_does() {
        for legacy in [false, true] {
            let up = Running::start(
                "127.0.0.1:0".parse().unwrap(),
                Switches {
                    legacy_only: legacy,
                    require_header: Some(("x-key".into(), "k".into())),
                    ..Switches::default()
                },
            )
            .await
            .unwrap();
            let pool = Pool::new(
                pinfold_egress::Egress::new(pinfold_egress::EgressConfig::default()),
                1 << 20,
                Duration::from_secs(2),
            );
            let target = UpstreamTarget {
                url: up.url(),
                headers: vec![("x-key".into(), "k".into())],
                rules: pinfold_egress::Rules::new(pinfold_egress::AllowList::default(), true),
            };
            let c = Connection::open(&pool, &target, Arc::new(|| {}))
                .await
                .unwrap();
            assert_eq!(c.direct.is_some(), !legacy, "legacy: {legacy}");
            let args = |a: &str| serde_json::json!({"path": "/a", "action": a});
            let both = async |method: &str, action: &str| {
                let via_rmcp = c.call_rmcp(method, "manage_files", &args(action)).await;
                let direct = c.call(method, "manage_files", &args(action)).await;
                (via_rmcp, direct)
            };
            for action in ["read", "delete"] {
                let (a, b) = both("tools/resolve", action).await;
                assert_eq!(a, b, "{action}");
                let a = a.unwrap();
                assert_eq!(
                    a["tool"]["annotations"]["destructiveHint"],
                    action == "delete"
                );
            }
            // Not a method the upstream knows: the same JSON-RPC error.
            let (a, b) = both("tools/unknown", "read").await;
            assert!(
                matches!(a, Err(FetchError::Rpc { code: -32601, .. })),
                "{a:?}"
            );
            assert_eq!(a, b);
            up.update(|s| s.error = true);
            let (a, b) = both("tools/resolve", "read").await;
            assert!(
                matches!(a, Err(FetchError::Rpc { code: -32603, .. })),
                "{a:?}"
            );
            assert_eq!(a, b);
            // HTTP 503 with Retry-After: a transport error carrying it.
            up.update(|s| {
                s.error = false;
                s.overloaded = Some(120);
            });
            let (a, b) = both("tools/resolve", "read").await;
            for r in [&a, &b] {
                assert!(
                    matches!(r, Err(FetchError::Transport { retry_after: Some(d), .. })
                        if *d == Duration::from_secs(120)),
                    "legacy {legacy}: {r:?}"
                );
            }
            c.close();
        }
    }

    /// An upstream that answers every method it does not know with `{}` (as
    /// the official conformance suite's test servers do), `server/discover`
    /// included: the connection falls back to `initialize` (2025-11-25)
    /// instead of failing, and a resolve call goes through.
    #[tokio::test]
    async fn an_empty_answer_to_server_discover_falls_back_to_initialize() {
        use axum::Json;
        use axum::http::StatusCode;
        use axum::response::IntoResponse;
        async fn mcp(Json(m): Json<Value>) -> axum::response::Response {
            let Some(id) = m.get("id").cloned() else {
                return StatusCode::ACCEPTED.into_response();
            };
            let result = match m["method"].as_str() {
                Some("initialize") => serde_json::json!({
                    "protocolVersion": m["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "empty-answers", "version": "1.0.0"},
                }),
                Some("tools/resolve") => serde_json::json!({"tool": {
                    "name": "manage_files",
                    "inputSchema": {"type": "object"},
                    "annotations": {"readOnlyHint": true},
                }}),
                _ => serde_json::json!({}),
            };
            Json(serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = axum::Router::new().route("/mcp", axum::routing::post(mcp));
        tokio::spawn(async move { axum::serve(listener, app).await });
        let pool = Pool::new(
            pinfold_egress::Egress::new(pinfold_egress::EgressConfig::default()),
            1 << 20,
            Duration::from_secs(2),
        );
        let target = UpstreamTarget {
            url: format!("http://{addr}/mcp"),
            headers: vec![],
            rules: pinfold_egress::Rules::new(pinfold_egress::AllowList::default(), true),
        };
        let c = Connection::open(&pool, &target, Arc::new(|| {}))
            .await
            .expect("the connection opens despite the {} answer");
        assert_eq!(c.protocol_version().as_deref(), Some("2025-11-25"));
        let r = c
            .call(
                "tools/resolve",
                "manage_files",
                &serde_json::json!({"path": "/a", "action": "read"}),
            )
            .await
            .unwrap();
        assert_eq!(r["tool"]["annotations"]["readOnlyHint"], true);
        c.close();
    }
}
