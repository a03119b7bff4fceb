//! Tenant, policy and audit types.

use std::borrow::Cow;
use std::collections::BTreeMap;

use pinfold_core::ids::{TenantId, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::{PartialSchema, ToSchema};

/// How a tenant treats a runtime observation outside a signature: the
/// core [`Mode`], spelled `strict`, `permissive` or `advisory` on the wire.
pub use pinfold_core::Mode;

/// The OpenAPI schema of [`Mode`], named `EnforcementMode` in the document.
pub use pinfold_http::report::EnforcementModeSchema;

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
    #[schema(value_type = Option<EnforcementModeSchema>)]
    pub enforcement_mode: Option<Mode>,
    /// Resolve-cache policy for this server's sessions (default `session`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolve_cache: Option<ResolveCache>,
    /// Per-tool hint overrides: tool name → annotation object. Deployers may
    /// override hints (policy-hints seed, "Deployer overrides").
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(schema_with = tool_overrides_schema)]
    pub tools: BTreeMap<String, Map<String, Value>>,
}

/// The official registry's server-name rule (reverse-DNS namespace, one
/// `/`), as a pattern; names are also 3 to 200 characters.
pub const SERVER_NAME_PATTERN: &str = "^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$";

/// Tool names in overrides: 1 to 128 characters of `[A-Za-z0-9_.-]`.
pub const TOOL_NAME_PATTERN: &str = "^[A-Za-z0-9_.-]{1,128}$";

fn server_overrides_schema() -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some("Server name → override."))
        .property_names(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some(SERVER_NAME_PATTERN))
                .min_length(Some(3))
                .max_length(Some(200)),
        ))
        .additional_properties(Some(utoipa::openapi::Ref::from_schema_name(
            "ServerOverride",
        )))
        .into()
}

fn tool_overrides_schema() -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "Per-tool hint overrides: tool name → annotation object. Deployers may \
             override hints (policy-hints seed, \"Deployer overrides\").",
        ))
        .property_names(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some(TOOL_NAME_PATTERN)),
        ))
        .additional_properties(Some(ObjectBuilder::new().schema_type(Type::Object)))
        .into()
}

/// Overrides below the tenant-wide defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyOverrides {
    /// Server name → override.
    #[serde(default)]
    #[schema(schema_with = server_overrides_schema)]
    pub servers: BTreeMap<String, ServerOverride>,
}

/// `egress_allow`: host names, `*.suffix` patterns, IP addresses and CIDR
/// blocks (what `pinfold_egress::AllowList::parse` accepts; the pattern
/// states the characters, the server checks the form of each entry).
fn egress_allow_schema() -> Schema {
    use utoipa::openapi::schema::{AnyOfBuilder, ArrayBuilder, KnownFormat, SchemaFormat};
    let text = || ObjectBuilder::new().schema_type(Type::String);
    let entry = AnyOfBuilder::new()
        .item(
            text()
                .max_length(Some(253))
                .pattern(Some(EGRESS_HOST_PATTERN))
                .description(Some("A host name, or `*.` and a name: any name below it")),
        )
        .item(text().format(Some(SchemaFormat::KnownFormat(KnownFormat::Ipv4))))
        .item(
            text()
                .pattern(Some(EGRESS_CIDR4_PATTERN))
                .description(Some("An IPv4 CIDR block")),
        )
        .item(text().format(Some(SchemaFormat::KnownFormat(KnownFormat::Ipv6))));
    ArrayBuilder::new()
        .items(entry)
        .max_items(Some(64))
        .description(Some(
            "Where this tenant's outbound requests (session upstreams, identity providers) may go besides public addresses: host names (`notes.internal.example`), `*.suffix` patterns, IP addresses and CIDR blocks (`10.20.0.0/16`; IPv6 blocks too). Credentials travel over plain `http` only to hosts named here. At most 64 entries.",
        ))
        .examples([serde_json::json!(["notes.internal.example", "*.corp.example", "10.20.0.0/16"])])
        .into()
}

/// A host name of `egress_allow` (optionally `*.` before it): labels of
/// letters, digits, `_` and inner hyphens, at most 63 each, the last one
/// starting with a letter or `_` (so that no address passes for a name).
pub const EGRESS_HOST_PATTERN: &str = r"^(\*\.)?([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.)*[A-Za-z_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.?$";

/// An IPv4 CIDR block of `egress_allow`.
pub const EGRESS_CIDR4_PATTERN: &str = r"^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])/(3[0-2]|[12]?[0-9])$";

