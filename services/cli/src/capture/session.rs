//! The MCP session of a capture: the client rmcp runs (advertising the
//! chosen capability profile), the handshake over Streamable HTTP or stdio
//! through the connection setup Pinfold shares with the resolve upstream
//! (`pinfold_mcp_client::open`: the `server/discover` probe, else
//! `initialize` on 2025-11-25), and the session it opens.

use std::collections::HashMap;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use pinfold_mcp_client::stdio::{self, StdioServer};
use pinfold_mcp_client::{ClientProfile, Negotiation};
use rmcp::ClientHandler;
use rmcp::RoleClient;
use rmcp::model::{ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use url::Url;

use super::error::{CaptureError, open_error, redacted};
use super::http::TapClient;
use super::tap::{MAX_ANSWER_BYTES, Tap, TapReader};
use super::target::{Target, public_url};

/// How long a server that failed the handshake gets between `SIGTERM` and
/// `SIGKILL`.
const KILL_GRACE: Duration = Duration::from_secs(2);

/// The client of a capture: it says what its profile says it can do.
#[derive(Clone)]
pub(super) struct CaptureClient {
    pub(super) profile: ClientProfile,
}

impl ClientHandler for CaptureClient {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::new(
            self.profile.capabilities(),
            Implementation::new("pinfold-capture", env!("CARGO_PKG_VERSION")),
        );
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info
    }
}

pub(super) struct Session {
    pub(super) service: RunningService<RoleClient, CaptureClient>,
    pub(super) tap: Tap,
    pub(super) child: Option<StdioServer>,
    /// How the protocol was chosen.
    pub(super) negotiation: Negotiation,
}

/// The budget of the `server/discover` probe within a handshake of
/// `timeout`: at most half of it.
fn probe_budget(timeout: Duration) -> Duration {
    pinfold_mcp_client::DEFAULT_PROBE_BUDGET.min(timeout / 2)
}

pub(super) async fn connect(
    target: &Target,
    timeout: Duration,
    profile: &ClientProfile,
) -> Result<Session, CaptureError> {
    let client = CaptureClient {
        profile: profile.clone(),
    };
    match target {
        Target::Http { url, headers } => {
            let label = target.label();
            tokio::time::timeout(timeout, connect_http(client, url, headers, timeout))
                .await
                .unwrap_or_else(|_| Err(handshake_timeout(&label, timeout)))
        }
        Target::Stdio { program, args } => connect_stdio(client, program, args, timeout).await,
    }
}

fn handshake_timeout(label: &str, timeout: Duration) -> CaptureError {
    CaptureError::Unreachable(format!(
        "{label} did not complete the MCP handshake within {} s",
        timeout.as_secs()
    ))
}

async fn connect_http(
    client: CaptureClient,
    url: &Url,
    headers: &[(HeaderName, HeaderValue)],
    timeout: Duration,
) -> Result<Session, CaptureError> {
    let label = public_url(url);
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(5))
        .user_agent(concat!("pinfold-capture/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| CaptureError::Unreachable(format!("cannot build an HTTP client: {e}")))?;
    let tap = Tap::default();
    let tapped = TapClient {
        http,
        tap: tap.clone(),
    };
    let header_map: HashMap<HeaderName, HeaderValue> = headers.iter().cloned().collect();
    let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
        .custom_headers(header_map)
        .max_json_response_size(MAX_ANSWER_BYTES)
        .reinit_on_expired_session(true);
    let transport = StreamableHttpClientTransport::with_client(tapped, config);
    let opened = pinfold_mcp_client::open(client, transport, probe_budget(timeout))
        .await
        .map_err(|e| redacted(open_error(&label, &e, ""), url))?;
    Ok(Session {
        service: opened.service,
        tap,
        child: None,
        negotiation: opened.negotiation,
    })
}

async fn connect_stdio(
    client: CaptureClient,
    program: &str,
    args: &[String],
    timeout: Duration,
) -> Result<Session, CaptureError> {
    let label = format!("`{program}` (stdio)");
    // The server is started outside the handshake's timer, so that it is
    // still ours to stop, with everything it started, when the timer
    // fires.
    let (child, pipes) = stdio::spawn(program, args)
        .map_err(|e| CaptureError::Unreachable(format!("cannot start `{program}`: {e}")))?;
    let tap = Tap::default();
    let reader = TapReader::new(pipes.stdout, tap.clone());
    let handshake = pinfold_mcp_client::open(client, (reader, pipes.stdin), probe_budget(timeout));
    let outcome = tokio::time::timeout(timeout, handshake).await;
    let failure = match outcome {
        Ok(Ok(opened)) => {
            return Ok(Session {
                service: opened.service,
                tap,
                child: Some(child),
                negotiation: opened.negotiation,
            });
        }
        Ok(Err(e)) => Some(e),
        // The handshake's time is over.
        Err(_) => None,
    };
    // Let the child's last words arrive before quoting them.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let tail = match child.stderr_tail() {
        t if t.is_empty() => String::new(),
        t => format!("\nits stderr ended with:\n{t}"),
    };
    child.terminate(KILL_GRACE).await;
    Err(match failure {
        Some(e) => open_error(&label, &e, &tail),
        None => match handshake_timeout(&label, timeout) {
            CaptureError::Unreachable(s) => CaptureError::Unreachable(format!("{s}{tail}")),
            other => other,
        },
    })
}
