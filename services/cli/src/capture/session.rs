//! The MCP session of a capture: the client rmcp runs (it advertises the
//! tool-resolution extension), the handshake over Streamable HTTP or stdio
//! (MCP 2026-07-28 `server/discover` when offered, else 2025-11-25
//! `initialize`), and the session it opens.

use std::collections::HashMap;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt as _, RunningService,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient};
use serde_json::Map;
use url::Url;

use super::child::{Child, spawn};
use super::error::{CaptureError, init_error, redacted, stdio_error};
use super::http::TapClient;
use super::tap::{MAX_ANSWER_BYTES, Tap, TapReader};
use super::target::{Target, public_url};

/// The tool-resolution extension a capture advertises, as Pinfold's resolve
/// client does: a server may list resolvable tools only to clients that
/// speak it.
const TOOL_RESOLUTION: &str = "io.modelcontextprotocol/tool-resolution";

#[derive(Clone)]
pub(super) struct CaptureClient;

impl ClientHandler for CaptureClient {
    fn get_info(&self) -> ClientConfig {
        let mut caps = ClientCapabilities::default();
        let mut ext = std::collections::BTreeMap::new();
        ext.insert(TOOL_RESOLUTION.to_owned(), Map::new());
        caps.extensions = Some(ext);
        let mut info = ClientConfig::new(
            caps,
            Implementation::new("pinfold-capture", env!("CARGO_PKG_VERSION")),
        );
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info
    }
}

pub(super) struct Session {
    pub(super) service: RunningService<RoleClient, CaptureClient>,
    pub(super) tap: Tap,
    pub(super) child: Option<Child>,
}

fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

pub(super) async fn connect(target: &Target, timeout: Duration) -> Result<Session, CaptureError> {
    let label = target.label();
    let fut = async {
        match target {
            Target::Http { url, headers } => connect_http(url, headers).await,
            Target::Stdio { program, args } => connect_stdio(program, args).await,
        }
    };
    tokio::time::timeout(timeout, fut)
        .await
        .unwrap_or_else(|_| {
            Err(CaptureError::Unreachable(format!(
                "{label} did not complete the MCP handshake within {} s",
                timeout.as_secs()
            )))
        })
}

async fn connect_http(
    url: &Url,
    headers: &[(HeaderName, HeaderValue)],
) -> Result<Session, CaptureError> {
    let label = public_url(url);
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(5))
        .user_agent(concat!("pinfold-capture/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| CaptureError::Unreachable(format!("cannot build an HTTP client: {e}")))?;
    let tap = Tap::default();
    let client = TapClient {
        http,
        tap: tap.clone(),
    };
    let header_map: HashMap<HeaderName, HeaderValue> = headers.iter().cloned().collect();
    let transport = || {
        let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
            .custom_headers(header_map.clone())
            .max_json_response_size(MAX_ANSWER_BYTES)
            .reinit_on_expired_session(true);
        StreamableHttpClientTransport::with_client(client.clone(), config)
    };
    let service = match CaptureClient
        .serve_with_lifecycle(transport(), lifecycle())
        .await
    {
        Ok(s) => s,
        // The server knows `server/discover` but offers only versions with
        // the `initialize` handshake: ask again that way.
        Err(ClientInitializeError::NoCompatibleProtocolVersion { .. }) => CaptureClient
            .serve_with_lifecycle(transport(), ClientLifecycleMode::Initialize)
            .await
            .map_err(|e| redacted(init_error(&label, &e), url))?,
        Err(e) => return Err(redacted(init_error(&label, &e), url)),
    };
    Ok(Session {
        service,
        tap,
        child: None,
    })
}

async fn connect_stdio(program: &str, args: &[String]) -> Result<Session, CaptureError> {
    let label = format!("`{program}` (stdio)");
    let attempt = |mode: ClientLifecycleMode| async move {
        let (child, stdout, stdin) = spawn(program, args)?;
        let tap = Tap::default();
        let reader = TapReader::new(stdout, tap.clone());
        match CaptureClient
            .serve_with_lifecycle((reader, stdin), mode)
            .await
        {
            Ok(service) => Ok(Ok(Session {
                service,
                tap,
                child: Some(child),
            })),
            Err(e) => {
                // Let the child's last words arrive before quoting them.
                tokio::time::sleep(Duration::from_millis(100)).await;
                let tail = child.stderr_tail();
                Ok(Err((e, tail)))
            }
        }
    };
    match attempt(lifecycle()).await? {
        Ok(s) => Ok(s),
        Err((ClientInitializeError::NoCompatibleProtocolVersion { .. }, _)) => {
            match attempt(ClientLifecycleMode::Initialize).await? {
                Ok(s) => Ok(s),
                Err((e, tail)) => Err(stdio_error(&label, &e, &tail)),
            }
        }
        Err((e, tail)) => Err(stdio_error(&label, &e, &tail)),
    }
}
