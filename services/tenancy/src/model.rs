//! Tenant, policy and audit types.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use signet_core::ids::{TenantId, Timestamp};
use utoipa::ToSchema;

/// How a tenant treats a runtime observation outside a signature
/// (SEP-2091 "Behavioral Requirements": clients choose how strictly to
/// enforce).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum EnforcementMode {
    /// A violation is an error: the observation is refused.
    Strict,
    /// Served, flagged and logged.
    Permissive,
    /// Informational only.
    Advisory,
}

impl EnforcementMode {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Strict => "strict",
            Self::Permissive => "permissive",
            Self::Advisory => "advisory",
        }
    }

    /// Parses the wire spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "strict" => Some(Self::Strict),
            "permissive" => Some(Self::Permissive),
            "advisory" => Some(Self::Advisory),
            _ => None,
        }
    }
}

/// Whether the resolve cache reuses a result within a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ResolveCache {
    /// Reuse a result for the rest of the session (the seeds' determinism
    /// within a session; the default).
    Session,
    /// Every resolve goes upstream (the tool-resolution extension forbids
    /// reusing a result); identical concurrent requests still share a call.
    None,
}

/// Per-server policy overrides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerOverride {
    /// Enforcement mode for this server, overriding the tenant's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforcement_mode: Option<EnforcementMode>,
    /// Resolve-cache policy for this server's sessions (default `session`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolve_cache: Option<ResolveCache>,
    /// Per-tool hint overrides: tool name → annotation object. Deployers may
    /// override hints (policy-hints seed, "Deployer overrides").
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(value_type = Object)]
    pub tools: BTreeMap<String, Map<String, Value>>,
}

/// Overrides below the tenant-wide defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyOverrides {
    /// Server name → override.
    #[serde(default)]
    pub servers: BTreeMap<String, ServerOverride>,
}

/// A tenant's policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Tenant-wide enforcement mode.
    pub enforcement_mode: EnforcementMode,
    /// Whether published versions wait for a reviewer's approval.
    pub approval_required: bool,
    /// Per-server overrides.
    #[serde(default)]
    pub overrides: PolicyOverrides,
}

impl Default for Policy {
    /// New tenants: `permissive`, approval required.
    fn default() -> Self {
        Self {
            enforcement_mode: EnforcementMode::Permissive,
            approval_required: true,
            overrides: PolicyOverrides::default(),
        }
    }
}

/// A stored policy with its revision (the `ETag` of the policy resource).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct PolicyRecord {
    /// The policy.
    #[serde(flatten)]
    pub policy: Policy,
    /// Increases by one with every change; send it back in `If-Match`.
    pub revision: i64,
    /// When it last changed.
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: Timestamp,
    /// Who last changed it (token `sub`).
    pub updated_by: String,
}

/// A stored tenant.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct TenantRecord {
    /// Tenant id.
    #[schema(value_type = String, example = "acme")]
    pub id: TenantId,
    /// Display name.
    pub name: String,
    /// Creation time.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
    /// Who created it (token `sub`).
    pub created_by: String,
}

/// One append-only audit event.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct AuditEvent {
    /// Monotonic id within the installation.
    pub id: i64,
    /// When it happened.
    #[schema(value_type = String, format = DateTime)]
    pub at: Timestamp,
    /// Who did it (token `sub`).
    pub actor: String,
    /// What happened (`tenant.created`, `policy.updated`, ...).
    pub kind: String,
    /// The server concerned, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The version concerned, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Event details.
    #[schema(value_type = Object)]
    pub data: Value,
}

/// An audit event about to be appended.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAuditEvent {
    /// When.
    pub at: Timestamp,
    /// Who.
    pub actor: String,
    /// What.
    pub kind: String,
    /// Server concerned.
    pub server: Option<String>,
    /// Version concerned.
    pub version: Option<String>,
    /// Details.
    pub data: Value,
}

/// Filters for listing audit events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only events about this server.
    pub server: Option<String>,
    /// Only events of this kind.
    pub kind: Option<String>,
}
