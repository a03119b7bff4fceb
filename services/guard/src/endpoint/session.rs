//! A client's 2025-11-25 protocol session, carried in its `Mcp-Session-Id`
//! as a sealed value: whatever replica receives the next request opens it
//! and knows the route, the caller and the upstream's own session, so no
//! replica keeps sessions and no request needs a sticky one.
//!
//! The value is sealed (AES-256-GCM) under the tenant's key for the context
//! `guard-session:<server>`: it opens only for the tenant and server it was
//! issued for, and a client cannot read the upstream's session id inside it
//! or forge one.

use pinfold_core::ids::TenantId;
use serde::{Deserialize, Serialize};

use crate::state::Sealer;

/// How long a session id is honoured after it was issued.
pub const SESSION_MAX_AGE_MS: i64 = 24 * 3600 * 1000;

/// What a session id carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientSession {
    /// The caller's subject: the session is theirs only.
    #[serde(rename = "s")]
    pub sub: String,
    /// The upstream's `Mcp-Session-Id`, when it issued one.
    #[serde(rename = "u", default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// The digest of the signature the session was opened under: when the
    /// route comes to pin another, the session ends (the client opens a new
    /// one and sees the new view).
    #[serde(rename = "d")]
    pub digest: String,
    /// The client advertised the tool-resolution extension.
    #[serde(rename = "x", default)]
    pub extension: bool,
    /// When it was issued (milliseconds since the epoch).
    #[serde(rename = "t")]
    pub issued_ms: i64,
}

fn context(server: &str) -> String {
    format!("guard-session:{}", server.to_ascii_lowercase())
}

impl ClientSession {
    /// The session id a client is given.
    pub fn seal(&self, sealer: &dyn Sealer, tenant: &TenantId, server: &str) -> Option<String> {
        let plain = serde_json::to_vec(self).ok()?;
        sealer.seal(tenant, &context(server), &plain).ok()
    }

    /// Opens a session id given by a client; `None` when it was not issued
    /// for this tenant and server, was tampered with, or is too old at
    /// `now_ms`.
    pub fn open(
        sealer: &dyn Sealer,
        tenant: &TenantId,
        server: &str,
        id: &str,
        now_ms: i64,
    ) -> Option<ClientSession> {
        if id.is_empty() || id.len() > 4096 {
            return None;
        }
        let plain = sealer.open(tenant, &context(server), id).ok()?;
        let s: ClientSession = serde_json::from_slice(&plain).ok()?;
        (now_ms.saturating_sub(s.issued_ms) <= SESSION_MAX_AGE_MS && s.issued_ms <= now_ms + 60_000)
            .then_some(s)
    }
}
