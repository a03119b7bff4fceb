//! The audit event a service appends with a change.
//!
//! The audit log belongs to tenancy, but every service that changes
//! metadata appends to it in the same transaction as the change. The
//! service decides what the event says; the store crates only write it.

use serde_json::Value;

use crate::ids::Timestamp;

/// An audit event about to be appended.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAuditEvent {
    /// When.
    pub at: Timestamp,
    /// Who (token `sub`).
    pub actor: String,
    /// What (`tenant.created`, `version.approved`, ...).
    pub kind: String,
    /// Server concerned (its canonical key).
    pub server: Option<String>,
    /// Version concerned.
    pub version: Option<String>,
    /// Details.
    pub data: Value,
}

impl NewAuditEvent {
    /// A `kind` event by `actor` at `at`, about no particular server.
    pub fn new(kind: &str, actor: &str, at: Timestamp, data: Value) -> Self {
        NewAuditEvent {
            at,
            actor: actor.to_owned(),
            kind: kind.to_owned(),
            server: None,
            version: None,
            data,
        }
    }

    /// The same event, about `version` of the server keyed `server`.
    pub fn about(self, server: &str, version: &str) -> Self {
        NewAuditEvent {
            server: Some(server.to_owned()),
            version: Some(version.to_owned()),
            ..self
        }
    }
}
