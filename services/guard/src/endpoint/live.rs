//! A route as one replica serves it: the pinned signature prepared, the
//! upstream target, and the review of the upstream's tool list that every
//! `tools/list` and `tools/call` is decided on.
//!
//! The review is kept current off the request path by a task of the
//! route's own: it opens the guard's own connection to the upstream, lists
//! every page of tools, reviews them with core's rules
//! ([`pinfold_core::guard::review_tools`]) and publishes the result; then
//! it waits for a list change (on its own connection's stream, or seen by
//! the endpoint on a client's stream) or for the review to age, and does it
//! again. From a list change until the new review is published the state is
//! *pending*, and requests wait for it: nothing is answered on a list that
//! has not been checked.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use pinfold_core::Mode;
use pinfold_core::card::{Limits, Signature};
use pinfold_core::guard::{CallsPolicy, ToolsReview, review_tools};
use pinfold_core::ids::TenantId;
use pinfold_resolve_check::PreparedSignature;
use reqwest::Method;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Value, json};
use tokio::sync::{Notify, watch};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::source::ApprovedVersion;
use super::upstream::{
    Exchange, METHOD_HEADER, Outbound, PROTOCOL_HEADER, Target, UpstreamError, event_message,
    events,
};

/// The revision the guard's own connection asks for with `initialize`.
pub const LEGACY_VERSION: &str = "2025-11-25";
/// The sessionless revision.
pub const MODERN_VERSION: &str = "2026-07-28";

/// What changes a route's served view: when any part differs, the replica
/// builds the route anew.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    /// The route's revision.
    pub revision: i64,
    /// The pinned card's digest.
    pub digest: String,
    /// The mode in force.
    pub mode: Mode,
    /// The calls policy.
    pub calls: CallsPolicy,
}

/// The state of a route's review.
#[derive(Clone)]
pub enum ReviewState {
    /// Being made (first use, or after a list change).
    Pending,
    /// The review in force.
    Ready(Arc<ToolsReview>),
    /// The upstream could not be listed; the message says why (redacted).
    Failed(String),
}

/// A drift seen by a route's task, for the endpoint to record.
pub type DriftHook = Arc<dyn Fn(Arc<ToolsReview>) + Send + Sync>;

/// How the protocol with the upstream was settled.
const UNKNOWN: u8 = 0;
const LEGACY: u8 = 1;
const MODERN: u8 = 2;

struct Shared {
    tx: watch::Sender<ReviewState>,
    refresh: Notify,
    protocol: AtomicU8,
}

impl Shared {
    fn stale(&self) {
        self.tx.send_replace(ReviewState::Pending);
        self.refresh.notify_one();
    }
}

/// A review and the `tools/list` results rendered from it, one per view
/// (extension marker or not, times sessionless or not).
type Rendered = (Arc<ToolsReview>, [Option<bytes::Bytes>; 4]);

/// One route as this replica serves it.
pub struct LiveRoute {
    /// The tenant.
    pub tenant: TenantId,
    /// What the view depends on.
    pub fingerprint: Fingerprint,
    /// The upstream.
    pub target: Target,
    /// The approved version it pins.
    pub approved: ApprovedVersion,
    /// Its signature.
    pub signature: Arc<Signature>,
    /// Its tools prepared (input validators, resolution checks).
    pub prepared: Option<Arc<PreparedSignature>>,
    review: watch::Receiver<ReviewState>,
    shared: Arc<Shared>,
    /// When the route's row and pin were last compared with the store.
    pub checked: std::sync::Mutex<Instant>,
    /// The served `tools/list` result, rendered once per review and view
    /// (marker or not, sessionless or not).
    rendered: std::sync::Mutex<Option<Rendered>>,
    _stop: DropGuard,
}

/// Settings of a route's task.
#[derive(Clone)]
pub struct TaskConfig {
    /// The egress path.
    pub outbound: Outbound,
    /// Limits under which lists are read.
    pub limits: Limits,
    /// How long the `server/discover` probe waits.
    pub probe_budget: Duration,
    /// How often a review is made again when the upstream offers no list
    /// change channel.
    pub review_interval: Duration,
}

