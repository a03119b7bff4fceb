//! Registry types: versions, their status, reviews, servers.

use pinfold_core::audit::NewAuditEvent;
use pinfold_core::ids::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::json;
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

    /// The review decision it records (approve, reject), if it is one.
    pub fn decision(self) -> Option<Decision> {
        match self {
            Action::Approve => Some(Decision::Approve),
            Action::Reject => Some(Decision::Reject),
            Action::Deprecate | Action::Revoke => None,
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

/// A review decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Trust this version.
    Approve,
    /// Refuse it.
    Reject,
}

impl Decision {
    /// Wire and database spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Reject => "reject",
        }
    }

    /// Parses the spelling.
    pub fn parse(s: &str) -> Option<Decision> {
        match s {
            "approve" => Some(Decision::Approve),
            "reject" => Some(Decision::Reject),
            _ => None,
        }
    }

    /// The action that applies it.
    pub fn action(self) -> Action {
        match self {
            Decision::Approve => Action::Approve,
            Decision::Reject => Action::Reject,
        }
    }
}

/// One review decision.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Review {
    /// `approve` or `reject`.
    pub decision: Decision,
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

impl StatusRow {
    /// The status of a version just published at `at`: `pending` when the
    /// tenant's policy requires review, else approved on publish (with no
    /// approver: nobody reviewed it).
    pub fn initial(approval_required: bool, at: Timestamp) -> StatusRow {
        let (status, reason, approved_at) = if approval_required {
            (Status::Pending, None, None)
        } else {
            (
                Status::Approved,
                Some("approved on publish: the tenant policy requires no review".to_owned()),
                Some(at),
            )
        };
        StatusRow {
            status,
            revision: 1,
            changed_at: at,
            reason,
            approved_by: None,
            approved_at,
        }
    }
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

/// A version without its document, with its server's key and display
/// name: what listings across servers read.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedVersion {
    /// Server key.
    pub key: String,
    /// Display spelling of the server name.
    pub server: String,
    /// The version.
    pub meta: VersionMeta,
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

/// A version about to be stored: the rows to write and the audit event to
/// append with them, all decided by the registry; a store writes them as
/// they are.
#[derive(Debug, Clone)]
pub struct NewVersion<'a> {
    /// Canonical (lowercase) server name: the key.
    pub server_key: &'a str,
    /// Display spelling (kept if the server row exists).
    pub server_display: &'a str,
    /// Canonical JSON.
    pub document: &'a str,
    /// Card title.
    pub title: Option<&'a str>,
    /// Card description.
    pub description: Option<&'a str>,
    /// The version and its first status row (revision 1).
    pub meta: VersionMeta,
    /// `version.published` or `version.imported`.
    pub audit: NewAuditEvent,
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

/// A status change about to be stored: the new status row values, the
/// review to record and the audit event, all decided by the registry.
#[derive(Debug, Clone)]
pub struct StatusChange<'a> {
    /// Server key.
    pub server_key: &'a str,
    /// Version.
    pub version: &'a str,
    /// The revision read before deciding (compare-and-set).
    pub expected_revision: i64,
    /// The new status.
    pub status: Status,
    /// When.
    pub at: Timestamp,
    /// Note or reason (replaces the stored one).
    pub reason: Option<&'a str>,
    /// Set on approval: the approver, recorded with `at`; otherwise the
    /// stored approver (if any) stays.
    pub approved_by: Option<&'a str>,
    /// The review decision to append (approve and reject only).
    pub review: Option<Review>,
    /// Appended in the same transaction.
    pub audit: NewAuditEvent,
}

impl<'a> StatusChange<'a> {
    /// `action` taken by `actor` at `at` on `current` (the version as read),
    /// or `None` when the transition is not allowed (see [`Action::apply`]).
    pub fn new(
        server_key: &'a str,
        current: &'a VersionMeta,
        action: Action,
        note: Option<&'a str>,
        actor: &'a str,
        at: Timestamp,
    ) -> Option<Self> {
        let from = current.status.status;
        let to = action.apply(from)?;
        Some(StatusChange {
            server_key,
            version: &current.version,
            expected_revision: current.status.revision,
            status: to,
            at,
            reason: note,
            approved_by: (to == Status::Approved).then_some(actor),
            review: action.decision().map(|decision| Review {
                decision,
                note: note.map(str::to_owned),
                reviewer: actor.to_owned(),
                at,
            }),
            audit: NewAuditEvent::new(
                action.event_kind(),
                actor,
                at,
                json!({ "from": from.as_str(), "to": to.as_str(), "note": note }),
            )
            .about(server_key, &current.version),
        })
    }
}

