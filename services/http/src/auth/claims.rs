//! How an issuer's tokens name their tenant and roles ([`ClaimMapping`]):
//! the token's own `tenant` and `roles` claims, or configured claim rules
//! ([`ClaimRule`], patterns [`ClaimPattern`]) over the verified claims, the
//! first match deciding.

use pinfold_core::ids::TenantId;

use super::error::AuthError;
use super::principal::Role;

/// How an issuer's tokens name their tenant and roles.
#[derive(Debug, Clone, Default)]
pub enum ClaimMapping {
    /// The token's own `tenant` and `roles` claims: an issuer that mints
    /// tokens for Pinfold (dev mode, an IdP configured with these claims).
    #[default]
    FromToken,
    /// Configured rules over the token's claims, first match wins. The
    /// token's own `tenant` and `roles` are ignored, and a token no rule
    /// matches is refused: an issuer that serves many parties (GitHub
    /// Actions signs a token for every repository) decides nothing itself.
    Rules(Vec<ClaimRule>),
}

/// A claim value a rule requires: the exact string, or (written with a
/// trailing `*`) any string starting with the text before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimPattern {
    /// The claim equals this string.
    Exact(String),
    /// The claim starts with this (non-empty) string.
    Prefix(String),
}

impl ClaimPattern {
    /// Parses a pattern: a trailing `*` makes it a prefix; `*` anywhere else,
    /// an empty pattern and a bare `*` are refused.
    pub fn parse(s: &str) -> Result<ClaimPattern, String> {
        if s.is_empty() {
            return Err("must not be empty".into());
        }
        let (text, prefix) = match s.strip_suffix('*') {
            Some(t) => (t, true),
            None => (s, false),
        };
        if text.contains('*') {
            return Err(format!(
                "{s:?}: `*` may only end a pattern (a prefix match)"
            ));
        }
        if text.is_empty() {
            return Err(format!("{s:?}: a prefix pattern needs text before the `*`"));
        }
        Ok(if prefix {
            ClaimPattern::Prefix(text.to_owned())
        } else {
            ClaimPattern::Exact(text.to_owned())
        })
    }

    /// Whether `value` matches.
    pub fn matches(&self, value: &str) -> bool {
        match self {
            ClaimPattern::Exact(v) => value == v,
            ClaimPattern::Prefix(p) => value.starts_with(p.as_str()),
        }
    }
}

/// Claims that name who a token is for (the subject, the repository, its
/// owner, any numeric id): a rule may only pin them exactly, never by prefix.
fn is_identity_claim(claim: &str) -> bool {
    matches!(
        claim,
        "sub" | "repository" | "repository_owner" | "repository_id" | "repository_owner_id"
    ) || claim.ends_with("_id")
}

/// One rule of a [`ClaimMapping::Rules`]: when every listed claim of a
/// token is a string matching its pattern, the token acts in `tenant` with
/// `roles`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRule {
    matches: Vec<(String, ClaimPattern)>,
    tenant: TenantId,
    roles: Vec<Role>,
}

