//! Built-in scope hierarchies a provider profile can start from.
//!
//! Each preset is written here as our own table, from the provider's
//! published documentation; none is read from a file at run time. A
//! profile's own `hierarchy` only ever adds entries to its preset
//! ([`HierarchySpec::extend`]), so a tenant that trusts an implication we
//! left out can add it.
//!
//! When sources disagree we leave an implication out rather than put a
//! doubtful one in: a missing edge costs at most one more token in a
//! request (the provider normalises it away), a wrong edge makes us request
//! too little and the call fails with `insufficient_scope`.

use serde::{Deserialize, Serialize};

use super::hierarchy::{Hierarchy, HierarchySpec};

/// A built-in hierarchy, named as in a provider profile's `preset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// GitHub OAuth apps (see [`Preset::Github`]'s table notes below).
    Github,
    /// Sentry: `X:admin ⊃ X:write ⊃ X:read` per family.
    Sentry,
    /// Google: flat (Google publishes no implication graph).
    Google,
    /// Slack: flat; `users:read.email` must be requested with `users:read`.
    Slack,
    /// Jira (Atlassian Connect): `ADMIN ⊃ PROJECT_ADMIN ⊃ DELETE ⊃ WRITE ⊃ READ`.
    Jira,
    /// Confluence (Atlassian Connect): `ADMIN ⊃ SPACE_ADMIN ⊃ DELETE ⊃ WRITE ⊃ READ`.
    Confluence,
}

impl Preset {
    /// Every preset, in declaration order.
    pub const ALL: [Preset; 6] = [
        Self::Github,
        Self::Sentry,
        Self::Google,
        Self::Slack,
        Self::Jira,
        Self::Confluence,
    ];

    /// The preset's wire name (`github`, `sentry`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Github => "github",
            Self::Sentry => "sentry",
            Self::Google => "google",
            Self::Slack => "slack",
            Self::Jira => "jira",
            Self::Confluence => "confluence",
        }
    }

    /// The preset named `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// The preset as a spec (to extend with a profile's own entries).
    pub fn spec(self) -> HierarchySpec {
        let mut spec = HierarchySpec::new();
        let table: &[(&str, &[&str])] = match self {
            Self::Github => GITHUB,
            Self::Sentry => SENTRY,
            Self::Google => &[],
            Self::Slack => {
                // Slack's scope page for `users:read.email` says it must be
                // requested at the same time as `users:read`; neither covers
                // the other (users:read alone no longer reveals emails).
                spec.add_requires("users:read.email", ["users:read"]);
                &[]
            }
            Self::Jira => JIRA,
            Self::Confluence => CONFLUENCE,
        };
        for (scope, covered) in table {
            spec.add_covers(*scope, covered.iter().copied());
        }
        spec
    }

    /// The preset's hierarchy.
    pub fn hierarchy(self) -> Hierarchy {
        self.spec()
            .build()
            .expect("built-in hierarchies are valid (unit-tested)")
    }
}

/// GitHub, from the "Available scopes" table of GitHub's "Scopes for OAuth
/// apps" page: each parent row covers the rows indented under it, one level
/// deep, and nothing else (`user` and `admin:enterprise` also say so in
/// their text).
///
/// Where the GitHub MCP server's own `ScopeHierarchy` disagrees, we follow
/// GitHub's table:
/// - the server has `write:org ⊃ read:org`; the table lists both only under
///   `admin:org`, and its text for `read:org` names team membership, which
///   `write:org`'s does not. Not included.
/// - the server has `write:packages ⊃ read:packages`; the table lists the
///   package scopes as separate top-level rows. Not included.
/// - the server leaves out `repo ⊃ repo:status, repo_deployment,
///   repo:invite` and `user ⊃ user:follow`; the table has them. Included.
/// - the server has no entries for the `admin:repo_hook`, `admin:public_key`,
///   `admin:gpg_key` and `admin:enterprise` families; the table has them.
///   Included.
///
/// The table's note that `repo` and `public_repo` "grant full access to
/// repositories, including repository hooks" describes what those scopes
/// reach, not that they include `admin:repo_hook`; not included either.
const GITHUB: &[(&str, &[&str])] = &[
    (
        "repo",
        &[
            "repo:status",
            "repo_deployment",
            "public_repo",
            "repo:invite",
            "security_events",
        ],
    ),
    ("admin:repo_hook", &["write:repo_hook", "read:repo_hook"]),
    ("admin:org", &["write:org", "read:org"]),
    ("admin:public_key", &["write:public_key", "read:public_key"]),
    ("admin:org_hook", &[]),
    ("gist", &[]),
    ("notifications", &[]),
    ("user", &["read:user", "user:email", "user:follow"]),
    ("project", &["read:project"]),
    ("delete_repo", &[]),
    ("write:packages", &[]),
    ("read:packages", &[]),
    ("delete:packages", &[]),
    ("admin:gpg_key", &["write:gpg_key", "read:gpg_key"]),
    ("codespace", &[]),
    ("workflow", &[]),
    (
        "admin:enterprise",
        &[
            "manage_runners:enterprise",
            "manage_billing:enterprise",
            "read:enterprise",
        ],
    ),
    ("read:audit_log", &[]),
    ("site_admin", &[]),
];

