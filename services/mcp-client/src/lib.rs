//! How Pinfold opens an MCP client connection. One setup shared by
//! `pinfold capture`, `pinfold verify` and the resolve service's upstream
//! client (and by the guard next), so that all of them see a server as
//! the same client would.
//!
//! # Choosing the protocol
//!
//! A connection first probes with `server/discover` (MCP 2026-07-28, no
//! protocol session). Anything but a valid discover result falls back to
//! the `initialize` handshake of the legacy revision, 2025-11-25, on the
//! same transport (the same HTTP endpoint, the same child process):
//!
//! | the server's answer to `server/discover`, within the probe budget | the connection |
//! | --- | --- |
//! | a discover result whose `supportedVersions` holds 2026-07-28 | 2026-07-28, sessionless |
//! | a discover result without 2026-07-28 | `initialize`, 2025-11-25 |
//! | a JSON-RPC error, whatever its code (`-32601` method not found, `-32602`, unsupported version, missing capability, header mismatch) | `initialize`, 2025-11-25 |
//! | a success result that is not a discover result (`{}`, another shape) | `initialize`, 2025-11-25 |
//! | no answer within the budget (a late answer is dropped) | `initialize`, 2025-11-25 |
//! | the transport fails (connection refused, an HTTP error without a JSON-RPC body, a child that exits) | an error: no fallback |
//!
//! The 2026-07-28 revision asks clients to fall back to `initialize` when
//! a server does not know `server/discover`; the table widens that to
//! every answer a client cannot use, because servers answer unknown
//! methods in all these ways (the official conformance suite's test
//! servers answer every method they do not know with `{}`). The decision
//! is reported as a [`Negotiation`].
//!
//! # Modules
//!
//! - `probe`: the transport that judges the probe's answer.
//! - [`profile`]: client capability profiles (`none`, `default`, a file).
//! - [`stdio`]: a local server in a process group of its own, stopped as
//!   a group.

mod probe;
pub mod profile;
pub mod stdio;

use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::ProtocolVersion;
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt as _, RunningService, Service,
};
use rmcp::transport::IntoTransport;

pub use probe::{Fallback, Negotiation};
pub use profile::{ClientProfile, ProfileError, TOOL_RESOLUTION};

/// How long the probe waits for an answer to `server/discover` by default
/// before falling back to `initialize`.
pub const DEFAULT_PROBE_BUDGET: Duration = Duration::from_secs(5);

/// The revision a connection prefers (`server/discover`).
pub fn modern_version() -> ProtocolVersion {
    ProtocolVersion::V_2026_07_28
}

/// The revision of the `initialize` fallback.
pub fn legacy_version() -> ProtocolVersion {
    ProtocolVersion::V_2025_11_25
}

/// An open connection and how its protocol was chosen.
pub struct Opened<S: Service<RoleClient>> {
    /// The running client.
    pub service: RunningService<RoleClient, S>,
    /// What the probe decided.
    pub negotiation: Negotiation,
}

/// A connection that could not be opened.
#[derive(Debug)]
pub struct OpenError {
    /// rmcp's error.
    pub error: ClientInitializeError,
    /// What the probe had decided when it failed.
    pub negotiation: Negotiation,
}

impl OpenError {
    /// The error that ended the handshake: after a fallback, the
    /// `initialize` handshake's own (the probe's answer is in
    /// [`OpenError::negotiation`]).
    pub fn cause(&self) -> &ClientInitializeError {
        match &self.error {
            ClientInitializeError::LegacyFallbackFailed { fallback, .. } => fallback,
            e => e,
        }
    }
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.negotiation {
            Negotiation::Fallback(why) => write!(f, "{} (after {why})", self.cause()),
            _ => write!(f, "{}", self.cause()),
        }
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.cause())
    }
}

/// Opens a connection on `transport`: the `server/discover` probe (at most
/// `budget`), else `initialize` on 2025-11-25 (see the crate's decision
/// table). `service` is the client (its `get_info` gives the client's
/// name and capabilities).
pub async fn open<S, T, E, A>(
    service: S,
    transport: T,
    budget: Duration,
) -> Result<Opened<S>, OpenError>
where
    S: Service<RoleClient>,
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let verdict = probe::Verdict::new();
    let probe = probe::Probe::new(
        transport.into_transport(),
        budget,
        vec![modern_version()],
        verdict.clone(),
    );
    let lifecycle = ClientLifecycleMode::Auto {
        preferred_versions: vec![modern_version()],
        legacy_version: Some(legacy_version()),
    };
    match service.serve_with_lifecycle(probe, lifecycle).await {
        Ok(service) => Ok(Opened {
            service,
            negotiation: verdict.get(),
        }),
        Err(error) => Err(OpenError {
            error,
            negotiation: verdict.get(),
        }),
    }
}