/// Why a rule is not acceptable: the field (`match.repository`, `tenant`,
/// `roles[1]`, ...) and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct RuleError {
    /// The offending field, relative to the rule.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl ClaimRule {
    /// Builds a rule from its configuration: at least one claim to match,
    /// a valid tenant id, and one or more tenant roles. `platform` is
    /// refused: a rule maps tokens of an outside issuer (a CI job, any
    /// repository of an organisation) into one tenant, and creating the
    /// installation's tenants is not something such a token should get
    /// by matching a pattern; platform operators use the issuer that mints
    /// Pinfold's own claims.
    pub fn new<'a>(
        matches: impl IntoIterator<Item = (&'a str, &'a str)>,
        tenant: &str,
        roles: &[String],
    ) -> Result<ClaimRule, RuleError> {
        let err = |field: String, message: String| RuleError { field, message };
        let mut list = Vec::new();
        for (claim, pattern) in matches {
            if claim.is_empty() {
                return Err(err("match".into(), "a claim name must not be empty".into()));
            }
            let p = ClaimPattern::parse(pattern).map_err(|m| err(format!("match.{claim}"), m))?;
            if matches!(p, ClaimPattern::Prefix(_)) && is_identity_claim(claim) {
                return Err(err(
                    format!("match.{claim}"),
                    format!(
                        "{pattern:?}: {claim} names who the token is for and takes an exact value only \
                         (a prefix would also match other repositories or owners, e.g. `acme/files*` matches `acme/files-evil`)"
                    ),
                ));
            }
            list.push((claim.to_owned(), p));
        }
        if list.is_empty() {
            return Err(err(
                "match".into(),
                "name at least one claim to match (a rule matching every token of the issuer is refused)".into(),
            ));
        }
        let tenant = TenantId::parse(tenant).map_err(|e| {
            err(
                "tenant".into(),
                format!("{tenant:?} is not a tenant id: {e}"),
            )
        })?;
        if roles.is_empty() {
            return Err(err("roles".into(), "list at least one role".into()));
        }
        let mut parsed = Vec::new();
        for (i, r) in roles.iter().enumerate() {
            match Role::parse(r) {
                Some(Role::Platform) => {
                    return Err(err(
                        format!("roles[{i}]"),
                        "platform cannot be granted by a claim rule (tenant roles only)".into(),
                    ));
                }
                Some(role) => parsed.push(role),
                None => {
                    return Err(err(
                        format!("roles[{i}]"),
                        format!(
                            "unknown role {r:?} (tenant roles: admin, publisher, reviewer, reader, client)"
                        ),
                    ));
                }
            }
        }
        Ok(ClaimRule {
            matches: list,
            tenant,
            roles: parsed,
        })
    }

    /// Whether every listed claim is a string matching its pattern.
    pub fn matches(&self, claims: &serde_json::Map<String, serde_json::Value>) -> bool {
        self.matches.iter().all(|(claim, pattern)| {
            claims
                .get(claim)
                .and_then(serde_json::Value::as_str)
                .is_some_and(|v| pattern.matches(v))
        })
    }

    /// The tenant a matching token acts in.
    pub fn tenant(&self) -> &TenantId {
        &self.tenant
    }

    /// The roles a matching token holds.
    pub fn roles(&self) -> &[Role] {
        &self.roles
    }
}

