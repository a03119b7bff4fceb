//! Provider profiles and grants: the wire shapes and the checks on them.

use std::collections::{BTreeMap, BTreeSet};

use pinfold_core::ids::Timestamp;
use pinfold_http::problem::FieldError;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use pinfold_core::scope::{Hierarchy, HierarchyError, HierarchySpec};

/// A built-in scope hierarchy a profile can start from (its `hierarchy`
/// extends the preset's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// GitHub OAuth app scopes (`repo ⊃ public_repo`, `admin:org ⊃ write:org ⊃ read:org`, ...).
    Github,
    /// Sentry (`X:admin ⊃ X:write ⊃ X:read`).
    Sentry,
    /// Google (flat).
    Google,
    /// Slack (flat; `users:read.email` needs `users:read`).
    Slack,
    /// Atlassian Jira (`ADMIN ⊃ PROJECT_ADMIN ⊃ DELETE ⊃ WRITE ⊃ READ`).
    Jira,
    /// Atlassian Confluence (the same chain).
    Confluence,
}

/// Body of `PUT .../providers/{provider}`. Every member is optional: a
/// profile that only names a `preset` or a `hierarchy` serves plans; one
/// that grants also needs `client_id`, endpoints (or an `issuer` to
/// discover them from) and `redirect_uris`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "issuer": "https://auth.example.com",
    "client_id": "pinfold",
    "client_secret": "s3cr3t",
    "redirect_uris": ["https://app.example.com/oauth/callback"],
    "default_scopes": ["read:user"],
    "preset": "github",
    "hierarchy": {"notes:admin": ["notes:write"], "notes:write": ["notes:read"]},
    "resources": {"io.github.acme/notes": "https://notes.example.com/mcp"}
}))]
pub struct ProviderBody {
    /// The authorization server's issuer identifier (RFC 8414). When the
    /// endpoints are not given, they are discovered from it.
    #[serde(default)]
    pub issuer: Option<String>,
    /// Authorization endpoint.
    #[serde(default)]
    pub authorization_endpoint: Option<String>,
    /// Token endpoint.
    #[serde(default)]
    pub token_endpoint: Option<String>,
    /// The OAuth client id Pinfold's grants use.
    #[serde(default)]
    pub client_id: Option<String>,
    /// The client secret: write-only (sealed at rest, never returned).
    /// Omitted on a later `PUT`, the stored one is kept.
    #[serde(default)]
    pub client_secret: Option<String>,
    /// Redirect URIs a grant may use, compared exactly.
    #[serde(default)]
    pub redirect_uris: Vec<String>,
    /// Scopes for tools that declare no requirement.
    #[serde(default)]
    pub default_scopes: Vec<String>,
    /// A built-in hierarchy to start from.
    #[serde(default)]
    pub preset: Option<Preset>,
    /// Scope → scopes it covers (transitive; cycles are refused).
    #[serde(default)]
    pub hierarchy: BTreeMap<String, Vec<String>>,
    /// MCP server name → its canonical URI (the RFC 8707 `resource`).
    #[serde(default)]
    pub resources: BTreeMap<String, String>,
}

/// How a profile's endpoints were obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EndpointSource {
    /// Given in the profile.
    Configured,
    /// RFC 8414 authorization server metadata.
    Rfc8414,
    /// OpenID Connect discovery.
    OpenidConfiguration,
}

/// A stored profile (never the secret), as JSON in the database.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Profile {
    /// Issuer identifier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// Authorization endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_endpoint: Option<String>,
    /// Token endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint: Option<String>,
    /// Where the endpoints came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoints_from: Option<EndpointSource>,
    /// Client id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Redirect URIs.
    #[serde(default)]
    pub redirect_uris: Vec<String>,
    /// Default scopes.
    #[serde(default)]
    pub default_scopes: Vec<String>,
    /// Preset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<Preset>,
    /// Hierarchy as given.
    #[serde(default)]
    pub hierarchy: BTreeMap<String, Vec<String>>,
    /// MCP server → canonical URI.
    #[serde(default)]
    pub resources: BTreeMap<String, String>,
}