/// Sentry, from the Sentry MCP server's scope hierarchy (each family's
/// `admin` covers `write`, which covers `read`; no implication across
/// families; `project:releases` stands alone). Sentry's table lists each
/// scope as covering itself too; here coverage is strict.
const SENTRY: &[(&str, &[&str])] = &[
    ("org:admin", &["org:write"]),
    ("org:write", &["org:read"]),
    ("org:read", &[]),
    ("project:admin", &["project:write"]),
    ("project:write", &["project:read"]),
    ("project:read", &[]),
    ("team:admin", &["team:write"]),
    ("team:write", &["team:read"]),
    ("team:read", &[]),
    ("member:admin", &["member:write"]),
    ("member:write", &["member:read"]),
    ("member:read", &[]),
    ("event:admin", &["event:write"]),
    ("event:write", &["event:read"]),
    ("event:read", &[]),
    ("project:releases", &[]),
];

/// Jira, from Atlassian's "Scopes for Connect apps" (Jira): each scope
/// implies the ones below it in the chain. `ACT_AS_USER` and
/// `ACCESS_EMAIL_ADDRESSES` imply nothing; `NONE` (implied by all, never
/// declared) is left out. Atlassian accepts the names in either case, but
/// OAuth scope tokens are case-sensitive: a profile using lower-case names
/// adds its own entries.
const JIRA: &[(&str, &[&str])] = &[
    ("ADMIN", &["PROJECT_ADMIN"]),
    ("PROJECT_ADMIN", &["DELETE"]),
    ("DELETE", &["WRITE"]),
    ("WRITE", &["READ"]),
    ("READ", &[]),
    ("ACT_AS_USER", &[]),
    ("ACCESS_EMAIL_ADDRESSES", &[]),
];

/// Confluence, from Atlassian's "Scopes for Connect apps" (Confluence). The
/// chain's middle scope is `SPACE_ADMIN` there, not Jira's `PROJECT_ADMIN`
/// (Confluence has spaces, not projects); otherwise as [`JIRA`].
const CONFLUENCE: &[(&str, &[&str])] = &[
    ("ADMIN", &["SPACE_ADMIN"]),
    ("SPACE_ADMIN", &["DELETE"]),
    ("DELETE", &["WRITE"]),
    ("WRITE", &["READ"]),
    ("READ", &[]),
    ("ACT_AS_USER", &[]),
    ("ACCESS_EMAIL_ADDRESSES", &[]),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_builds_and_round_trips_its_name() {
        for p in Preset::ALL {
            let h = p.hierarchy();
            assert_eq!(Preset::from_name(p.as_str()), Some(p));
            assert_eq!(
                serde_json::to_value(p).unwrap(),
                serde_json::json!(p.as_str())
            );
            assert_eq!(p.spec().build().unwrap(), h);
        }
        assert_eq!(Preset::from_name("gitlab"), None);
    }

    #[test]
    fn github() {
        let h = Preset::Github.hierarchy();
        assert!(h.covers("repo", "public_repo"));
        assert!(h.covers("repo", "security_events"));
        assert!(h.covers("repo", "repo:invite"));
        assert!(h.covers("admin:org", "read:org"));
        assert!(h.covers("admin:org", "write:org"));
        assert!(!h.covers("write:org", "read:org"));
        assert!(!h.covers("write:packages", "read:packages"));
        assert!(!h.covers("repo", "admin:repo_hook"));
        assert!(h.covers("user", "user:follow"));
        assert!(h.covers("admin:enterprise", "read:enterprise"));
        assert_eq!(h.closure(["repo"]).len(), 6);
        // GitHub's own normalisation example: user, gist, user:email → user, gist.
        assert_eq!(
            h.antichain(["user", "gist", "user:email"]),
            ["gist", "user"]
        );
    }

    #[test]
    fn sentry_slack_atlassian_google() {
        let s = Preset::Sentry.hierarchy();
        assert!(s.covers("org:admin", "org:read"));
        assert!(s.covers("event:write", "event:read"));
        assert!(!s.covers("org:admin", "project:read"));
        assert_eq!(s.len(), 16);
        let sl = Preset::Slack.hierarchy();
        assert!(!sl.covers("users:read.email", "users:read"));
        assert_eq!(
            sl.required_with("users:read.email").collect::<Vec<_>>(),
            ["users:read"]
        );
        let j = Preset::Jira.hierarchy();
        assert!(j.covers("ADMIN", "READ") && j.covers("PROJECT_ADMIN", "WRITE"));
        assert!(!j.covers("READ", "WRITE") && !j.covers("ADMIN", "ACT_AS_USER"));
        let c = Preset::Confluence.hierarchy();
        assert!(c.covers("ADMIN", "SPACE_ADMIN") && c.covers("SPACE_ADMIN", "READ"));
        assert!(Preset::Google.hierarchy().is_empty());
    }
}
