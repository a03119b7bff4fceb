//! What one resolve call answers ([`Resolution`]): the tool served, where
//! it came from ([`Source`]), its findings, and what the caller must
//! record ([`ResolveEvent`]).

use axum::body::Bytes;
use pinfold_core::contain::{Notice, Violation};
use pinfold_resolve_check::prepared::ServedTool;
use serde::Serialize;

/// Where a served tool came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A cached upstream answer.
    Cache,
    /// An upstream answer fetched for this call (or one it waited on).
    Upstream,
    /// The worst case of a tool that does not resolve.
    Static,
    /// The worst case, because the upstream answer was unusable or refused.
    Fallback,
}

/// Something the caller must append to the tenant's audit log.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ResolveEvent {
    /// Strict mode refused a non-conforming upstream answer.
    StrictRefusal {
        /// The tool.
        tool: String,
        /// Fingerprint of the call's key (the arguments are not recorded).
        key: String,
        /// The answer's violations.
        violations: Vec<Violation>,
    },
    /// The upstream answered the same key differently within the session.
    DeterminismViolation {
        /// The tool.
        tool: String,
        /// Fingerprint of the call's key (the arguments are not recorded).
        key: String,
        /// Fingerprint of the answer remembered for the key.
        previous: String,
        /// Fingerprint of the new answer.
        current: String,
    },
}

/// The answer to one resolve call (the HTTP response body).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Resolution {
    /// Always a complete tool (the declared tool shared with the prepared
    /// signature, and the answer's own members shared with the cache:
    /// serving a hit copies no JSON).
    pub tool: ServedTool,
    /// Where it came from.
    pub source: Source,
    /// False when the upstream answer violated the signature.
    pub conformant: bool,
    /// The upstream answer's violations.
    pub violations: Vec<Violation>,
    /// The upstream answer's notices.
    pub notices: Vec<Notice>,
    /// Why the worst case was served (`source: fallback`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Events the caller must append to the audit log.
    #[serde(skip)]
    pub events: Vec<ResolveEvent>,
    /// This answer's JSON, when the engine has it ready (cache hits): the
    /// handler may send these bytes instead of serializing the answer.
    #[serde(skip)]
    pub body: Option<Bytes>,
}