impl LiveRoute {
    /// Builds the route and starts its review task.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        tenant: TenantId,
        fingerprint: Fingerprint,
        target: Target,
        approved: ApprovedVersion,
        signature: Signature,
        prepared: Option<Arc<PreparedSignature>>,
        config: TaskConfig,
        on_drift: DriftHook,
    ) -> Arc<LiveRoute> {
        let (tx, rx) = watch::channel(ReviewState::Pending);
        let shared = Arc::new(Shared {
            tx,
            refresh: Notify::new(),
            protocol: AtomicU8::new(UNKNOWN),
        });
        let stop = CancellationToken::new();
        let signature = Arc::new(signature);
        let task = Task {
            shared: shared.clone(),
            target: target.clone(),
            signature: signature.clone(),
            mode: fingerprint.mode,
            config,
            on_drift,
            stop: stop.clone(),
        };
        tokio::spawn(async move {
            let stop = task.stop.clone();
            tokio::select! {
                () = task.run() => {},
                () = stop.cancelled() => {},
            }
        });
        Arc::new(LiveRoute {
            tenant,
            fingerprint,
            target,
            approved,
            signature,
            prepared,
            review: rx,
            shared,
            checked: std::sync::Mutex::new(Instant::now()),
            rendered: std::sync::Mutex::new(None),
            _stop: stop.drop_guard(),
        })
    }

    /// The review in force, when there is one now (no wait).
    pub fn review_now(&self) -> Option<Arc<ToolsReview>> {
        match &*self.review.borrow() {
            ReviewState::Ready(r) => Some(r.clone()),
            _ => None,
        }
    }

    /// The review in force, waiting at most `wait` for a pending one.
    pub async fn review(&self, wait: Duration) -> Result<Arc<ToolsReview>, ReviewState> {
        if let Some(r) = self.review_now() {
            return Ok(r);
        }
        let mut rx = self.review.clone();
        let state =
            tokio::time::timeout(wait, rx.wait_for(|s| !matches!(s, ReviewState::Pending))).await;
        match state {
            Ok(Ok(s)) => match &*s {
                ReviewState::Ready(r) => Ok(r.clone()),
                other => Err(other.clone()),
            },
            _ => Err(ReviewState::Pending),
        }
    }

    /// The `tools/list` result `review` serves, as JSON bytes: with the
    /// tool-resolution marker when the client advertised the extension,
    /// with `ttlMs` and `cacheScope` on 2026-07-28. Rendered once per
    /// review and view.
    pub fn list_bytes(
        &self,
        review: &Arc<ToolsReview>,
        extension: bool,
        modern: bool,
    ) -> bytes::Bytes {
        let slot = usize::from(extension) * 2 + usize::from(modern);
        let mut cache = self.rendered.lock().unwrap_or_else(|e| e.into_inner());
        // Held, so its address is never another review's.
        if cache.as_ref().is_none_or(|(r, _)| !Arc::ptr_eq(r, review)) {
            *cache = Some((review.clone(), Default::default()));
        }
        let Some((_, views)) = cache.as_mut() else {
            return bytes::Bytes::new();
        };
        views[slot]
            .get_or_insert_with(|| {
                let mut r = review.list_result(extension);
                if modern {
                    r["ttlMs"] = json!(0);
                    r["cacheScope"] = json!("private");
                }
                bytes::Bytes::from(serde_json::to_vec(&r).unwrap_or_default())
            })
            .clone()
    }

    /// A list change seen on a client's stream: requests wait for a new
    /// review.
    pub fn stale(&self) {
        self.shared.stale();
    }

    /// Whether the upstream speaks the sessionless revision (`None` until
    /// the route's task has connected once).
    pub fn modern(&self) -> Option<bool> {
        match self.shared.protocol.load(Ordering::Acquire) {
            LEGACY => Some(false),
            MODERN => Some(true),
            _ => None,
        }
    }
}

struct Task {
    shared: Arc<Shared>,
    target: Target,
    signature: Arc<Signature>,
    mode: Mode,
    config: TaskConfig,
    on_drift: DriftHook,
    stop: CancellationToken,
}

/// The guard's own connection to the upstream.
struct Conn {
    session: Option<String>,
    protocol: String,
    modern: bool,
    /// The upstream said it announces tool list changes.
    announces: bool,
}

fn client_capabilities() -> Value {
    json!({"extensions": {pinfold_core::guard::TOOL_RESOLUTION: {}}})
}

fn client_info() -> Value {
    json!({"name": "pinfold-guard", "version": env!("CARGO_PKG_VERSION")})
}

/// Whether a `server/discover` answer is a discover result offering the
/// sessionless revision (the same rule as `pinfold_mcp_client`'s probe:
/// anything else falls back to `initialize`).
pub fn offers_modern(answer: &Value) -> bool {
    answer
        .pointer("/result/supportedVersions")
        .and_then(Value::as_array)
        .is_some_and(|v| v.iter().any(|v| v == MODERN_VERSION))
}

