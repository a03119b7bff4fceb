//! The `server/discover` probe: a transport that stands between rmcp's
//! client and the real transport while a connection is opened, and turns
//! every answer to `server/discover` that is not a usable discover result
//! into the one answer rmcp's `Auto` lifecycle reads as "a server without
//! 2026-07-28": a JSON-RPC error (`-32601`, method not found) for that
//! request. rmcp then sends `initialize` on the same transport (the same
//! HTTP endpoint, the same child process).
//!
//! Why a transport and not a second connection: rmcp's `Auto` mode falls
//! back only on a correlated JSON-RPC error, and aborts on anything else —
//! a success result that is not a discover result (`{}` from a server that
//! answers every unknown method with an empty result, as the official
//! conformance suite's test servers do: "expect initialized result, but
//! received: Some(EmptyResult(EmptyObject))"), a discover result that
//! lists no version it speaks, a "modern" rejection code. Opening a second
//! connection would start a stdio server twice.
//!
//! What the probe decides is kept as a [`Negotiation`] for the caller to
//! report. The decision table is [`crate`]'s.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorCode, ErrorData, JsonRpcError, ProtocolVersion,
    RequestId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::time::Instant;

/// How the protocol was chosen: what the server's answer to the probe was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Negotiation {
    /// No probe was sent (the connection was opened with `initialize`
    /// directly).
    NotProbed,
    /// A discover result naming a version this client speaks.
    Discovered,
    /// The probe's answer was not usable; the connection fell back to
    /// `initialize` on the legacy revision.
    Fallback(Fallback),
}

/// Why the probe fell back to `initialize`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fallback {
    /// A JSON-RPC error answered `server/discover`.
    Error {
        /// Its code (`-32601` from a server that does not know the method).
        code: i32,
        /// Its message.
        message: String,
    },
    /// A success result that is not a discover result (`{}`, another
    /// shape); the text names what it read as.
    NotADiscoverResult(String),
    /// A discover result whose `supportedVersions` holds none of the
    /// versions this client speaks.
    NoCommonVersion(Vec<String>),
    /// No answer within the probe budget.
    NoAnswer(Duration),
}

impl std::fmt::Display for Negotiation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Negotiation::NotProbed => f.write_str("initialize (no server/discover probe)"),
            Negotiation::Discovered => f.write_str("server/discover"),
            Negotiation::Fallback(why) => write!(f, "initialize, because {why}"),
        }
    }
}

impl std::fmt::Display for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fallback::Error { code, message } => write!(
                f,
                "server/discover was answered with JSON-RPC error {code} ({message})"
            ),
            Fallback::NotADiscoverResult(what) => write!(
                f,
                "server/discover was answered with a result that is not a discover result ({what})"
            ),
            Fallback::NoCommonVersion(versions) => write!(
                f,
                "server/discover offers only {}",
                if versions.is_empty() {
                    "no version".to_owned()
                } else {
                    versions.join(", ")
                }
            ),
            Fallback::NoAnswer(budget) => write!(
                f,
                "server/discover had no answer within {} ms",
                budget.as_millis()
            ),
        }
    }
}

/// Where the probe's decision is kept (shared with the caller, which no
/// longer holds the transport once rmcp runs it).
#[derive(Debug, Clone)]
pub(crate) struct Verdict(Arc<Mutex<Negotiation>>);

impl Verdict {
    pub(crate) fn new() -> Verdict {
        Verdict(Arc::new(Mutex::new(Negotiation::NotProbed)))
    }

