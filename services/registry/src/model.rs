//! Registry types: versions, their status, reviews, servers.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use signet_core::ids::Timestamp;
use utoipa::ToSchema;

/// A version's trust status.
///
/// Transitions (anything else is `409 invalid_transition`):
///
/// | from \ action | approve  | reject   | deprecate  | revoke  |
/// |---------------|----------|----------|------------|---------|
/// | pending       | approved | rejected | —          | revoked |
/// | rejected      | approved | —        | —          | revoked |
/// | approved      | —        | —        | deprecated | revoked |
/// | deprecated    | —        | —        | —          | revoked |
/// | revoked       | —        | —        | —          | —       |
///
/// Only `approved` versions are trusted: `latest` and resolve sessions use
/// them (SEP-2091: clients establish trust before use).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Published, waiting for a reviewer.
    Pending,
    /// Trusted.
    Approved,
    /// Refused by a reviewer.
    Rejected,
    /// Still trusted by pinned users, not offered as `latest`.
    Deprecated,
    /// Withdrawn; never trusted again.
    Revoked,
}

impl Status {
    /// Wire and database spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Approved => "approved",
            Status::Rejected => "rejected",
            Status::Deprecated => "deprecated",
            Status::Revoked => "revoked",
        }
    }

    /// Parses the spelling.
    pub fn parse(s: &str) -> Option<Status> {
        match s {
            "pending" => Some(Status::Pending),
            "approved" => Some(Status::Approved),
            "rejected" => Some(Status::Rejected),
            "deprecated" => Some(Status::Deprecated),
            "revoked" => Some(Status::Revoked),
            _ => None,
        }
    }
}

/// Something that changes a version's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// A reviewer approves.
    Approve,
    /// A reviewer rejects.
    Reject,
    /// An admin deprecates.
    Deprecate,
    /// An admin revokes.
    Revoke,
}

impl Action {
    /// The status after `self` is applied to `from`, or `None` when the
    /// transition is not allowed (see [`Status`]).
    pub fn apply(self, from: Status) -> Option<Status> {
        use Status::*;
        match (self, from) {
            (Action::Approve, Pending | Rejected) => Some(Approved),
            (Action::Reject, Pending) => Some(Rejected),
            (Action::Deprecate, Approved) => Some(Deprecated),
            (Action::Revoke, Pending | Rejected | Approved | Deprecated) => Some(Revoked),
            _ => None,
        }
    }

    /// The audit event kind.
    pub fn event_kind(self) -> &'static str {
        match self {
            Action::Approve => "version.approved",
            Action::Reject => "version.rejected",
            Action::Deprecate => "version.deprecated",
            Action::Revoke => "version.revoked",
        }
    }
}

/// One review decision.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Review {
    /// `approve` or `reject`.
    pub decision: String,
    /// The reviewer's note.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The reviewer (token `sub`).
    pub reviewer: String,
    /// When.
    #[schema(value_type = String, format = DateTime)]
    pub at: Timestamp,
}

/// The mutable metadata of a version.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusRow {
    /// Current status.
    pub status: Status,
    /// Increases with every change (part of the record's `ETag`).
    pub revision: i64,
    /// When the status last changed.
    pub changed_at: Timestamp,
    /// Why (for deprecate/revoke, or the review note).
    pub reason: Option<String>,
    /// Who approved it, if it was approved.
    pub approved_by: Option<String>,
    /// When it was approved.
    pub approved_at: Option<Timestamp>,
}

/// A stored version without its document.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionMeta {
    /// The version string (exact semver).
    pub version: String,
    /// `sha256:<hex>`.
    pub digest: String,
    /// Who published it.
    pub published_by: String,
    /// When.
    pub published_at: Timestamp,
    /// Its status.
    pub status: StatusRow,
}

/// A stored version with its canonical document.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredVersion {
    /// Display spelling of the server name.
    pub server: String,
    /// Metadata.
    pub meta: VersionMeta,
    /// RFC 8785 canonical JSON (the bytes the digest covers).
    pub document: String,
}

/// A server row.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ServerRow {
    /// Server name as first published.
    pub name: String,
    /// Title of the most recently published version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Description of the most recently published version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// First publication.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
    /// Last publication.
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: Timestamp,
    /// Number of versions.
    pub version_count: i64,
}

/// A version about to be stored.
#[derive(Debug, Clone)]
pub struct NewVersion<'a> {
    /// Canonical (lowercase) server name: the key.
    pub server_key: &'a str,
    /// Display spelling.
    pub server_display: &'a str,
    /// Exact version.
    pub version: &'a str,
    /// `sha256:<hex>` of `document`.
    pub digest: &'a str,
    /// Canonical JSON.
    pub document: &'a str,
    /// Card title.
    pub title: Option<&'a str>,
    /// Card description.
    pub description: Option<&'a str>,
    /// Publisher (`sub`).
    pub published_by: &'a str,
    /// When.
    pub at: Timestamp,
    /// `approved` when the tenant needs no review, else `pending`.
    pub initial: Status,
    /// Audit event kind (`version.published` or `version.imported`).
    pub event: &'a str,
    /// Extra audit data.
    pub event_data: Value,
}

/// What a publish did.
#[derive(Debug, Clone, PartialEq)]
pub enum PublishOutcome {
    /// A new version was stored.
    Created(StoredVersion),
    /// The same content was already stored (idempotent republish).
    Existing(StoredVersion),
    /// Different content is stored under this version.
    Conflict {
        /// Digest of what is stored.
        existing_digest: String,
    },
}

/// A status change about to be stored.
#[derive(Debug, Clone)]
pub struct StatusChange<'a> {
    /// Server key.
    pub server_key: &'a str,
    /// Version.
    pub version: &'a str,
    /// The revision read before deciding (compare-and-set).
    pub expected_revision: i64,
    /// The action.
    pub action: Action,
    /// The status read before deciding.
    pub from: Status,
    /// The new status.
    pub to: Status,
    /// Note or reason.
    pub note: Option<&'a str>,
    /// Who.
    pub actor: &'a str,
    /// When.
    pub at: Timestamp,
}

/// A tenant's attestation key as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredKey {
    /// Key id (`kid`).
    pub kid: String,
    /// Raw Ed25519 public key, base64url.
    pub public_key: String,
    /// The PKCS#8 private key sealed with the server key.
    pub private_sealed: String,
    /// Creation time.
    pub created_at: Timestamp,
}
