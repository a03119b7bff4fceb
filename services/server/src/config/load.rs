//! Reading the configuration: defaults, then the TOML file (or
//! `$PINFOLD_CONFIG`), then the `PINFOLD_*` environment (nested keys joined
//! by `__`), then the command-line flags, with figment; and the `PINFOLD_*`
//! variables that name no setting, which `serve` warns about.

use std::path::{Path, PathBuf};

use anyhow::bail;
use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::Serialize;

use super::root::Config;

/// Flags given on the command line (each overrides file and environment).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Overrides {
    /// `--listen`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// `--data-dir`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    /// `--database-url`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database_url: Option<String>,
    /// `--services`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub services: Option<Vec<String>>,
    /// `--dev`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dev: Option<bool>,
}

impl Config {
    /// Loads defaults, then `file` (or `$PINFOLD_CONFIG`), then `PINFOLD_*`, then flags.
    pub fn load(file: Option<&Path>, flags: &Overrides) -> anyhow::Result<Config> {
        let mut fig = Figment::from(Serialized::defaults(Config::default()));
        let file = file
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("PINFOLD_CONFIG").map(PathBuf::from));
        if let Some(path) = &file {
            if !path.exists() {
                bail!("config file {} does not exist", path.display());
            }
            fig = fig.merge(Toml::file(path));
        }
        let known = config_keys();
        fig = fig
            .merge(
                Env::prefixed("PINFOLD_")
                    .filter(move |k| known.iter().any(|f| env_key_matches(k.as_str(), f)))
                    .split("__"),
            )
            .merge(Serialized::defaults(flags));
        let cfg: Config = fig.extract().map_err(|e| {
            let mut msg = format!("invalid configuration: {e}");
            if let Some(path) = &file {
                msg.push_str(&format!(" (config file {})", path.display()));
            }
            anyhow::anyhow!(msg)
        })?;
        cfg.validate()?;
        Ok(cfg)
    }
}

/// The top-level configuration keys (what `PINFOLD_<KEY>` may name).
pub fn config_keys() -> Vec<String> {
    let mut keys: Vec<String> = match serde_json::to_value(Config::default()) {
        Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
        _ => Vec::new(),
    };
    // Secrets are never serialised, but may come from the environment.
    keys.push("encryption_key".into());
    keys.push("encryption_keys_old".into());
    keys.push("database_owner_url".into());
    keys
}

fn env_key_matches(key: &str, field: &str) -> bool {
    let key = key.to_ascii_lowercase();
    key == field
        || key
            .strip_prefix(field)
            .is_some_and(|rest| rest.starts_with("__"))
}