/// A tenant's attestation key as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredKey {
    /// Key id (`kid`).
    pub kid: String,
    /// Raw Ed25519 public key, base64url.
    pub public_key: String,
    /// The PKCS#8 private key, sealed (`keys::Keyring::seal`).
    pub private_sealed: String,
    /// Creation time.
    pub created_at: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(status: Status) -> VersionMeta {
        VersionMeta {
            version: "1.0.0".into(),
            digest: "sha256:00".into(),
            published_by: "pub".into(),
            published_at: Timestamp::from_millis(1),
            status: StatusRow {
                status,
                revision: 3,
                ..StatusRow::initial(true, Timestamp::from_millis(1))
            },
        }
    }

    #[test]
    fn a_version_waits_for_review_only_when_the_policy_says_so() {
        let at = Timestamp::from_millis(7);
        let pending = StatusRow::initial(true, at);
        assert_eq!(pending.status, Status::Pending);
        assert_eq!((pending.revision, pending.changed_at), (1, at));
        assert_eq!((pending.reason, pending.approved_at), (None, None));
        let approved = StatusRow::initial(false, at);
        assert_eq!(approved.status, Status::Approved);
        assert_eq!(approved.approved_at, Some(at));
        assert_eq!(approved.approved_by, None, "nobody reviewed it");
        assert!(approved.reason.unwrap().contains("requires no review"));
    }

    #[test]
    fn an_approval_records_the_approver_the_review_and_the_event() {
        let m = meta(Status::Pending);
        let at = Timestamp::from_millis(9);
        let c = StatusChange::new(
            "io.acme/files",
            &m,
            Action::Approve,
            Some("fine"),
            "rev",
            at,
        )
        .unwrap();
        assert_eq!((c.version, c.expected_revision), ("1.0.0", 3));
        assert_eq!(
            (c.status, c.reason, c.approved_by),
            (Status::Approved, Some("fine"), Some("rev"))
        );
        let review = c.review.unwrap();
        assert_eq!(
            (review.decision, review.reviewer.as_str()),
            (Decision::Approve, "rev")
        );
        assert_eq!((review.note.as_deref(), review.at), (Some("fine"), at));
        assert_eq!(c.audit.kind, "version.approved");
        assert_eq!(c.audit.server.as_deref(), Some("io.acme/files"));
        assert_eq!(c.audit.version.as_deref(), Some("1.0.0"));
        assert_eq!((c.audit.actor.as_str(), c.audit.at), ("rev", at));
        assert_eq!(
            c.audit.data,
            json!({"from": "pending", "to": "approved", "note": "fine"})
        );
    }

    #[test]
    fn lifecycle_changes_record_no_review_and_keep_the_approver() {
        let m = meta(Status::Approved);
        let c = StatusChange::new(
            "s",
            &m,
            Action::Revoke,
            None,
            "admin",
            Timestamp::from_millis(2),
        )
        .unwrap();
        assert!(c.review.is_none());
        assert_eq!(c.approved_by, None);
        assert_eq!(c.audit.kind, "version.revoked");
        assert_eq!(
            c.audit.data,
            json!({"from": "approved", "to": "revoked", "note": null})
        );
        let pending = meta(Status::Pending);
        let r = StatusChange::new(
            "s",
            &pending,
            Action::Reject,
            Some("no"),
            "rev",
            Timestamp::from_millis(2),
        )
        .unwrap();
        assert_eq!(r.review.unwrap().decision, Decision::Reject);
        assert_eq!(r.approved_by, None);
    }

    #[test]
    fn decisions_keep_their_wire_and_database_spelling() {
        for (d, s) in [(Decision::Approve, "approve"), (Decision::Reject, "reject")] {
            assert_eq!(d.as_str(), s);
            assert_eq!(Decision::parse(s), Some(d));
            assert_eq!(serde_json::to_value(d).unwrap(), json!(s));
            assert_eq!(serde_json::from_value::<Decision>(json!(s)).unwrap(), d);
        }
        assert_eq!(Decision::parse("maybe"), None);
    }

    #[test]
    fn a_transition_the_table_refuses_builds_no_change() {
        let revoked = meta(Status::Revoked);
        let at = Timestamp::from_millis(2);
        for action in [
            Action::Approve,
            Action::Reject,
            Action::Deprecate,
            Action::Revoke,
        ] {
            assert!(StatusChange::new("s", &revoked, action, None, "a", at).is_none());
        }
    }
}