/// A tenant's policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Tenant-wide enforcement mode.
    #[schema(value_type = EnforcementModeSchema)]
    pub enforcement_mode: Mode,
    /// Whether published versions wait for a reviewer's approval.
    pub approval_required: bool,
    /// Per-server overrides.
    #[serde(default)]
    pub overrides: PolicyOverrides,
    /// Where this tenant's outbound requests (session upstreams, identity
    /// providers) may go besides public addresses: host names
    /// (`notes.internal.example`), `*.suffix` patterns, IP addresses and
    /// CIDR blocks (`10.20.0.0/16`). Credentials travel over plain `http`
    /// only to hosts named here. At most 64 entries.
    #[serde(default)]
    #[schema(schema_with = egress_allow_schema)]
    pub egress_allow: Vec<String>,
}

impl Policy {
    /// The enforcement mode for `server`: its override if the policy has one
    /// (server names compare ASCII-case-insensitively, as their canonical
    /// form does), else the tenant-wide mode.
    pub fn mode_for(&self, server: &str) -> Mode {
        self.overrides
            .servers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(server))
            .and_then(|(_, o)| o.enforcement_mode)
            .unwrap_or(self.enforcement_mode)
    }

    /// The resolve-cache policy for `server` (any spelling): its override,
    /// else `session`.
    pub fn resolve_cache_for(&self, server: &str) -> ResolveCache {
        self.overrides
            .servers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(server))
            .and_then(|(_, o)| o.resolve_cache)
            .unwrap_or(ResolveCache::Session)
    }
}

impl Default for Policy {
    /// New tenants: `permissive`, approval required.
    fn default() -> Self {
        Self {
            enforcement_mode: Mode::Permissive,
            approval_required: true,
            overrides: PolicyOverrides::default(),
            egress_allow: Vec::new(),
        }
    }
}

/// A stored policy with its revision (the `ETag` of the policy resource).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyRecord {
    /// The policy.
    #[serde(flatten)]
    pub policy: Policy,
    /// Increases by one with every change; send it back in `If-Match`.
    pub revision: i64,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// Who last changed it (token `sub`).
    pub updated_by: String,
}

/// Written out rather than derived: a derived schema of the flattened
/// [`Policy`] would be `allOf` a closed object (`additionalProperties:
/// false`, right for the request) and the revision fields, which no value
/// can satisfy. The response is one closed object with all six members.
impl PartialSchema for PolicyRecord {
    fn schema() -> RefOr<Schema> {
        let text = || ObjectBuilder::new().schema_type(Type::String);
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some(
                "A tenant's policy with its revision (the policy resource's `ETag`).",
            ))
            .property(
                "enforcement_mode",
                utoipa::openapi::Ref::from_schema_name("EnforcementMode"),
            )
            .property(
                "approval_required",
                ObjectBuilder::new()
                    .schema_type(Type::Boolean)
                    .description(Some(
                        "Whether published versions wait for a reviewer's approval.",
                    )),
            )
            .property(
                "overrides",
                utoipa::openapi::Ref::from_schema_name("PolicyOverrides"),
            )
            .property("egress_allow", egress_allow_schema())
            .property(
                "revision",
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
                        utoipa::openapi::KnownFormat::Int64,
                    )))
                    .minimum(Some(1))
                    .description(Some(
                        "Increases by one with every change; send it back in `If-Match`.",
                    )),
            )
            .property(
                "updated_at",
                text()
                    .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
                        utoipa::openapi::KnownFormat::DateTime,
                    )))
                    .description(Some("When it last changed.")),
            )
            .property(
                "updated_by",
                text().description(Some("Who last changed it (token `sub`).")),
            )
            .required("enforcement_mode")
            .required("approval_required")
            .required("overrides")
            .required("egress_allow")
            .required("revision")
            .required("updated_at")
            .required("updated_by")
            .additional_properties(Some(
                utoipa::openapi::schema::AdditionalProperties::FreeForm(false),
            ))
            .into()
    }
}

impl ToSchema for PolicyRecord {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("PolicyRecord")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push(("EnforcementMode".into(), EnforcementModeSchema::schema()));
        schemas.push(("PolicyOverrides".into(), PolicyOverrides::schema()));
        <PolicyOverrides as ToSchema>::schemas(schemas);
    }
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

/// An audit event about to be appended (shared with the services that
/// append events with their own changes).
pub use pinfold_core::audit::NewAuditEvent;

/// The `tenant.created` event, appended with the tenant.
pub fn tenant_created_event(
    name: &str,
    policy: &Policy,
    actor: &str,
    at: Timestamp,
) -> NewAuditEvent {
    let data = serde_json::json!({ "name": name, "policy": policy });
    NewAuditEvent::new("tenant.created", actor, at, data)
}

/// The `policy.updated` event, appended with the change that brought the
/// policy to `revision`.
pub fn policy_updated_event(
    revision: i64,
    policy: &Policy,
    actor: &str,
    at: Timestamp,
) -> NewAuditEvent {
    let data = serde_json::json!({ "revision": revision, "policy": policy });
    NewAuditEvent::new("policy.updated", actor, at, data)
}

