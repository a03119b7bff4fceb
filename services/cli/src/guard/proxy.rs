//! The stdio guard's message handling, without pipes or processes: JSON-RPC
//! messages from the client and from the server in, messages to write out
//! and notes for stderr back. [`super::run`] feeds it lines; the tests feed
//! it values.
//!
//! The guard lists the server's tools itself (every page) once the client
//! has initialized, and again on every `notifications/tools/list_changed`,
//! and reviews them with the core rules ([`pinfold_core::guard`]). Until a
//! review is ready (at the start, and while the server's list is being
//! fetched again after a change), the client's `tools/list` and
//! `tools/call` wait: nothing is answered or forwarded on a list that has
//! not been checked. The client's `tools/list` is answered by the guard
//! from the review, in one page. The server's `list_changed` reaches the
//! client once the new list is reviewed, so the client lists again and
//! sees the new view.

use std::collections::HashMap;

use pinfold_core::Mode;
use pinfold_core::annotations::Annotations;
use pinfold_core::card::{Limits, Signature};
use pinfold_core::guard::{
    self, CallsPolicy, Standing, TOOL_RESOLUTION, ToolsReview, invalid_arguments, review_list,
    review_tools,
};
use pinfold_resolve_check::PreparedSignature;
use serde_json::{Value, json};

/// Where a message goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    /// To the client (the guard's stdout).
    Client(Value),
    /// To the server (its stdin).
    Server(Value),
    /// A line for the guard's stderr.
    Note(String),
}

/// The guard's own `tools/list` in progress.
struct Fetch {
    id: String,
    tools: Vec<Value>,
}

/// The guard between one client and one server.
pub struct Proxy {
    signature: Signature,
    prepared: Option<PreparedSignature>,
    mode: Mode,
    calls: CallsPolicy,
    limits: Limits,
    /// The client advertised the tool-resolution extension.
    extension: bool,
    /// The last review; `None` until the first one.
    review: Option<ToolsReview>,
    fetch: Option<Fetch>,
    /// Another `list_changed` came while a fetch was running.
    fetch_again: bool,
    /// Tell the client the list changed once the review is ready.
    announce: bool,
    /// Client requests waiting for a review.
    waiting: Vec<Value>,
    /// Client requests whose results are cut to the signature: the id
    /// (as JSON text) and the list's member name.
    cut: HashMap<String, &'static str>,
    /// Upstream list digests whose drifts were noted.
    noted: Vec<String>,
    /// Client calls waiting for the server's resolution of their
    /// annotations, by the id of the guard's own request.
    resolving: HashMap<String, Value>,
    next_id: u64,
}