/// `PINFOLD_*` environment variables that name no setting (ignored; `serve`
/// warns about them, since a typo would otherwise go unnoticed). Variables
/// the tooling uses (`PINFOLD_CONFIG`, `PINFOLD_BIN`, `PINFOLD_REALDATA`,
/// `PINFOLD_TEST_*`, `PINFOLD_CI_*`) are not reported.
pub fn unknown_env_vars() -> Vec<String> {
    let known = config_keys();
    let mut out: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter_map(|k| k.strip_prefix("PINFOLD_").map(str::to_owned))
        .filter(|k| !matches!(k.as_str(), "CONFIG" | "BIN" | "REALDATA"))
        .filter(|k| !k.starts_with("TEST_") && !k.starts_with("CI_"))
        .filter(|k| !known.iter().any(|f| env_key_matches(k, f)))
        .map(|k| format!("PINFOLD_{k}"))
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_keys_match_settings_and_nested_settings() {
        assert!(env_key_matches("DATABASE_URL", "database_url"));
        assert!(env_key_matches("AUTH__LEEWAY_SECS", "auth"));
        assert!(!env_key_matches("AUTHX", "auth"));
        assert!(!env_key_matches("BIN", "body_limit_bytes"));
        let keys = config_keys();
        assert!(keys.contains(&"listen".to_owned()));
        assert!(keys.contains(&"encryption_key".to_owned()));
    }

    fn load_toml(text: &str) -> anyhow::Result<Config> {
        let file =
            std::env::temp_dir().join(format!("pinfold-config-{}.toml", uuid::Uuid::new_v4()));
        std::fs::write(&file, text).unwrap();
        let cfg = Config::load(Some(&file), &Overrides::default());
        let _ = std::fs::remove_file(&file);
        cfg
    }

    const GITHUB_ISSUER: &str = r#"
[[auth.issuers]]
issuer = "https://token.actions.githubusercontent.com"
audience = "https://pinfold.example"
algorithms = ["RS256"]
jwks_url = "https://token.actions.githubusercontent.com/.well-known/jwks"
"#;

    #[test]
    fn claim_rules_load_from_toml_in_order() {
        let cfg = load_toml(&format!(
            r#"{GITHUB_ISSUER}
[[auth.issuers.rules]]
match = {{ repository_owner = "acme", job_workflow_ref = "acme/infra/.github/workflows/pinfold.yml@refs/heads/main" }}
tenant = "acme"
roles = ["publisher"]

[[auth.issuers.rules]]
match = {{ repository = "acme/infra", ref = "refs/tags/*" }}
tenant = "acme"
roles = ["reader", "client"]
"#
        ))
        .unwrap();
        let rules = &cfg.auth.issuers[0].rules;
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0].matches["repository_owner"], "acme");
        assert_eq!(rules[1].roles, vec!["reader", "client"]);
        let r = rules[1].rule().unwrap();
        assert_eq!(
            r.roles(),
            &[pinfold_http::Role::Reader, pinfold_http::Role::Client]
        );
        let built = crate::serve::issuer_configs(&cfg).unwrap();
        assert!(matches!(
            &built[0].mapping,
            pinfold_http::auth::ClaimMapping::Rules(r) if r.len() == 2
        ));
        // No rules: the token's own claims.
        let plain = load_toml(GITHUB_ISSUER).unwrap();
        assert!(matches!(
            crate::serve::issuer_configs(&plain).unwrap()[0].mapping,
            pinfold_http::auth::ClaimMapping::FromToken
        ));
    }

    #[test]
    fn bad_claim_rules_are_named_by_position_and_field() {
        let rule = |body: &str| {
            let text = format!(
                "{GITHUB_ISSUER}\n[[auth.issuers.rules]]\nmatch = {{ repository_owner = \"acme\" }}\ntenant = \"acme\"\nroles = [\"reader\"]\n\n[[auth.issuers.rules]]\n{body}\n"
            );
            format!("{:#}", load_toml(&text).unwrap_err())
        };
        for (body, want) in [
            (
                "match = { repository_owner = \"acme\" }\ntenant = \"Not A Tenant\"\nroles = [\"reader\"]",
                "auth.issuers[0].rules[1].tenant: ",
            ),
            (
                "match = { repository_owner = \"acme\" }\ntenant = \"acme\"\nroles = [\"platform\"]",
                "auth.issuers[0].rules[1].roles[0]: platform cannot",
            ),
            (
                "match = {}\ntenant = \"acme\"\nroles = [\"reader\"]",
                "auth.issuers[0].rules[1].match: name at least one claim",
            ),
            (
                "match = { ref = \"refs/*/main\" }\ntenant = \"acme\"\nroles = [\"reader\"]",
                "auth.issuers[0].rules[1].match.ref: ",
            ),
            (
                "match = { repository_owner = \"acme\" }\ntenant = \"acme\"\nroles = []",
                "auth.issuers[0].rules[1].roles: list at least one role",
            ),
        ] {
            let e = rule(body);
            assert!(e.contains(want), "{body}: {e}");
        }
        // Claims are strings: a number is refused when the file is read.
        let e = rule("match = { repository_id = 123 }\ntenant = \"acme\"\nroles = [\"reader\"]");
        assert!(
            e.contains("expected a string") && e.contains("rules.1.match.repository_id"),
            "{e}"
        );
        // An unknown key in a rule is a typo, not a silently ignored setting.
        let e = rule(
            "match = { repository_owner = \"acme\" }\ntenant = \"acme\"\nroles = [\"reader\"]\nrole = \"admin\"",
        );
        assert!(e.contains("unknown field: found `role`"), "{e}");
    }

    #[test]
    fn old_encryption_keys_load_as_a_list_or_commas_and_are_checked_by_position() {
        use base64::Engine as _;
        let key = |b: u8| base64::engine::general_purpose::STANDARD.encode([b; 32]);
        let (k1, k2, k3) = (key(1), key(2), key(3));
        let dev = "dev = true\n";
        let cfg = load_toml(&format!(
            "{dev}encryption_key = \"{k3}\"\nencryption_keys_old = [\"{k1}\", \"{k2}\"]\n"
        ))
        .unwrap();
        assert_eq!(cfg.encryption_keys_old, [k1.clone(), k2.clone()]);
        // One comma-separated string, as PINFOLD_ENCRYPTION_KEYS_OLD holds it.
        let commas = load_toml(&format!(
            "{dev}encryption_key = \"{k3}\"\nencryption_keys_old = \"{k1}, {k2}\"\n"
        ))
        .unwrap();
        assert_eq!(commas.encryption_keys_old, cfg.encryption_keys_old);
        let ring = crate::registry_wiring::keyring(&cfg).unwrap();
        let kid = |b: u8| {
            pinfold_registry::keys::Keyring::new(&[b; 32])
                .unwrap()
                .current_kid()
                .to_owned()
        };
        assert_eq!(ring.current_kid(), kid(3));
        assert_eq!(ring.old_kids().collect::<Vec<_>>(), [kid(1), kid(2)]);
        // Secrets: never serialised, but settable from the environment.
        let shown = serde_json::to_string(&cfg).unwrap();
        assert!(!shown.contains(&k1) && !shown.contains(&k3), "{shown}");
        assert!(config_keys().contains(&"encryption_keys_old".to_owned()));
        // A bad or repeated old key is named by position, never shown.
        for (old, want) in [
            (
                format!("[\"{k1}\", \"c2hvcnQ=\"]"),
                "encryption_keys_old[1]: the encryption key must be 32 bytes",
            ),
            (
                format!("[\"{k3}\"]"),
                "encryption_keys_old[0]: encryption key ",
            ),
        ] {
            let cfg = load_toml(&format!(
                "{dev}encryption_key = \"{k3}\"\nencryption_keys_old = {old}\n"
            ))
            .unwrap();
            let e = format!("{:#}", crate::registry_wiring::keyring(&cfg).err().unwrap());
            assert!(e.starts_with(want), "{e}");
            assert!(!e.contains(&k1) && !e.contains(&k3), "{e}");
        }
    }

    #[test]
    fn metrics_protection_loads_from_toml_and_is_checked() {
        let cfg = load_toml(
            "[metrics]\ntoken = \"0123456789abcdef0123\"\nallow_from = [\"10.0.0.0/8\", \"::1\"]\n",
        )
        .unwrap();
        assert_eq!(cfg.metrics.allow_from, ["10.0.0.0/8", "::1"]);
        let access = cfg.metrics.access().unwrap();
        assert!(access.needs_token() && access.allow_from().len() == 2);
        assert!(
            !format!("{cfg:?}").contains("0123456789abcdef0123"),
            "the token never shows"
        );
        // One comma-separated string works as in the environment.
        let cfg = load_toml("[metrics]\nallow_from = \"127.0.0.1, 10.0.0.0/8\"\n").unwrap();
        assert_eq!(cfg.metrics.allow_from, ["127.0.0.1", "10.0.0.0/8"]);
        assert!(Config::default().metrics.access().unwrap().is_open());
        for (text, want) in [
            (
                "[metrics]\nallow_from = [\"nope\"]",
                "metrics.allow_from[0]",
            ),
            (
                "[metrics]\ntoken = \"short\"",
                "metrics.token: the scrape token must be",
            ),
            (
                "[metrics]\ntokn = \"0123456789abcdef0123\"",
                "unknown field",
            ),
        ] {
            let e = format!("{:#}", load_toml(text).unwrap_err());
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn rate_and_connection_limits_load_and_are_checked() {
        let cfg = load_toml(
            "[rate_limits]\nenabled = false\n[rate_limits.publish]\ntenant_rate = 0.5\ntenant_burst = 3\nprincipal_rate = 1\nprincipal_burst = 2\n[connections]\nheader_read_timeout_secs = 3\n",
        )
        .unwrap();
        assert!(!cfg.rate_limits.enabled);
        assert!(
            cfg.rate_limits
                .limiter(pinfold_http::ratelimit::Clock::system())
                .is_none()
        );
        assert_eq!(cfg.rate_limits.publish.tenant_rate, 0.5);
        assert_eq!(cfg.rate_limits.publish.principal_rate, 1.0);
        assert_eq!(cfg.rate_limits.reads.tenant_burst, 2000, "defaults kept");
        assert_eq!(cfg.connections.header_read_timeout_secs, 3);
        assert_eq!(cfg.connections.max_connections, 10_000);
        assert!(
            Config::default()
                .rate_limits
                .limiter(pinfold_http::ratelimit::Clock::system())
                .is_some()
        );
        for (text, want) in [
            (
                "[rate_limits.plan]\ntenant_rate = 0\ntenant_burst = 1\nprincipal_rate = 1\nprincipal_burst = 1",
                "rate_limits.plan.tenant_rate",
            ),
            (
                "[rate_limits.grants]\ntenant_rate = 1\ntenant_burst = 1\nprincipal_rate = 1\nprincipal_burst = 0",
                "rate_limits.grants.principal_burst",
            ),
            ("[rate_limits]\nmax_buckets = 10", "rate_limits.max_buckets"),
            (
                "[connections]\nmax_connections = 0",
                "connections.max_connections",
            ),
            (
                "[connections]\nheader_read_timeout_secs = 0",
                "connections.header_read_timeout_secs",
            ),
        ] {
            let e = format!("{:#}", load_toml(text).unwrap_err());
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