/// Filters for listing audit events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only events about this server.
    pub server: Option<String>,
    /// Only events of this kind.
    pub kind: Option<String>,
    /// Only events by this actor (token `sub`).
    pub actor: Option<String>,
    /// Only events at or after this time.
    pub since: Option<pinfold_core::ids::Timestamp>,
    /// Only events before this time.
    pub until: Option<pinfold_core::ids::Timestamp>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every host name or IPv4 block the schema's patterns admit is an
        /// entry the server accepts (the schema never promises more than
        /// the handler keeps).
        #[test]
        fn every_entry_the_patterns_admit_parses(
            host in proptest::string::string_regex(EGRESS_HOST_PATTERN.trim_start_matches('^').trim_end_matches('$')).unwrap(),
            cidr in proptest::string::string_regex(EGRESS_CIDR4_PATTERN.trim_start_matches('^').trim_end_matches('$')).unwrap(),
        ) {
            prop_assume!(host.len() <= 253);
            prop_assert!(pinfold_egress::AllowList::parse([host.as_str()]).is_ok(), "{}", host);
            prop_assert!(pinfold_egress::AllowList::parse([cidr.as_str()]).is_ok(), "{}", cidr);
        }
    }

    fn policy(default: Mode, overrides: &[(&str, Option<Mode>)]) -> Policy {
        Policy {
            enforcement_mode: default,
            approval_required: true,
            overrides: PolicyOverrides {
                servers: overrides
                    .iter()
                    .map(|(name, mode)| {
                        (
                            (*name).to_owned(),
                            ServerOverride {
                                enforcement_mode: *mode,
                                resolve_cache: None,
                                tools: BTreeMap::new(),
                            },
                        )
                    })
                    .collect(),
            },
            egress_allow: Vec::new(),
        }
    }

    #[test]
    fn the_resolve_cache_policy_is_per_server_and_defaults_to_session() {
        let mut p = policy(Mode::Strict, &[("io.github.acme/Files", None)]);
        assert_eq!(
            p.resolve_cache_for("io.github.acme/files"),
            ResolveCache::Session
        );
        p.overrides
            .servers
            .get_mut("io.github.acme/Files")
            .unwrap()
            .resolve_cache = Some(ResolveCache::None);
        assert_eq!(
            p.resolve_cache_for("io.github.acme/files"),
            ResolveCache::None
        );
        assert_eq!(
            p.resolve_cache_for("io.github.acme/other"),
            ResolveCache::Session
        );
        let wire: Policy = serde_json::from_value(serde_json::json!({
            "enforcement_mode": "strict", "approval_required": true,
            "overrides": {"servers": {"a.b/c": {"resolve_cache": "none"}}}
        }))
        .unwrap();
        assert_eq!(wire.resolve_cache_for("a.b/c"), ResolveCache::None);
        assert!(
            serde_json::from_value::<Policy>(serde_json::json!({
                "enforcement_mode": "strict", "approval_required": true,
                "overrides": {"servers": {"a.b/c": {"resolve_cache": "forever"}}}
            }))
            .is_err()
        );
    }

    #[test]
    fn a_server_override_wins_over_the_tenant_mode() {
        let p = policy(Mode::Permissive, &[("io.acme/files", Some(Mode::Strict))]);
        assert_eq!(p.mode_for("io.acme/files"), Mode::Strict);
        assert_eq!(p.mode_for("io.acme/other"), Mode::Permissive);
    }

    #[test]
    fn server_names_match_without_regard_to_ascii_case() {
        let p = policy(Mode::Advisory, &[("IO.Acme/Files", Some(Mode::Strict))]);
        assert_eq!(p.mode_for("io.acme/files"), Mode::Strict);
        assert_eq!(p.mode_for("io.acme/FILES"), Mode::Strict);
    }

    #[test]
    fn an_override_without_a_mode_keeps_the_tenant_mode() {
        let p = policy(Mode::Advisory, &[("io.acme/files", None)]);
        assert_eq!(p.mode_for("io.acme/files"), Mode::Advisory);
        assert_eq!(Policy::default().mode_for("anything"), Mode::Permissive);
    }

    #[test]
    fn the_wire_spelling_is_unchanged() {
        let p = policy(Mode::Strict, &[("a/b", Some(Mode::Advisory))]);
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["enforcement_mode"], "strict");
        assert_eq!(
            json["overrides"]["servers"]["a/b"]["enforcement_mode"],
            "advisory"
        );
        let back: Policy = serde_json::from_value(json).unwrap();
        assert_eq!(back, p);
        assert!(serde_json::from_str::<Mode>("\"STRICT\"").is_err());
    }
}