fn response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn error(id: &Value, error: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// A JSON-RPC error object.
pub fn rpc_error(code: i64, message: &str) -> Value {
    json!({"code": code, "message": message})
}

impl Proxy {
    /// A guard enforcing `signature` (its card already checked; `card` is
    /// the document, for argument validation) under `mode` and `calls`.
    pub fn new(
        signature: Signature,
        card: Option<&Value>,
        mode: Mode,
        calls: CallsPolicy,
        limits: Limits,
    ) -> Proxy {
        let prepared = card.and_then(|c| PreparedSignature::new(c, &limits).ok());
        Proxy {
            signature,
            prepared,
            mode,
            calls,
            limits,
            extension: false,
            review: None,
            fetch: None,
            fetch_again: false,
            announce: false,
            waiting: Vec::new(),
            cut: HashMap::new(),
            noted: Vec::new(),
            resolving: HashMap::new(),
            next_id: 0,
        }
    }

    /// The review in force, once there is one.
    pub fn review(&self) -> Option<&ToolsReview> {
        self.review.as_ref()
    }

    fn start_fetch(&mut self, cursor: Option<Value>, out: &mut Vec<Out>) {
        self.next_id += 1;
        let id = format!("pinfold-guard-{}", self.next_id);
        let mut req = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
        if let Some(c) = cursor {
            req["params"] = json!({ "cursor": c });
        }
        let tools = match self.fetch.take() {
            Some(f) if cursor_continues(&req) => f.tools,
            _ => Vec::new(),
        };
        self.fetch = Some(Fetch { id, tools });
        out.push(Out::Server(req));
    }

    /// A list change (or the first list): fetch unless a fetch runs.
    fn refresh(&mut self, out: &mut Vec<Out>) {
        if self.fetch.is_some() {
            self.fetch_again = true;
        } else {
            self.start_fetch(None, out);
        }
    }

    /// Handles one message from the client.
    pub fn from_client(&mut self, msg: Value) -> Vec<Out> {
        let mut out = Vec::new();
        let Some(obj) = msg.as_object() else {
            out.push(Out::Client(error(
                &Value::Null,
                rpc_error(
                    -32600,
                    "Invalid Request: the guard accepts one JSON-RPC message per line, not a batch",
                ),
            )));
            return out;
        };
        let Some(method) = obj.get("method").and_then(Value::as_str) else {
            // A response to a request of the server's (sampling, roots,
            // elicitation): it goes back as it is.
            out.push(Out::Server(msg));
            return out;
        };
        let id = obj.get("id").cloned();
        match (method, id) {
            ("initialize", _) => {
                self.extension = msg
                    .pointer("/params/capabilities/extensions")
                    .and_then(|e| e.get(TOOL_RESOLUTION))
                    .is_some();
                out.push(Out::Server(msg));
            }
            ("notifications/initialized", _) => {
                out.push(Out::Server(msg));
                if self.review.is_none() {
                    self.refresh(&mut out);
                }
            }
            ("tools/list" | "tools/call", Some(_)) => {
                if self.review.is_none() && self.fetch.is_none() {
                    self.refresh(&mut out);
                }
                if self.review.is_some() && self.fetch.is_none() {
                    self.decide(msg, &mut out);
                } else {
                    self.waiting.push(msg);
                }
            }
            ("prompts/get", Some(id)) => {
                let name = msg
                    .pointer("/params/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                match guard::prompt_get(&self.signature, name, self.mode) {
                    Ok(()) => out.push(Out::Server(msg)),
                    Err(r) => out.push(Out::Client(error(&id, r.to_error()))),
                }
            }
            ("resources/read", Some(id)) => {
                let uri = msg
                    .pointer("/params/uri")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                match guard::resource_read(&self.signature, uri, self.mode) {
                    Ok(()) => out.push(Out::Server(msg)),
                    Err(r) => out.push(Out::Client(error(&id, r.to_error()))),
                }
            }
            ("prompts/list", Some(id)) => {
                self.cut.insert(id.to_string(), "prompts");
                out.push(Out::Server(msg));
            }
            ("resources/list", Some(id)) => {
                self.cut.insert(id.to_string(), "resources");
                out.push(Out::Server(msg));
            }
            ("resources/templates/list", Some(id)) => {
                self.cut.insert(id.to_string(), "resourceTemplates");
                out.push(Out::Server(msg));
            }
            _ => out.push(Out::Server(msg)),
        }
        out
    }

    /// Answers or forwards a `tools/list` or `tools/call` under the
    /// review in force.
    fn decide(&mut self, msg: Value, out: &mut Vec<Out>) {
        let Some(review) = &self.review else {
            self.waiting.push(msg);
            return;
        };
        let id = msg.get("id").cloned().unwrap_or(Value::Null);
        if msg["method"] == "tools/list" {
            out.push(Out::Client(response(
                &id,
                review.list_result(self.extension),
            )));
            return;
        }
        let Some(name) = msg.pointer("/params/name").and_then(Value::as_str) else {
            out.push(Out::Client(error(
                &id,
                rpc_error(-32602, "Invalid params: tools/call needs a tool name"),
            )));
            return;
        };
        let tool = match review.call(name) {
            Ok(t) => t,
            Err(refusal) => {
                out.push(Out::Note(format!(
                    "pinfold guard: refused a call of {name:?}: {}",
                    refusal.reason.as_str()
                )));
                out.push(Out::Client(error(&id, refusal.to_error())));
                return;
            }
        };
        if tool.standing() != Standing::Undeclared
            && let Some(p) = self.prepared.as_ref().and_then(|p| p.tool(name))
        {
            let empty = json!({});
            let arguments = msg.pointer("/params/arguments").unwrap_or(&empty);
            if let Err(e) = p.validate(arguments) {
                out.push(Out::Client(response(&id, invalid_arguments(name, &e))));
                return;
            }
        }
        // A policy that looks at annotations, on a tool that resolves
        // them per call: ask the server for this call's annotations (SEP-1862
        // `tools/resolve`, or `tools/annotations`), and decide on the answer.
        let method = self
            .prepared
            .as_ref()
            .and_then(|p| p.tool(name))
            .and_then(|p| p.kind().method());
        if self.calls != CallsPolicy::All
            && tool.standing() != Standing::Undeclared
            && let Some(method) = method
        {
            let arguments = msg
                .pointer("/params/arguments")
                .cloned()
                .unwrap_or_else(|| json!({}));
            self.next_id += 1;
            let rid = format!("pinfold-guard-{}", self.next_id);
            out.push(Out::Server(json!({
                "jsonrpc": "2.0", "id": rid, "method": method,
                "params": {"name": name, "arguments": arguments, "_meta": {
                    "io.modelcontextprotocol/clientCapabilities":
                        {"extensions": {TOOL_RESOLUTION: {}}}}}
            })));
            self.resolving.insert(rid, msg);
            return;
        }
        self.policy(msg, None, out);
    }

    /// Decides the route's calls policy for a call on `resolved` (its
    /// resolution, within the signature) or else on its tool's worst case,
    /// and forwards or refuses it.
    fn policy(&self, msg: Value, resolved: Option<&Annotations>, out: &mut Vec<Out>) {
        let id = msg.get("id").cloned().unwrap_or(Value::Null);
        let name = msg
            .pointer("/params/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let Some(tool) = self.review.as_ref().and_then(|r| r.call(name).ok()) else {
            out.push(Out::Client(error(
                &id,
                rpc_error(
                    guard::REFUSED,
                    "Refused by Pinfold: the tool is no longer shown",
                ),
            )));
            return;
        };
        if let Err(result) = tool.check_policy(self.calls, resolved) {
            out.push(Out::Note(format!(
                "pinfold guard: refused a call of {name:?} under --calls {}",
                self.calls
            )));
            out.push(Out::Client(response(&id, result)));
            return;
        }
        out.push(Out::Server(msg));
    }

    /// The server's answer to the guard's resolution of a waiting call:
    /// its annotations when the answer is within the signature, else the
    /// worst case.
    fn resolved(&mut self, call: Value, answer: &Value, out: &mut Vec<Out>) {
        let name = call
            .pointer("/params/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let prepared = self.prepared.as_ref().and_then(|p| p.tool(&name));
        let annotations = match (answer.get("result"), prepared) {
            (Some(result), Some(p)) => match p.check(result, &self.limits) {
                Ok(report) if report.conformant => {
                    let served = p.served_tool(result.clone());
                    let mut errors = pinfold_core::error::ValidationErrors::new();
                    let a = Annotations::parse(&served["annotations"], "", &mut errors);
                    errors.is_empty().then_some(a)
                }
                _ => {
                    out.push(Out::Note(format!(
                        "pinfold guard: the server's resolution of {name:?} is outside the \
                         signature; the call is decided on the worst case"
                    )));
                    None
                }
            },
            _ => None,
        };
        self.policy(call, annotations.as_ref(), out);
    }

    /// Handles one message from the server.
    pub fn from_server(&mut self, msg: Value) -> Vec<Out> {
        let mut out = Vec::new();
        let method = msg.get("method").and_then(Value::as_str);
        let id = msg.get("id");
        match (method, id) {
            (Some("notifications/tools/list_changed"), None) => {
                self.announce = true;
                self.refresh(&mut out);
            }
            (Some(_), _) => out.push(Out::Client(msg)),
            (None, Some(id)) => {
                if self
                    .fetch
                    .as_ref()
                    .is_some_and(|f| id.as_str() == Some(&f.id))
                {
                    self.page(&msg, &mut out);
                } else if let Some(call) = id.as_str().and_then(|i| self.resolving.remove(i)) {
                    self.resolved(call, &msg, &mut out);
                } else if let Some(key) = self.cut.remove(&id.to_string()) {
                    let cut = self.cut_list(msg, key, &mut out);
                    out.push(Out::Client(cut));
                } else {
                    out.push(Out::Client(msg));
                }
            }
            (None, None) => out.push(Out::Note(
                "pinfold guard: the server sent a message that is neither a request, a \
                 notification nor a response; dropped"
                    .into(),
            )),
        }
        out
    }

    /// One page of the guard's own `tools/list`.
    fn page(&mut self, msg: &Value, out: &mut Vec<Out>) {
        let Some(fetch) = self.fetch.as_mut() else {
            return;
        };
        if let Some(e) = msg.get("error") {
            out.push(Out::Note(format!(
                "pinfold guard: the server answered tools/list with an error ({}); it is taken as \
                 listing no tool",
                e.get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("no message")
            )));
        } else if let Some(tools) = msg.pointer("/result/tools").and_then(Value::as_array) {
            fetch.tools.extend(tools.iter().cloned());
            if let Some(c) = msg.pointer("/result/nextCursor").filter(|c| !c.is_null()) {
                if fetch.tools.len() > self.limits.max_tools {
                    out.push(Out::Note(format!(
                        "pinfold guard: the server lists more than {} tools; the rest is not read",
                        self.limits.max_tools
                    )));
                } else {
                    let cursor = c.clone();
                    self.start_fetch(Some(cursor), out);
                    return;
                }
            }
        }
        let tools = self.fetch.take().map(|f| f.tools).unwrap_or_default();
        match review_tools(
            &self.signature,
            &json!({ "tools": tools }),
            self.mode,
            &self.limits,
        ) {
            Ok(r) => {
                if !self.noted.iter().any(|d| d == r.upstream_digest()) {
                    for d in r.drifts() {
                        let kinds: Vec<&str> = d.changes.iter().map(|c| c.kind).collect();
                        out.push(Out::Note(format!(
                            "pinfold guard: {} tool {:?} ({}, {}){}",
                            serde_json::to_value(d.standing)
                                .ok()
                                .and_then(|v| v.as_str().map(str::to_owned))
                                .unwrap_or_default(),
                            d.tool,
                            d.class.as_str(),
                            kinds.join(", "),
                            if d.withheld { ": withheld" } else { "" }
                        )));
                    }
                    self.noted.push(r.upstream_digest().to_owned());
                }
                self.review = Some(r);
            }
            Err(e) => {
                out.push(Out::Note(format!(
                    "pinfold guard: the server's tools/list cannot be read ({}); it is taken as \
                     listing no tool",
                    e.errors
                        .first()
                        .map(|f| format!("{}: {}", f.pointer, f.message))
                        .unwrap_or_default()
                )));
                let empty = json!({"tools": []});
                self.review = review_tools(&self.signature, &empty, self.mode, &self.limits).ok();
            }
        }
        if std::mem::take(&mut self.fetch_again) {
            self.start_fetch(None, out);
            return;
        }
        if std::mem::take(&mut self.announce) {
            out.push(Out::Client(
                json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
            ));
        }
        for msg in std::mem::take(&mut self.waiting) {
            self.decide(msg, out);
        }
    }

    /// A prompts or resources list result cut to the signature.
    fn cut_list(&self, msg: Value, key: &str, out: &mut Vec<Out>) -> Value {
        let Some(result) = msg.get("result") else {
            return msg;
        };
        match review_list(&self.signature, result, key, self.mode, &self.limits) {
            Ok((shown, undeclared)) => {
                if !undeclared.is_empty() {
                    out.push(Out::Note(format!(
                        "pinfold guard: undeclared {key}: {}{}",
                        undeclared.join(", "),
                        if self.mode == Mode::Strict {
                            " (withheld)"
                        } else {
                            ""
                        }
                    )));
                }
                let mut msg = msg;
                msg["result"] = shown;
                msg
            }
            Err(_) => {
                let id = msg.get("id").cloned().unwrap_or(Value::Null);
                error(
                    &id,
                    rpc_error(
                        -32603,
                        &format!("the server's {key} list cannot be read by the guard"),
                    ),
                )
            }
        }
    }
}

/// Whether a request continues a paginated fetch (carries a cursor).
fn cursor_continues(req: &Value) -> bool {
    req.pointer("/params/cursor").is_some()
}

#[cfg(test)]
mod tests;
