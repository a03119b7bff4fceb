//! `[console]`: the review console at `/console`: whether it is served,
//! how long its sessions live, and its OAuth client at the identity
//! provider (`[console.oidc]`).

use std::fmt;
use std::path::PathBuf;

use anyhow::{Context as _, bail};
use serde::{Deserialize, Serialize};

/// `[console]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsoleConfig {
    /// Serve the console (default on).
    pub enabled: bool,
    /// The longest a console session lives, in seconds (60 to 86,400;
    /// default 8 hours). A session never outlives the token it was opened
    /// with.
    pub session_ttl_secs: u64,
    /// The console's OAuth client at the identity provider.
    pub oidc: Option<ConsoleOidcSettings>,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        ConsoleConfig {
            enabled: true,
            session_ttl_secs: 8 * 3600,
            oidc: None,
        }
    }
}

/// `[console.oidc]`: sign-in with authorization code and PKCE.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsoleOidcSettings {
    /// What the sign-in button names ("Sign in with …").
    #[serde(default = "default_name")]
    pub name: String,
    /// The provider's issuer: one of `[[auth.issuers]]`, whose access
    /// tokens Pinfold verifies (audience, tenant, roles) as it does any
    /// bearer token.
    pub issuer: String,
    /// The console's client id at the provider.
    pub client_id: String,
    /// The client secret (a confidential client); none: a public client.
    /// A secret: never serialised. Exclusive with `client_secret_file`.
    #[serde(default, skip_serializing)]
    pub client_secret: Option<String>,
    /// A file holding the client secret, read at startup.
    #[serde(default)]
    pub client_secret_file: Option<PathBuf>,
    /// Scopes asked for (default `openid`).
    #[serde(default = "default_scopes")]
    pub scopes: Vec<String>,
    /// The RFC 8707 resource asked for, when the provider issues a JWT
    /// access token for Pinfold's audience only when named one.
    #[serde(default)]
    pub resource: Option<String>,
}

fn default_name() -> String {
    "your identity provider".into()
}

fn default_scopes() -> Vec<String> {
    vec!["openid".into()]
}

impl fmt::Debug for ConsoleOidcSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConsoleOidcSettings")
            .field("name", &self.name)
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("client_secret_file", &self.client_secret_file)
            .field("scopes", &self.scopes)
            .field("resource", &self.resource)
            .finish()
    }
}

impl ConsoleConfig {
    /// Checks `[console]`: the session lifetime, and an OIDC client's
    /// issuer among `issuers`, its client id, one secret source at most,
    /// and `public_url` set (the redirect URI is built from it).
    pub fn validate(&self, issuers: &[String], public_url: &str) -> anyhow::Result<()> {
        if !(60..=86_400).contains(&self.session_ttl_secs) {
            bail!("console.session_ttl_secs must be between 60 and 86400");
        }
        let Some(o) = &self.oidc else { return Ok(()) };
        if !issuers.contains(&o.issuer) {
            bail!(
                "console.oidc.issuer: {:?} is not one of auth.issuers (the console signs in only with an issuer whose tokens the API accepts)",
                o.issuer
            );
        }
        if o.client_id.is_empty() {
            bail!("console.oidc.client_id must not be empty");
        }
        if o.client_secret.is_some() && o.client_secret_file.is_some() {
            bail!("console.oidc: set client_secret or client_secret_file, not both");
        }
        if public_url.is_empty() {
            bail!(
                "console.oidc needs public_url: the redirect URI is <public_url>/console/callback"
            );
        }
        Ok(())
    }

    /// The client secret, from the setting or its file.
    pub fn client_secret(o: &ConsoleOidcSettings) -> anyhow::Result<Option<String>> {
        if let Some(s) = &o.client_secret {
            return Ok(Some(s.clone()));
        }
        match &o.client_secret_file {
            Some(p) => Ok(Some(
                std::fs::read_to_string(p)
                    .with_context(|| format!("console.oidc.client_secret_file {}", p.display()))?
                    .trim()
                    .to_owned(),
            )),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oidc(issuer: &str) -> ConsoleOidcSettings {
        ConsoleOidcSettings {
            name: default_name(),
            issuer: issuer.into(),
            client_id: "console".into(),
            client_secret: Some("s3cret-value".into()),
            client_secret_file: None,
            scopes: default_scopes(),
            resource: None,
        }
    }

    #[test]
    fn the_console_signs_in_only_with_an_issuer_the_api_trusts() {
        let issuers = vec!["https://idp.example".to_owned()];
        let mut c = ConsoleConfig {
            oidc: Some(oidc("https://other.example")),
            ..ConsoleConfig::default()
        };
        let e = c
            .validate(&issuers, "https://pinfold.example")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("console.oidc.issuer"), "{e}");
        c.oidc = Some(oidc("https://idp.example"));
        c.validate(&issuers, "https://pinfold.example").unwrap();
        let e = c.validate(&issuers, "").unwrap_err().to_string();
        assert!(e.contains("public_url"), "{e}");
        assert!(!format!("{:?}", c.oidc).contains("s3cret"));
        c.session_ttl_secs = 10;
        assert!(c.validate(&issuers, "https://pinfold.example").is_err());
    }
}