    fn set(&self, n: Negotiation) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = n;
    }

    pub(crate) fn get(&self) -> Negotiation {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

struct Pending {
    id: RequestId,
    deadline: Instant,
}

/// A transport that judges the answer to `server/discover` (see the module
/// documentation); every other message passes through unchanged.
pub(crate) struct Probe<T> {
    inner: T,
    budget: Duration,
    speaks: Vec<ProtocolVersion>,
    pending: Option<Pending>,
    /// Probes given up on (timed out, or overtaken by `initialize`): a late
    /// answer to one is dropped, never handed to rmcp as an uncorrelated
    /// response.
    abandoned: Vec<RequestId>,
    verdict: Verdict,
}

impl<T> Probe<T> {
    pub(crate) fn new(
        inner: T,
        budget: Duration,
        speaks: Vec<ProtocolVersion>,
        verdict: Verdict,
    ) -> Probe<T> {
        Probe {
            inner,
            budget,
            speaks,
            pending: None,
            abandoned: Vec::new(),
            verdict,
        }
    }

    fn give_up(&mut self) {
        if let Some(p) = self.pending.take() {
            self.abandoned.push(p.id);
        }
    }

    /// The answer rmcp reads as "legacy server": a correlated `-32601`.
    fn legacy(&mut self, id: RequestId, why: Fallback) -> ServerJsonRpcMessage {
        let message = why.to_string();
        self.verdict.set(Negotiation::Fallback(why));
        ServerJsonRpcMessage::Error(JsonRpcError::new(
            Some(id),
            ErrorData::new(ErrorCode::METHOD_NOT_FOUND, Cow::Owned(message), None),
        ))
    }

    /// Judges one message from the server; `None` drops it.
    fn judge(&mut self, msg: ServerJsonRpcMessage) -> Option<ServerJsonRpcMessage> {
        let answers = |id: &RequestId, p: &Pending| same_id(&p.id, id);
        match msg {
            ServerJsonRpcMessage::Response(r)
                if self.pending.as_ref().is_some_and(|p| answers(&r.id, p)) =>
            {
                self.pending = None;
                match &r.result {
                    ServerResult::DiscoverResult(d)
                        if d.supported_versions.iter().any(|v| self.speaks.contains(v)) =>
                    {
                        self.verdict.set(Negotiation::Discovered);
                        Some(ServerJsonRpcMessage::Response(r))
                    }
                    ServerResult::DiscoverResult(d) => {
                        let offered = d
                            .supported_versions
                            .iter()
                            .map(|v| v.as_str().to_owned())
                            .collect();
                        Some(self.legacy(r.id, Fallback::NoCommonVersion(offered)))
                    }
                    other => {
                        let what = describe(other);
                        Some(self.legacy(r.id, Fallback::NotADiscoverResult(what)))
                    }
                }
            }
            ServerJsonRpcMessage::Error(e)
                if self
                    .pending
                    .as_ref()
                    .is_some_and(|p| e.id.as_ref().is_none_or(|id| answers(id, p))) =>
            {
                let Some(p) = self.pending.take() else {
                    return Some(ServerJsonRpcMessage::Error(e));
                };
                Some(self.legacy(
                    p.id,
                    Fallback::Error {
                        code: e.error.code.0,
                        message: e.error.message.to_string(),
                    },
                ))
            }
            ServerJsonRpcMessage::Response(r)
                if self.abandoned.iter().any(|a| same_id(a, &r.id)) =>
            {
                tracing::debug!(id = %r.id, "dropping a late answer to server/discover");
                None
            }
            ServerJsonRpcMessage::Error(e)
                if e.id
                    .as_ref()
                    .is_some_and(|id| self.abandoned.iter().any(|a| same_id(a, id))) =>
            {
                tracing::debug!("dropping a late error answering server/discover");
                None
            }
            other => Some(other),
        }
    }
}

/// Whether a response id answers a request id (a server may echo a numeric
/// id as a string).
fn same_id(request: &RequestId, response: &RequestId) -> bool {
    request == response || request.to_string() == response.to_string()
}

/// A short description of a result that is not a discover result.
fn describe(result: &ServerResult) -> String {
    let json = serde_json::to_string(result).unwrap_or_default();
    if json == "{}" {
        return "an empty result, {}".to_owned();
    }
    let mut short: String = json.chars().take(80).collect();
    if short.len() < json.len() {
        short.push('…');
    }
    short
}

impl<T> Transport<RoleClient> for Probe<T>
where
    T: Transport<RoleClient>,
{
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let ClientJsonRpcMessage::Request(r) = &item {
            match &r.request {
                ClientRequest::DiscoverRequest(_) => {
                    self.give_up();
                    self.pending = Some(Pending {
                        id: r.id.clone(),
                        deadline: Instant::now() + self.budget,
                    });
                }
                // rmcp gave up on the probe itself (its own timeout).
                ClientRequest::InitializeRequest(_) => {
                    if self.pending.is_some() {
                        self.verdict
                            .set(Negotiation::Fallback(Fallback::NoAnswer(self.budget)));
                    }
                    self.give_up();
                }
                _ => {}
            }
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let msg = match self.pending.as_ref().map(|p| p.deadline) {
                Some(deadline) => {
                    match tokio::time::timeout_at(deadline, self.inner.receive()).await {
                        Ok(m) => m,
                        Err(_) => {
                            let p = self.pending.take()?;
                            self.abandoned.push(p.id.clone());
                            return Some(self.legacy(p.id, Fallback::NoAnswer(self.budget)));
                        }
                    }
                }
                None => self.inner.receive().await,
            }?;
            if let Some(m) = self.judge(msg) {
                return Some(m);
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