impl Preset {
    /// The built-in preset of `pinfold-core` of the same name.
    pub fn core(self) -> pinfold_core::scope::Preset {
        use pinfold_core::scope::Preset as P;
        match self {
            Preset::Github => P::Github,
            Preset::Sentry => P::Sentry,
            Preset::Google => P::Google,
            Preset::Slack => P::Slack,
            Preset::Jira => P::Jira,
            Preset::Confluence => P::Confluence,
        }
    }
}

/// The hierarchy of a `preset` extended by a profile's own `hierarchy`
/// (its entries only ever add coverage).
pub fn hierarchy_spec(
    preset: Option<Preset>,
    own: &BTreeMap<String, Vec<String>>,
) -> HierarchySpec {
    let mut spec = preset.map(|p| p.core().spec()).unwrap_or_default();
    spec.extend(&HierarchySpec::from_covers(
        own.iter().map(|(k, v)| (k.clone(), v.iter().cloned())),
    ));
    spec
}

impl Profile {
    /// The profile's hierarchy: its preset extended by its own entries
    /// (validated when written; flat if a stored one no longer builds).
    pub fn hierarchy(&self) -> Result<Hierarchy, HierarchyError> {
        hierarchy_spec(self.preset, &self.hierarchy).build()
    }
}

/// A provider profile as `GET` answers it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ProviderView {
    /// Provider name (the path segment).
    pub name: String,
    /// The profile.
    #[serde(flatten)]
    pub profile: Profile,
    /// Whether a client secret is stored (it is never returned).
    pub client_secret_set: bool,
    /// Revision (the `ETag` is `"r<revision>"`).
    pub revision: i64,
    /// Last change.
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: Timestamp,
    /// Who made it.
    pub updated_by: String,
}

/// A stored provider row.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderRow {
    /// Name.
    pub name: String,
    /// Profile.
    pub profile: Profile,
    /// Sealed client secret.
    pub client_secret_sealed: Option<String>,
    /// Revision, from 1.
    pub revision: i64,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
    /// Who made it.
    pub updated_by: String,
}

impl From<&ProviderRow> for ProviderView {
    fn from(r: &ProviderRow) -> Self {
        ProviderView {
            name: r.name.clone(),
            profile: r.profile.clone(),
            client_secret_set: r.client_secret_sealed.is_some(),
            revision: r.revision,
            updated_at: r.updated_at,
            updated_by: r.updated_by.clone(),
        }
    }
}

/// Where a grant stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum GrantStatus {
    /// Authorization URL issued; not exchanged yet.
    Pending,
    /// Code exchanged; the token went to the caller once.
    Exchanged,
    /// The token endpoint refused or failed.
    Failed,
}

impl GrantStatus {
    /// Column spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            GrantStatus::Pending => "pending",
            GrantStatus::Exchanged => "exchanged",
            GrantStatus::Failed => "failed",
        }
    }

    /// Parses the column spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(GrantStatus::Pending),
            "exchanged" => Some(GrantStatus::Exchanged),
            "failed" => Some(GrantStatus::Failed),
            _ => None,
        }
    }
}

/// A grant row: what was asked and, after the exchange, what was granted.
/// No token is ever stored.
#[derive(Debug, Clone, PartialEq)]
pub struct GrantRow {
    /// Grant id (32 hex digits; the first 12 are the creation time, so ids
    /// sort by age).
    pub id: String,
    /// Provider name.
    pub provider: String,
    /// Token `sub` of the caller who started it.
    pub principal: String,
    /// Token `iss` of that caller.
    pub issuer: String,
    /// The redirect URI used.
    pub redirect_uri: String,
    /// RFC 8707 resource, when one was requested.
    pub resource: Option<String>,
    /// Scopes in the authorization request.
    pub requested: Vec<String>,
    /// Scopes the calls need (the plan's `required`).
    pub needed: Vec<String>,
    /// Scopes the token response granted (after the exchange).
    pub granted: Option<Vec<String>>,
    /// Status.
    pub status: GrantStatus,
    /// The provider's error code when the exchange failed.
    pub error: Option<String>,
    /// Creation time.
    pub created_at: Timestamp,
    /// Exchange time.
    pub exchanged_at: Option<Timestamp>,
}

