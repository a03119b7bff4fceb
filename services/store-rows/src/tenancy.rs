//! Rows of `tenants`, `tenant_policies` and `audit_events`.

use pinfold_core::ids::{TenantId, Timestamp};
use pinfold_tenancy::StoreError;
use pinfold_tenancy::model::{AuditEvent, Mode, Policy, PolicyRecord, TenantRecord};

fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Other(format!("stored {what}: {e}"))
}

/// `id, name, created_at, created_by` of `tenants`.
#[derive(Debug, sqlx::FromRow)]
pub struct TenantRow {
    /// Tenant id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Milliseconds since the epoch.
    pub created_at: i64,
    /// Token `sub`.
    pub created_by: String,
}

impl TryFrom<TenantRow> for TenantRecord {
    type Error = StoreError;
    fn try_from(r: TenantRow) -> Result<Self, StoreError> {
        Ok(TenantRecord {
            id: TenantId::parse(&r.id).map_err(|e| corrupt("tenant id", e))?,
            name: r.name,
            created_at: Timestamp::from_millis(r.created_at),
            created_by: r.created_by,
        })
    }
}

/// `enforcement_mode, approval_required, overrides, egress_allow,
/// revision, updated_at, updated_by` of `tenant_policies` (`overrides` and
/// `egress_allow` as JSON text).
#[derive(Debug, sqlx::FromRow)]
pub struct PolicyRow {
    /// Wire spelling of the mode.
    pub enforcement_mode: String,
    /// Whether versions wait for review.
    pub approval_required: bool,
    /// `PolicyOverrides` as JSON text.
    pub overrides: String,
    /// The egress allow-list as a JSON array of strings.
    pub egress_allow: String,
    /// Revision.
    pub revision: i64,
    /// Milliseconds since the epoch.
    pub updated_at: i64,
    /// Token `sub`.
    pub updated_by: String,
}

impl TryFrom<PolicyRow> for PolicyRecord {
    type Error = StoreError;
    fn try_from(r: PolicyRow) -> Result<Self, StoreError> {
        Ok(PolicyRecord {
            policy: Policy {
                enforcement_mode: r
                    .enforcement_mode
                    .parse::<Mode>()
                    .map_err(|e| corrupt("mode", e))?,
                approval_required: r.approval_required,
                overrides: serde_json::from_str(&r.overrides)
                    .map_err(|e| corrupt("overrides", e))?,
                egress_allow: serde_json::from_str(&r.egress_allow)
                    .map_err(|e| corrupt("egress_allow", e))?,
            },
            revision: r.revision,
            updated_at: Timestamp::from_millis(r.updated_at),
            updated_by: r.updated_by,
        })
    }
}

/// `id, at, actor, kind, server, version, data` of `audit_events` (`data`
/// as JSON text).
#[derive(Debug, sqlx::FromRow)]
pub struct AuditRow {
    /// Event id.
    pub id: i64,
    /// Milliseconds since the epoch.
    pub at: i64,
    /// Token `sub`.
    pub actor: String,
    /// Event kind.
    pub kind: String,
    /// Server key.
    pub server: Option<String>,
    /// Version.
    pub version: Option<String>,
    /// Details as JSON text.
    pub data: String,
}

impl TryFrom<AuditRow> for AuditEvent {
    type Error = StoreError;
    fn try_from(r: AuditRow) -> Result<Self, StoreError> {
        Ok(AuditEvent {
            id: r.id,
            at: Timestamp::from_millis(r.at),
            actor: r.actor,
            kind: r.kind,
            server: r.server,
            version: r.version,
            data: serde_json::from_str(&r.data).map_err(|e| corrupt("audit data", e))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy_row(mode: &str, overrides: &str) -> PolicyRow {
        PolicyRow {
            enforcement_mode: mode.into(),
            approval_required: false,
            overrides: overrides.into(),
            egress_allow: r#"["10.0.0.0/8"]"#.into(),
            revision: 4,
            updated_at: 5,
            updated_by: "op".into(),
        }
    }

    #[test]
    fn a_policy_row_becomes_a_policy_record() {
        let rec = PolicyRecord::try_from(policy_row(
            "strict",
            r#"{"servers":{"a/b":{"enforcement_mode":"advisory"}}}"#,
        ))
        .unwrap();
        assert_eq!(rec.policy.enforcement_mode, Mode::Strict);
        assert_eq!(rec.policy.mode_for("a/b"), Mode::Advisory);
        assert!(!rec.policy.approval_required);
        assert_eq!(rec.policy.egress_allow, ["10.0.0.0/8"]);
        assert_eq!((rec.revision, rec.updated_at.millis()), (4, 5));
    }

    #[test]
    fn corrupt_rows_are_errors_not_panics() {
        assert!(PolicyRecord::try_from(policy_row("lenient", "{}")).is_err());
        assert!(PolicyRecord::try_from(policy_row("strict", "not json")).is_err());
        let tenant = TenantRow {
            id: "Not A Tenant".into(),
            name: "n".into(),
            created_at: 0,
            created_by: "c".into(),
        };
        assert!(pinfold_tenancy::TenantRecord::try_from(tenant).is_err());
    }
}
