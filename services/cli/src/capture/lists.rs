//! A live capture: connect to the target, run every list the server
//! advertises (following `nextCursor`, taking each page's raw answer from
//! the tap), and disconnect; what it found is a [`Captured`].

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use pinfold_core::draft::{Origin, ServerInfo};
use pinfold_mcp_client::stdio::StopTimes;
use pinfold_mcp_client::{ClientProfile, Negotiation};
use rmcp::model::{
    ClientRequest, ErrorCode, ListPromptsRequest, ListResourceTemplatesRequest,
    ListResourcesRequest, ListToolsRequest, PaginatedRequestParams,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use serde_json::{Map, Value};

use super::error::{CaptureError, error_chain, redacted};
use super::session::{Session, connect};
use super::target::{Target, public_url};
use crate::progress::Progress;

/// Most pages followed per list.
const MAX_PAGES: usize = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListKind {
    Tools,
    Prompts,
    Resources,
    ResourceTemplates,
}

impl ListKind {
    fn method(self) -> &'static str {
        match self {
            ListKind::Tools => "tools/list",
            ListKind::Prompts => "prompts/list",
            ListKind::Resources => "resources/list",
            ListKind::ResourceTemplates => "resources/templates/list",
        }
    }

    fn key(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources => "resources",
            ListKind::ResourceTemplates => "resourceTemplates",
        }
    }

    fn request(self, cursor: Option<String>) -> ClientRequest {
        let p = PaginatedRequestParams::default().with_cursor(cursor);
        match self {
            ListKind::Tools => ClientRequest::ListToolsRequest(ListToolsRequest::with_param(p)),
            ListKind::Prompts => {
                ClientRequest::ListPromptsRequest(ListPromptsRequest::with_param(p))
            }
            ListKind::Resources => {
                ClientRequest::ListResourcesRequest(ListResourcesRequest::with_param(p))
            }
            ListKind::ResourceTemplates => ClientRequest::ListResourceTemplatesRequest(
                ListResourceTemplatesRequest::with_param(p),
            ),
        }
    }
}

/// What a capture found.
#[derive(Debug, Clone)]
pub struct Captured {
    /// How the server is shown (public URL, or the program).
    pub label: String,
    /// The negotiated protocol version.
    pub protocol_version: String,
    /// What the server says about itself.
    pub server_info: ServerInfo,
    /// Where it was captured (for the draft's name and remote).
    pub origin: Origin,
    /// `{"tools", "prompts", "resources", "resourceTemplates"}`: the lists
    /// the server advertises, as it sent them; the others empty.
    pub lists: Value,
    /// Things worth saying about the capture (a list the server advertises
    /// but does not answer, ...).
    pub notes: Vec<String>,
    /// `serverInfo.name` exactly as the server sent it (none when it sent
    /// none): which server this is, for `verify` to compare.
    pub reported_name: Option<String>,
    /// The capabilities the client advertised.
    pub profile: ClientProfile,
    /// How the protocol was chosen.
    pub negotiation: Negotiation,
}

impl Captured {
    /// "3 tools, 0 prompts, 1 resource, 0 resource templates".
    pub fn summary(&self) -> String {
        let n = |k: &str| self.lists[k].as_array().map_or(0, Vec::len);
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        format!(
            "{}, {}, {}, {}",
            plural(n("tools"), "tool", "tools"),
            plural(n("prompts"), "prompt", "prompts"),
            plural(n("resources"), "resource", "resources"),
            plural(
                n("resourceTemplates"),
                "resource template",
                "resource templates"
            ),
        )
    }
}

/// Connects to `target` advertising `profile`, runs every list it
/// advertises and disconnects.
pub async fn capture(
    target: &Target,
    timeout: Duration,
    profile: &ClientProfile,
    progress: &mut Progress<'_>,
) -> Result<Captured, CaptureError> {
    let label = target.label();
    let session = progress
        .run(
            &format!("capture: connecting to {label}"),
            connect(target, timeout, profile),
        )
        .await
        .map_err(|e| match target {
            Target::Http { url, .. } => redacted(e, url),
            Target::Stdio { .. } => e,
        })?;
    let result = capture_lists(&session, target, &label, timeout, progress).await;
    let Session { service, child, .. } = session;
    let _ = service.cancel().await;
    if let Some(c) = child {
        // Its stdin is closed by now: it may exit by itself; then its
        // whole process group is stopped.
        c.stop(StopTimes::default()).await;
    }
    // Every error, whichever layer wrote it (reqwest names the full URL in
    // its own), is shown without the URL's query or credentials.
    match target {
        Target::Http { url, .. } => result.map_err(|e| redacted(e, url)),
        Target::Stdio { .. } => result,
    }
}

