//! `[auth]`: token verification settings: the clock-skew leeway, the JWKS
//! refetch interval, and the trusted issuers (their key source and the
//! claim rules that map a token to a tenant and roles), with their checks.
//! An issuer's `Debug` never shows its shared secret.

use std::path::PathBuf;

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// Token verification settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// Clock-skew leeway for `exp`/`nbf`, at most 30 seconds.
    pub leeway_secs: u64,
    /// Minimum seconds between two JWKS refetches caused by unknown `kid`s.
    pub jwks_min_refetch_secs: u64,
    /// Trusted issuers.
    pub issuers: Vec<IssuerSettings>,
}

impl AuthConfig {
    /// Checks `[auth]`: the leeway, then each issuer in order (its name,
    /// once only, not the dev issuer when `dev_mode` is on, its audience,
    /// algorithms, exactly one key source, the JWKS URL, the claim rules).
    pub(super) fn validate(&self, dev_mode: bool) -> anyhow::Result<()> {
        if self.leeway_secs > pinfold_http::auth::MAX_LEEWAY_SECS {
            bail!(
                "auth.leeway_secs must be at most 30 (got {})",
                self.leeway_secs
            );
        }
        for (i, iss) in self.issuers.iter().enumerate() {
            let at = format!("auth.issuers[{i}]");
            if iss.issuer.is_empty() {
                bail!("{at}.issuer must not be empty");
            }
            // Issuers are looked up by their `iss`: a second entry for the
            // same URL would silently replace the first (its keys, audience
            // and rules).
            if let Some(k) = self.issuers[..i]
                .iter()
                .position(|o| o.issuer == iss.issuer)
            {
                bail!(
                    "{at}.issuer: repeats auth.issuers[{k}] ({:?}); list each issuer once",
                    iss.issuer
                );
            }
            if dev_mode && iss.issuer == crate::devkeys::DEV_ISSUER {
                bail!(
                    "{at}.issuer: {:?} is the dev issuer, which dev mode adds itself; \
                     name the configured issuer differently or turn dev mode off",
                    iss.issuer
                );
            }
            if iss.audience.is_empty() {
                bail!("{at}.audience must not be empty");
            }
            if iss.algorithms.is_empty() {
                bail!("{at}.algorithms must list at least one algorithm");
            }
            for a in &iss.algorithms {
                a.parse::<jsonwebtoken::Algorithm>()
                    .map_err(|_| anyhow::anyhow!("{at}.algorithms: unknown algorithm {a:?}"))?;
            }
            let sources = [
                iss.jwks_url.is_some(),
                iss.public_key_file.is_some(),
                iss.hs256_secret.is_some(),
            ]
            .iter()
            .filter(|b| **b)
            .count();
            if sources != 1 {
                bail!("{at}: set exactly one of jwks_url, public_key_file, hs256_secret");
            }
            if let Some(s) = &iss.hs256_secret
                && s.len() < 32
            {
                bail!("{at}.hs256_secret must be at least 32 bytes");
            }
            if let Some(u) = &iss.jwks_url {
                crate::url_policy::trusted_fetch_url(u)
                    .map_err(|e| anyhow::anyhow!("{at}.jwks_url: {e}"))?;
            }
            for (j, rule) in iss.rules.iter().enumerate() {
                rule.rule()
                    .map_err(|e| anyhow::anyhow!("{at}.rules[{j}].{e}"))?;
            }
        }
        Ok(())
    }
}

/// One trusted issuer. Exactly one of `jwks_url`, `public_key_file`,
/// `hs256_secret` must be set. Its `Debug` never shows the secret.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssuerSettings {
    /// Expected `iss`.
    pub issuer: String,
    /// Expected `aud`.
    pub audience: String,
    /// Allowed algorithms (`EdDSA`, `RS256`, `ES256`, `HS256`, ...).
    pub algorithms: Vec<String>,
    /// JWKS URL (OIDC providers, GitHub Actions OIDC).
    #[serde(default)]
    pub jwks_url: Option<String>,
    /// PEM file with an Ed25519 (EdDSA) public key.
    #[serde(default)]
    pub public_key_file: Option<PathBuf>,
    /// Shared HS256 secret (at least 32 bytes). Prefer the environment.
    #[serde(default, skip_serializing)]
    pub hs256_secret: Option<String>,
    /// Claim mapping (`[[auth.issuers.rules]]`): when present, a token's
    /// tenant and roles come from the first rule whose claims all match,
    /// never from the token's own `tenant`/`roles`; no match is a 401.
    /// Empty: the token's own claims.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<ClaimRuleSettings>,
}

