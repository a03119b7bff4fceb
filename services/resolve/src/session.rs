//! Resolve sessions: what a row holds, and the policy a session pins.
//!
//! A session binds one principal of one tenant to one signature version of
//! one server and to one upstream MCP server, for a bounded time. The seeds
//! require a resolution to be deterministic *within a session* (SEP-1862,
//! "Determinism"; the dynamic-annotations seed, "Caching"), which is what
//! makes a per-session cache sound; so the session is also the unit of
//! caching, of eviction and of expiry.

use pinfold_core::Mode;
use pinfold_core::ids::Timestamp;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Whether resolutions are reused within a session.
///
/// `session` (the default) follows the seeds: within a session the same
/// `(tool, arguments)` resolves the same way, so a result is served from the
/// cache until the session ends. `none` follows the tool-resolution
/// extension, which forbids a client to reuse a result for a later call:
/// every resolve goes upstream (identical concurrent requests still share
/// one upstream call), and results are still checked and recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum CachePolicy {
    /// Reuse a result for the rest of the session.
    #[default]
    Session,
    /// Never reuse a result; coalesce only identical in-flight requests.
    None,
}

impl CachePolicy {
    /// The wire and column spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CachePolicy::Session => "session",
            CachePolicy::None => "none",
        }
    }

    /// Parses the wire spelling.
    pub fn parse(s: &str) -> Option<CachePolicy> {
        match s {
            "session" => Some(CachePolicy::Session),
            "none" => Some(CachePolicy::None),
            _ => None,
        }
    }
}

/// One stored session. `upstream_sealed` holds the upstream request headers
/// sealed with the server's key (AES-256-GCM, bound to the tenant and the
/// session id); it never leaves the process unsealed except towards the
/// upstream itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    /// Session id (32 lowercase hex digits).
    pub id: String,
    /// Token `sub` of the principal who opened it.
    pub principal: String,
    /// Token `iss` of that principal.
    pub issuer: String,
    /// Canonical server name.
    pub server: String,
    /// The pinned exact version.
    pub version: String,
    /// Digest of the pinned version's document.
    pub digest: String,
    /// Enforcement mode in force when the session was opened.
    pub mode: Mode,
    /// Cache policy in force when the session was opened.
    pub cache_policy: CachePolicy,
    /// Upstream MCP endpoint (Streamable HTTP).
    pub upstream_url: String,
    /// Sealed upstream headers (`None` when there are none).
    pub upstream_sealed: Option<String>,
    /// When it was opened.
    pub created_at: Timestamp,
    /// When it ends.
    pub expires_at: Timestamp,
}

impl SessionRow {
    /// Whether `sub` of `issuer` owns this session.
    pub fn owned_by(&self, issuer: &str, sub: &str) -> bool {
        self.issuer == issuer && self.principal == sub
    }
}

/// An audit event the resolve service asks its store to append (kinds:
/// `session.opened`, `session.closed`, `resolve.refused`,
/// `resolve.nondeterministic`; never a header value or a token in `data`).
pub use pinfold_core::audit::NewAuditEvent as AuditNote;

/// Whether `id` has the shape of a session id (so that anything else is a
/// plain 404 without a database round trip).
pub fn is_session_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A new random session id.
pub fn new_session_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}