impl Task {
    async fn run(self) {
        let mut backoff = Duration::from_millis(500);
        let mut noted: HashSet<String> = HashSet::new();
        loop {
            let conn = match self.connect().await {
                Ok(c) => c,
                Err(e) => {
                    self.shared
                        .tx
                        .send_replace(ReviewState::Failed(e.to_string()));
                    tokio::select! {
                        () = tokio::time::sleep(backoff) => {},
                        () = self.shared.refresh.notified() => {},
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                    continue;
                }
            };
            backoff = Duration::from_millis(500);
            self.shared
                .protocol
                .store(if conn.modern { MODERN } else { LEGACY }, Ordering::Release);
            let listener = self.listen(&conn);
            let listening = listener.is_some();
            let _listener = listener.map(AbortOnDrop);
            loop {
                match self.list(&conn).await {
                    Ok(tools) => {
                        let doc = json!({ "tools": tools });
                        let review = match review_tools(
                            &self.signature,
                            &doc,
                            self.mode,
                            &self.config.limits,
                        ) {
                            Ok(r) => r,
                            Err(e) => {
                                let why = e
                                    .errors
                                    .first()
                                    .map(|f| format!("{}: {}", f.pointer, f.message))
                                    .unwrap_or_default();
                                tracing::warn!(%why, "the upstream's tools/list cannot be read; taken as listing no tool");
                                match review_tools(
                                    &self.signature,
                                    &json!({"tools": []}),
                                    self.mode,
                                    &self.config.limits,
                                ) {
                                    Ok(r) => r,
                                    Err(_) => break,
                                }
                            }
                        };
                        let review = Arc::new(review);
                        if !review.drifts().is_empty()
                            && noted.insert(review.upstream_digest().to_owned())
                        {
                            (self.on_drift)(review.clone());
                        }
                        self.shared.tx.send_replace(ReviewState::Ready(review));
                    }
                    Err(UpstreamError::SessionGone) => break,
                    Err(e) => {
                        self.shared
                            .tx
                            .send_replace(ReviewState::Failed(e.to_string()));
                        tokio::select! {
                            () = tokio::time::sleep(backoff) => {},
                            () = self.shared.refresh.notified() => {},
                        }
                        break;
                    }
                }
                let interval = if listening && conn.announces {
                    self.config.review_interval * 10
                } else {
                    self.config.review_interval
                };
                tokio::select! {
                    () = self.shared.refresh.notified() => {},
                    () = tokio::time::sleep(interval) => {},
                }
            }
        }
    }

    fn exchange(&self, conn: &Conn, method: &str) -> Exchange {
        let mut pass = HeaderMap::new();
        if let Ok(v) = HeaderValue::from_str(&conn.protocol) {
            pass.insert(PROTOCOL_HEADER, v);
        }
        if conn.modern
            && let Ok(v) = HeaderValue::from_str(method)
        {
            pass.insert(METHOD_HEADER, v);
        }
        Exchange {
            session: conn.session.clone(),
            pass,
        }
    }

    fn meta(&self, conn: &Conn) -> Option<Value> {
        conn.modern.then(|| {
            json!({
                "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
                "io.modelcontextprotocol/clientCapabilities": client_capabilities(),
                "io.modelcontextprotocol/clientInfo": client_info(),
            })
        })
    }

    async fn connect(&self) -> Result<Conn, UpstreamError> {
        let out = &self.config.outbound;
        // The sessionless revision first, within the probe budget; any
        // answer but a discover result offering it falls back to
        // `initialize` on 2025-11-25, as every Pinfold client connection does.
        let mut pass = HeaderMap::new();
        pass.insert(PROTOCOL_HEADER, HeaderValue::from_static(MODERN_VERSION));
        pass.insert(METHOD_HEADER, HeaderValue::from_static("server/discover"));
        let probe = json!({"jsonrpc": "2.0", "id": "pinfold-guard-discover",
            "method": "server/discover", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
                "io.modelcontextprotocol/clientCapabilities": client_capabilities(),
                "io.modelcontextprotocol/clientInfo": client_info()}}});
        let ex = Exchange {
            session: None,
            pass,
        };
        match tokio::time::timeout(
            self.config.probe_budget,
            out.call(&self.target, &probe, &ex),
        )
        .await
        {
            Ok(Ok(a)) if a.response.as_ref().is_some_and(offers_modern) => {
                let announces = a
                    .response
                    .as_ref()
                    .and_then(|r| r.pointer("/result/capabilities/tools/listChanged"))
                    == Some(&Value::Bool(true));
                return Ok(Conn {
                    session: None,
                    protocol: MODERN_VERSION.into(),
                    modern: true,
                    announces,
                });
            }
            Ok(Err(e @ (UpstreamError::NotAllowed | UpstreamError::Unreachable))) => return Err(e),
            _ => {}
        }
        let init = json!({"jsonrpc": "2.0", "id": "pinfold-guard-init", "method": "initialize",
            "params": {"protocolVersion": LEGACY_VERSION, "capabilities": client_capabilities(),
                "clientInfo": client_info()}});
        let a = out.call(&self.target, &init, &Exchange::default()).await?;
        let resp = a
            .response
            .ok_or_else(|| UpstreamError::Protocol("no answer to initialize".into()))?;
        if let Some(e) = resp.get("error") {
            return Err(UpstreamError::Protocol(format!(
                "initialize refused: {}",
                e.get("message").and_then(Value::as_str).unwrap_or("")
            )));
        }
        let protocol = resp
            .pointer("/result/protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or(LEGACY_VERSION)
            .to_owned();
        let announces =
            resp.pointer("/result/capabilities/tools/listChanged") == Some(&Value::Bool(true));
        let conn = Conn {
            session: a.session,
            protocol,
            modern: false,
            announces,
        };
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let body = serde_json::to_vec(&note).unwrap_or_default();
        let _ = out
            .send(
                &self.target,
                Method::POST,
                Some(body),
                &self.exchange(&conn, "notifications/initialized"),
                false,
            )
            .await?;
        Ok(conn)
    }