/// The single-use `state` of a pending grant: only its SHA-256 is stored,
/// with the PKCE verifier sealed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateRow {
    /// Grant id.
    pub grant_id: String,
    /// Lowercase hex SHA-256 of the state.
    pub state_hash: String,
    /// The PKCE code verifier, sealed (bound to tenant and grant).
    pub verifier_sealed: String,
    /// When the state stops being accepted.
    pub expires_at: Timestamp,
}

/// A grant in the ledger.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GrantView {
    /// Grant id.
    pub id: String,
    /// Provider.
    pub provider: String,
    /// Who started it.
    pub principal: String,
    /// Redirect URI.
    pub redirect_uri: String,
    /// RFC 8707 resource.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// Status.
    pub status: GrantStatus,
    /// Requested scopes.
    pub requested: Vec<String>,
    /// Needed scopes (from the plan).
    pub needed: Vec<String>,
    /// Granted scopes (after the exchange).
    pub granted: Option<Vec<String>>,
    /// Whether what was granted confers more than what is needed.
    pub over_privileged: bool,
    /// What the grant confers beyond the need: the closure of `granted`
    /// minus the closure of `needed` under the provider's hierarchy.
    pub unneeded: Vec<String>,
    /// Needed scopes the grant does not cover.
    pub missing: Vec<String>,
    /// The provider's error when the exchange failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Creation time.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
    /// Exchange time.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub exchanged_at: Option<Timestamp>,
}

impl GrantView {
    /// The ledger entry of `row` under `hierarchy`.
    pub fn new(row: &GrantRow, hierarchy: &Hierarchy) -> Self {
        let (unneeded, missing) = match &row.granted {
            Some(granted) => {
                let have = hierarchy.closure(granted.iter().map(String::as_str));
                let need = hierarchy.closure(row.needed.iter().map(String::as_str));
                let unneeded: Vec<String> = have.difference(&need).cloned().collect();
                let missing: Vec<String> = row
                    .needed
                    .iter()
                    .filter(|s| !have.contains(*s))
                    .cloned()
                    .collect();
                (unneeded, missing)
            }
            None => (Vec::new(), Vec::new()),
        };
        GrantView {
            id: row.id.clone(),
            provider: row.provider.clone(),
            principal: row.principal.clone(),
            redirect_uri: row.redirect_uri.clone(),
            resource: row.resource.clone(),
            status: row.status,
            requested: row.requested.clone(),
            needed: row.needed.clone(),
            granted: row.granted.clone(),
            over_privileged: !unneeded.is_empty(),
            unneeded,
            missing,
            error: row.error.clone(),
            created_at: row.created_at,
            exchanged_at: row.exchanged_at,
        }
    }
}

/// Whether `s` is one RFC 6749 scope token (§3.3: one or more NQCHAR,
/// printable ASCII but space, `"` and `\`), at most 256 bytes.
pub fn is_scope_token(s: &str) -> bool {
    (1..=256).contains(&s.len())
        && s.bytes()
            .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
}

/// A provider name as a JSON Schema `pattern` ([`is_provider_name`]).
pub const PROVIDER_NAME_PATTERN: &str = "^[a-z0-9][a-z0-9_-]{0,62}$";

/// Whether `s` is a provider name: `[a-z0-9][a-z0-9_-]{0,62}`.
pub fn is_provider_name(s: &str) -> bool {
    let b = s.as_bytes();
    (1..=63).contains(&b.len())
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'-' | b'_'))
}