impl std::fmt::Debug for IssuerSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuerSettings")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("algorithms", &self.algorithms)
            .field("jwks_url", &self.jwks_url)
            .field("public_key_file", &self.public_key_file)
            .field(
                "hs256_secret",
                &self.hs256_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("rules", &self.rules)
            .finish()
    }
}

/// One claim-mapping rule of an issuer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimRuleSettings {
    /// Claim name → required string value; a trailing `*` matches any value
    /// starting with the text before it. Every entry must match.
    #[serde(rename = "match")]
    pub matches: std::collections::BTreeMap<String, String>,
    /// The tenant a matching token acts in.
    pub tenant: String,
    /// Its roles (tenant roles; `platform` is refused).
    pub roles: Vec<String>,
}

impl ClaimRuleSettings {
    /// The checked rule.
    pub fn rule(&self) -> Result<pinfold_http::auth::ClaimRule, pinfold_http::auth::RuleError> {
        pinfold_http::auth::ClaimRule::new(
            self.matches.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            &self.tenant,
            &self.roles,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn issuer(url: &str) -> IssuerSettings {
        IssuerSettings {
            issuer: url.into(),
            audience: "pinfold".into(),
            algorithms: vec!["HS256".into()],
            jwks_url: None,
            public_key_file: None,
            hs256_secret: Some("a-shared-secret-of-at-least-32-bytes!!".into()),
            rules: Vec::new(),
        }
    }

    #[test]
    fn a_repeated_issuer_is_refused() {
        let mut c = Config::default();
        c.auth.issuers = vec![
            issuer("https://a.example"),
            issuer("https://b.example"),
            issuer("https://a.example"),
        ];
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.starts_with("auth.issuers[2].issuer: repeats auth.issuers[0]"),
            "{e}"
        );
        c.auth.issuers.pop();
        c.validate().unwrap();
    }

    #[test]
    fn dev_mode_refuses_a_configured_issuer_named_as_the_dev_issuer() {
        let mut c = Config::default();
        c.auth.issuers = vec![issuer(crate::devkeys::DEV_ISSUER)];
        // Without dev mode the name is the operator's to use.
        c.validate().unwrap();
        c.dev = true;
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.starts_with("auth.issuers[0].issuer: \"pinfold-dev\" is the dev issuer"),
            "{e}"
        );
    }

    fn with_jwks(url: &str) -> Config {
        let mut c = Config::default();
        c.auth.issuers.push(IssuerSettings {
            issuer: "https://login.example.com/".into(),
            audience: "pinfold".into(),
            algorithms: vec!["RS256".into()],
            jwks_url: Some(url.into()),
            public_key_file: None,
            hs256_secret: None,
            rules: Vec::new(),
        });
        c
    }

    #[test]
    fn issuer_debug_never_shows_the_hs256_secret() {
        let mut c = Config::default();
        c.auth.issuers.push(IssuerSettings {
            issuer: "https://login.example.com/".into(),
            audience: "pinfold".into(),
            algorithms: vec!["HS256".into()],
            jwks_url: None,
            public_key_file: None,
            hs256_secret: Some("a-very-secret-shared-key-of-32-bytes!".into()),
            rules: Vec::new(),
        });
        let shown = format!("{c:?}");
        assert!(!shown.contains("a-very-secret"), "{shown}");
        assert!(shown.contains("<redacted>"));
    }

    #[test]
    fn jwks_urls_are_https_or_plain_http_to_loopback_only() {
        for ok in [
            "https://login.example.com/.well-known/jwks.json",
            "https://localhost.evil.com/jwks",
            "http://localhost/jwks",
            "http://LOCALHOST:8080/jwks",
            "http://127.0.0.1:9999/jwks",
            "http://127.3.4.5/jwks",
            "http://[::1]:8080/jwks",
        ] {
            with_jwks(ok)
                .validate()
                .unwrap_or_else(|e| panic!("{ok} refused: {e}"));
        }
        for bad in [
            "http://localhost.evil.com/jwks",
            "http://127.0.0.1.nip.io/jwks",
            "http://127.0.0.1@evil.com/jwks",
            "http://localhost@evil.com/jwks",
            "http://user@evil.com@localhost/jwks",
            "http://user:pw@localhost/jwks",
            "https://user:pw@login.example.com/jwks",
            "http://evil.com/jwks",
            "http://10.0.0.1/jwks",
            "http://foo.localhost/jwks",
            "ftp://localhost/jwks",
            "localhost/jwks",
            "https://",
        ] {
            let e = with_jwks(bad).validate().expect_err(bad).to_string();
            assert!(e.contains("auth.issuers[0].jwks_url"), "{bad}: {e}");
        }
    }
}