async fn capture_lists(
    session: &Session,
    target: &Target,
    label: &str,
    timeout: Duration,
    progress: &mut Progress<'_>,
) -> Result<Captured, CaptureError> {
    let peer = session.service.peer();
    let Some(info) = peer.peer_info() else {
        return Err(CaptureError::Protocol(format!(
            "{label} completed the handshake without saying what it offers"
        )));
    };
    let protocol_version = info.protocol_version.as_str().to_owned();
    let caps = &info.capabilities;
    let mut kinds = Vec::new();
    if caps.tools.is_some() {
        kinds.push(ListKind::Tools);
    }
    if caps.prompts.is_some() {
        kinds.push(ListKind::Prompts);
    }
    if caps.resources.is_some() {
        kinds.extend([ListKind::Resources, ListKind::ResourceTemplates]);
    }
    let server_info = match &info.server_info {
        Some(i) => ServerInfo {
            name: i.name.clone(),
            version: i.version.clone(),
            title: i.title.clone(),
            description: i.description.clone(),
            website_url: i.website_url.clone(),
        },
        None => ServerInfo::default(),
    };
    let offered: Vec<&str> = kinds.iter().map(|k| k.method()).collect();
    progress.line(&format!(
        "capture: {label}: {} {} speaks MCP {protocol_version}; lists: {}",
        if server_info.name.is_empty() {
            "(unnamed server)"
        } else {
            &server_info.name
        },
        server_info.version,
        if offered.is_empty() {
            "none".to_owned()
        } else {
            offered.join(", ")
        },
    ));
    let mut lists = Map::new();
    for k in [
        ListKind::Tools,
        ListKind::Prompts,
        ListKind::Resources,
        ListKind::ResourceTemplates,
    ] {
        lists.insert(k.key().to_owned(), Value::Array(Vec::new()));
    }
    let mut notes = Vec::new();
    for kind in kinds {
        match list_all(session, kind, label, timeout, progress).await {
            Ok(items) => {
                lists.insert(kind.key().to_owned(), Value::Array(items));
            }
            // Templates came after resources: a server may advertise
            // resources and not know the method.
            Err(ListError::Rpc { code, .. })
                if kind == ListKind::ResourceTemplates && code == ErrorCode::METHOD_NOT_FOUND.0 =>
            {
                notes.push(format!(
                    "{label} advertises resources but does not know resources/templates/list; no templates recorded"
                ));
            }
            Err(e) => return Err(CaptureError::Protocol(e.to_string())),
        }
    }
    let origin = match target {
        Target::Http { url, .. } => Origin {
            host: url.domain().map(str::to_owned),
            remote_url: Some(public_url(url)),
        },
        Target::Stdio { .. } => Origin::default(),
    };
    let reported_name = (!server_info.name.is_empty()).then(|| server_info.name.clone());
    let server_info = if server_info.name.is_empty() {
        // No serverInfo (a discovery answer may omit it): name the draft
        // after the host or the program.
        let fallback = match target {
            Target::Http { url, .. } => url.host_str().unwrap_or("server").to_owned(),
            Target::Stdio { program, .. } => Path::new(program)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "server".into()),
        };
        ServerInfo {
            name: fallback,
            ..server_info
        }
    } else {
        server_info
    };
    Ok(Captured {
        label: label.to_owned(),
        protocol_version,
        server_info,
        origin,
        lists: Value::Object(lists),
        notes,
        reported_name,
        profile: session.service.service().profile.clone(),
        negotiation: session.negotiation.clone(),
    })
}

#[derive(Debug, thiserror::Error)]
enum ListError {
    #[error("{label}: {method} failed: JSON-RPC error {code}: {message}")]
    Rpc {
        label: String,
        method: &'static str,
        code: i32,
        message: String,
    },
    #[error("{0}")]
    Other(String),
}

async fn list_all(
    session: &Session,
    kind: ListKind,
    label: &str,
    timeout: Duration,
    progress: &mut Progress<'_>,
) -> Result<Vec<Value>, ListError> {
    let method = kind.method();
    let peer = session.service.peer();
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    let mut seen: HashSet<String> = HashSet::new();
    for page in 1..=MAX_PAGES {
        let status = if page == 1 {
            format!("capture: {method}")
        } else {
            format!("capture: {method}, page {page} ({} so far)", items.len())
        };
        let mut options = PeerRequestOptions::no_options();
        options.timeout = Some(timeout);
        let fut = async {
            let handle = peer
                .send_request_with_option(kind.request(cursor.clone()), options)
                .await?;
            let id = handle.id.clone();
            handle.await_response().await.map(|_| id)
        };
        let id = match progress.run(&status, fut).await {
            Ok(id) => id,
            Err(ServiceError::McpError(e)) => {
                return Err(ListError::Rpc {
                    label: label.to_owned(),
                    method,
                    code: e.code.0,
                    message: e.message.to_string(),
                });
            }
            Err(ServiceError::Timeout { .. }) => {
                return Err(ListError::Other(format!(
                    "{label}: no answer to {method} within {} s",
                    timeout.as_secs()
                )));
            }
            Err(e) => {
                return Err(ListError::Other(format!(
                    "{label}: {method} failed: {}",
                    error_chain(&e)
                )));
            }
        };
        let raw = match session.tap.take(&id) {
            Some(Ok(v)) => v,
            Some(Err(reason)) => {
                return Err(ListError::Other(format!("{label}: {method}: {reason}")));
            }
            None => {
                return Err(ListError::Other(format!(
                    "{label}: the answer to {method} could not be read as it was sent"
                )));
            }
        };
        let Some(page_items) = raw.get(kind.key()).and_then(Value::as_array) else {
            return Err(ListError::Other(format!(
                "{label}: the answer to {method} has no {} array",
                kind.key()
            )));
        };
        items.extend(page_items.iter().cloned());
        match raw.get("nextCursor") {
            None | Some(Value::Null) => return Ok(items),
            Some(Value::String(c)) => {
                if !seen.insert(c.clone()) {
                    return Err(ListError::Other(format!(
                        "{label}: {method} returned the cursor {c:?} twice; stopping rather than looping"
                    )));
                }
                cursor = Some(c.clone());
            }
            Some(_) => {
                return Err(ListError::Other(format!(
                    "{label}: {method}: nextCursor is not a string"
                )));
            }
        }
    }
    Err(ListError::Other(format!(
        "{label}: {method} still had more pages after {MAX_PAGES}"
    )))
}