/// Whether `id` has the shape of a grant id.
pub fn is_grant_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A new grant id: 12 hex digits of creation time (ms), 20 random.
pub fn new_grant_id(at: Timestamp) -> String {
    let rand = uuid::Uuid::new_v4().simple().to_string();
    format!(
        "{:012x}{}",
        at.millis().max(0) & 0xffff_ffff_ffff,
        &rand[..20]
    )
}

/// A JSON pointer member, escaped (RFC 6901).
pub fn ptr(base: &str, key: &str) -> String {
    pinfold_core::error::pointer_push(base, key)
}

/// One validation error.
pub fn field(pointer: impl Into<String>, code: &str, message: impl Into<String>) -> FieldError {
    FieldError {
        pointer: pointer.into(),
        code: code.into(),
        message: message.into(),
    }
}

/// Checks a list of scope tokens (each valid, no duplicates).
pub fn check_scopes(pointer: &str, scopes: &[String], errors: &mut Vec<FieldError>) {
    let mut seen = BTreeSet::new();
    for (i, s) in scopes.iter().enumerate() {
        let p = format!("{pointer}/{i}");
        if !is_scope_token(s) {
            errors.push(field(
                p,
                "invalid_scope",
                "a scope is 1 to 256 printable ASCII characters without space, '\"' or '\\' (RFC 6749 §3.3)",
            ));
        } else if !seen.insert(s.as_str()) {
            errors.push(field(p, "duplicate_scope", format!("{s} is listed twice")));
        }
    }
}

/// Sorted, de-duplicated scopes.
pub fn normalise(scopes: &[String]) -> Vec<String> {
    scopes
        .iter()
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_tokens_follow_nqchar() {
        for ok in [
            "repo",
            "read:org",
            "https://www.googleapis.com/auth/drive",
            "a!#[]~",
        ] {
            assert!(is_scope_token(ok), "{ok}");
        }
        for bad in ["", "a b", "a\"b", "a\\b", "é", "a\tb", &"x".repeat(257)] {
            assert!(!is_scope_token(bad), "{bad}");
        }
    }

    #[test]
    fn ledger_flags_what_exceeds_the_need() {
        let mut map = BTreeMap::new();
        map.insert("repo".to_owned(), vec!["public_repo".to_owned()]);
        let h = hierarchy_spec(None, &map).build().unwrap();
        let row = GrantRow {
            id: "0".repeat(32),
            provider: "gh".into(),
            principal: "p".into(),
            issuer: "i".into(),
            redirect_uri: "https://x/cb".into(),
            resource: None,
            requested: vec!["repo".into()],
            needed: vec!["public_repo".into(), "read:org".into()],
            granted: Some(vec!["repo".into()]),
            status: GrantStatus::Exchanged,
            error: None,
            created_at: Timestamp::from_millis(1),
            exchanged_at: Some(Timestamp::from_millis(2)),
        };
        let v = GrantView::new(&row, &h);
        assert!(v.over_privileged);
        assert_eq!(v.unneeded, ["repo"]);
        assert_eq!(v.missing, ["read:org"]);
        let exact = GrantRow {
            granted: Some(vec!["public_repo".into(), "read:org".into()]),
            ..row
        };
        let v = GrantView::new(&exact, &h);
        assert!(!v.over_privileged && v.unneeded.is_empty() && v.missing.is_empty());
    }

    #[test]
    fn grant_ids_sort_by_time() {
        let a = new_grant_id(Timestamp::from_millis(1_000));
        let b = new_grant_id(Timestamp::from_millis(2_000));
        assert!(is_grant_id(&a) && is_grant_id(&b));
        assert!(a < b);
        assert!(is_provider_name("github") && is_provider_name("my-idp_2"));
        assert!(!is_provider_name("GitHub") && !is_provider_name("-x") && !is_provider_name(""));
    }
}