impl ClaimMapping {
    /// The tenant and roles for verified `claims`.
    pub(super) fn apply(
        &self,
        claims: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<(Option<TenantId>, Vec<Role>), AuthError> {
        let invalid = |s: &str| AuthError::Invalid(s.to_owned());
        match self {
            ClaimMapping::Rules(rules) => rules
                .iter()
                .find(|r| r.matches(claims))
                .map(|r| (Some(r.tenant.clone()), r.roles.clone()))
                .ok_or_else(|| invalid("no claim rule of this issuer matches the token")),
            ClaimMapping::FromToken => {
                let tenant = match claims.get("tenant") {
                    None | Some(serde_json::Value::Null) => None,
                    Some(serde_json::Value::String(t)) => Some(
                        TenantId::parse(t)
                            .map_err(|_| invalid("claim tenant is not a valid tenant id"))?,
                    ),
                    Some(_) => return Err(invalid("claim tenant must be a string")),
                };
                let roles: Vec<Role> = match claims.get("roles") {
                    None | Some(serde_json::Value::Null) => Vec::new(),
                    Some(serde_json::Value::Array(items)) => {
                        let mut roles = Vec::new();
                        for item in items {
                            let name = item.as_str().ok_or_else(|| {
                                invalid("claim roles must be an array of strings")
                            })?;
                            // Unknown roles are ignored: other systems may share the token.
                            roles.extend(Role::parse(name));
                        }
                        roles
                    }
                    Some(_) => return Err(invalid("claim roles must be an array of strings")),
                };
                Ok((tenant, roles))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{SystemTime, UNIX_EPOCH};

    use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header};
    use serde_json::{Value, json};

    use super::*;
    use crate::auth::{Authenticator, IssuerConfig, JwksFetch, KeySource};

    const SECRET: &[u8] = b"a-shared-secret-of-at-least-32-bytes!!";
    const ISS: &str = "https://token.actions.example";

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    fn rule(matches: &[(&str, &str)], tenant: &str, roles: &[&str]) -> ClaimRule {
        ClaimRule::new(matches.iter().copied(), tenant, &strings(roles)).unwrap()
    }

    fn rule_err(matches: &[(&str, &str)], tenant: &str, roles: &[&str]) -> String {
        ClaimRule::new(matches.iter().copied(), tenant, &strings(roles))
            .unwrap_err()
            .to_string()
    }

    fn authn(mapping: ClaimMapping) -> Authenticator {
        Authenticator::new(
            vec![IssuerConfig {
                issuer: ISS.into(),
                audience: "pinfold".into(),
                algorithms: vec![Algorithm::HS256],
                keys: KeySource::Static(DecodingKey::from_secret(SECRET)),
                mapping,
            }],
            0,
            JwksFetch::public_only(),
        )
    }

    /// A GitHub-Actions-shaped token, with `extra` claims merged in.
    fn token(extra: Value) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let mut claims = json!({
            "iss": ISS, "aud": "pinfold", "exp": now + 300, "iat": now,
            "sub": "repo:acme/infra:ref:refs/heads/main",
            "repository": "acme/infra", "repository_owner": "acme",
            "repository_id": "123456",
            "job_workflow_ref": "acme/infra/.github/workflows/pinfold.yml@refs/heads/main",
            "ref": "refs/heads/main",
        });
        for (k, v) in extra.as_object().unwrap() {
            claims[k] = v.clone();
        }
        jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(SECRET),
        )
        .unwrap()
    }

    #[test]
    fn patterns_are_exact_or_a_trailing_star_prefix() {
        assert_eq!(
            ClaimPattern::parse("acme").unwrap(),
            ClaimPattern::Exact("acme".into())
        );
        let p =
            ClaimPattern::parse("acme/infra/.github/workflows/pinfold.yml@refs/tags/*").unwrap();
        assert!(p.matches("acme/infra/.github/workflows/pinfold.yml@refs/tags/v1.2.0"));
        assert!(!p.matches("acme/infra/.github/workflows/pinfold.yml@refs/heads/main"));
        assert!(ClaimPattern::parse("acme").unwrap().matches("acme"));
        assert!(!ClaimPattern::parse("acme").unwrap().matches("acme-evil"));
        assert!(!ClaimPattern::parse("acme").unwrap().matches("Acme"));
        for bad in ["", "*", "a*b", "**", "*acme"] {
            assert!(ClaimPattern::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn rules_name_the_offending_field() {
        let m = [("repository_owner", "acme")];
        assert!(
            rule_err(&[], "acme", &["publisher"]).starts_with("match: name at least one claim")
        );
        assert!(rule_err(&[("", "x")], "acme", &["publisher"]).starts_with("match: "));
        assert!(
            rule_err(&[("ref", "refs/*/main")], "acme", &["publisher"]).starts_with("match.ref: ")
        );
        assert!(rule_err(&m, "Not A Tenant", &["publisher"]).starts_with("tenant: "));
        assert!(rule_err(&m, "acme", &[]).starts_with("roles: list at least one"));
        let e = rule_err(&m, "acme", &["reader", "platform"]);
        assert!(e.starts_with("roles[1]: platform cannot"), "{e}");
        for claim in [
            "sub",
            "repository",
            "repository_owner",
            "repository_id",
            "repository_owner_id",
            "actor_id",
        ] {
            let e = rule_err(&[(claim, "acme*")], "acme", &["publisher"]);
            assert!(
                e.starts_with(&format!("match.{claim}: \"acme*\": {claim} names who")),
                "{e}"
            );
            // The exact value is fine.
            rule(&[(claim, "acme")], "acme", &["publisher"]);
        }
        // Refs and workflow refs keep their prefix patterns.
        rule(&[("ref", "refs/tags/v*")], "acme", &["publisher"]);
        let e = rule_err(&m, "acme", &["wizard"]);
        assert!(e.starts_with("roles[0]: unknown role \"wizard\""), "{e}");
        let r = rule(&m, "acme", &["publisher", "reader"]);
        assert_eq!(r.tenant().as_str(), "acme");
        assert_eq!(r.roles(), &[Role::Publisher, Role::Reader]);
    }

    #[test]
    fn every_claim_of_a_rule_must_be_a_matching_string() {
        let r = rule(
            &[("repository_owner", "acme"), ("ref", "refs/heads/main")],
            "acme",
            &["publisher"],
        );
        let claims = |v: Value| v.as_object().unwrap().clone();
        assert!(r.matches(&claims(
            json!({"repository_owner": "acme", "ref": "refs/heads/main"})
        )));
        assert!(!r.matches(&claims(
            json!({"repository_owner": "acme", "ref": "refs/heads/dev"})
        )));
        assert!(!r.matches(&claims(json!({"repository_owner": "acme"}))));
        // Claims must be strings: a number or an array never matches.
        let id = rule(&[("repository_id", "123")], "acme", &["reader"]);
        assert!(!id.matches(&claims(json!({"repository_id": 123}))));
        assert!(!id.matches(&claims(json!({"repository_id": ["123"]}))));
        assert!(id.matches(&claims(json!({"repository_id": "123"}))));
    }

    #[tokio::test]
    async fn the_first_matching_rule_decides_tenant_and_roles() {
        let a = authn(ClaimMapping::Rules(vec![
            rule(
                &[
                    ("repository_owner", "acme"),
                    (
                        "job_workflow_ref",
                        "acme/infra/.github/workflows/pinfold.yml@refs/heads/main",
                    ),
                ],
                "acme",
                &["publisher"],
            ),
            rule(&[("repository_owner", "acme")], "acme-ro", &["reader"]),
        ]));
        let p = a.verify(&token(json!({}))).await.unwrap();
        assert_eq!(p.tenant.as_ref().unwrap().as_str(), "acme");
        assert_eq!(p.roles(), vec![Role::Publisher]);
        assert_eq!(p.sub, "repo:acme/infra:ref:refs/heads/main");
        // Another workflow of the same owner falls through to the second rule.
        let other = token(
            json!({"job_workflow_ref": "acme/infra/.github/workflows/other.yml@refs/heads/main"}),
        );
        let p = a.verify(&other).await.unwrap();
        assert_eq!(p.tenant.as_ref().unwrap().as_str(), "acme-ro");
        assert_eq!(p.roles(), vec![Role::Reader]);
        // Another owner matches nothing: refused.
        let stranger = token(json!({"repository_owner": "evil", "repository": "evil/infra"}));
        assert_eq!(
            a.verify(&stranger).await.unwrap_err(),
            AuthError::Invalid("no claim rule of this issuer matches the token".into())
        );
    }

    #[tokio::test]
    async fn an_issuer_with_rules_ignores_the_tokens_own_tenant_and_roles() {
        let a = authn(ClaimMapping::Rules(vec![rule(
            &[("repository_owner", "acme")],
            "acme",
            &["reader"],
        )]));
        let claims_itself = token(json!({"tenant": "other", "roles": ["platform", "admin"]}));
        let p = a.verify(&claims_itself).await.unwrap();
        assert_eq!(p.tenant.as_ref().unwrap().as_str(), "acme");
        assert_eq!(p.roles(), vec![Role::Reader]);
        assert!(!p.has(Role::Platform) && !p.has(Role::Admin));
        // Without rules the same issuer would have taken them from the token.
        let p = authn(ClaimMapping::FromToken)
            .verify(&claims_itself)
            .await
            .unwrap();
        assert_eq!(p.tenant.as_ref().unwrap().as_str(), "other");
        assert_eq!(p.roles(), vec![Role::Platform, Role::Admin]);
    }
}