    /// Every page of the upstream's tools (at most the limits' tools).
    async fn list(&self, conn: &Conn) -> Result<Vec<Value>, UpstreamError> {
        let mut tools = Vec::new();
        let mut cursor: Option<Value> = None;
        for page in 0.. {
            let mut params = serde_json::Map::new();
            if let Some(c) = cursor.take() {
                params.insert("cursor".into(), c);
            }
            if let Some(m) = self.meta(conn) {
                params.insert("_meta".into(), m);
            }
            let req = json!({"jsonrpc": "2.0", "id": format!("pinfold-guard-list-{page}"),
                "method": "tools/list", "params": params});
            let a = self
                .config
                .outbound
                .call(&self.target, &req, &self.exchange(conn, "tools/list"))
                .await?;
            let resp = a.response.unwrap_or(Value::Null);
            if let Some(e) = resp.get("error") {
                let why = e.get("message").and_then(Value::as_str).unwrap_or("");
                tracing::warn!(
                    error = why,
                    "the upstream answered tools/list with an error; taken as listing no tool"
                );
                return Ok(Vec::new());
            }
            if let Some(t) = resp.pointer("/result/tools").and_then(Value::as_array) {
                tools.extend(t.iter().cloned());
            }
            match resp.pointer("/result/nextCursor") {
                Some(c) if !c.is_null() && tools.len() <= self.config.limits.max_tools => {
                    cursor = Some(c.clone());
                }
                _ => break,
            }
        }
        Ok(tools)
    }

    /// The stream list changes arrive on: the session's `GET` stream on
    /// 2025-11-25, a `subscriptions/listen` request on 2026-07-28.
    fn listen(&self, conn: &Conn) -> Option<tokio::task::JoinHandle<()>> {
        if !conn.announces {
            return None;
        }
        let out = self.config.outbound.clone();
        let target = self.target.clone();
        let shared = self.shared.clone();
        let (method, body, ex) = if conn.modern {
            let mut params = serde_json::Map::new();
            params.insert("notifications".into(), json!({"toolsListChanged": true}));
            if let Some(m) = self.meta(conn) {
                params.insert("_meta".into(), m);
            }
            let req = json!({"jsonrpc": "2.0", "id": "pinfold-guard-listen",
                "method": "subscriptions/listen", "params": params});
            (
                Method::POST,
                serde_json::to_vec(&req).ok(),
                self.exchange(conn, "subscriptions/listen"),
            )
        } else {
            (Method::GET, None, self.exchange(conn, "GET"))
        };
        let stop = self.stop.clone();
        Some(tokio::spawn(async move {
            let Ok(resp) = out.send(&target, method, body, &ex, true).await else {
                return;
            };
            if !resp.status().is_success() {
                return;
            }
            let mut stream = Box::pin(events(resp, out.max_bytes));
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    ev = stream.next() => match ev {
                        Some(Ok(ev)) => {
                            if event_message(&ev).is_some_and(|m| {
                                m.get("method").and_then(Value::as_str)
                                    == Some("notifications/tools/list_changed")
                            }) {
                                shared.stale();
                            }
                        }
                        _ => return,
                    }
                }
            }
        }))
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
