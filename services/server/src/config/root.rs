//! The whole configuration ([`Config`]): its top-level settings and their
//! defaults, what they derive (the listen address, the database, the
//! services, the log format, dev mode), and [`Config::validate`], which
//! checks every setting in a fixed order and names the first bad one. Each
//! section checks its own settings; this module only decides the order.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, bail};
use pinfold_core::card::Limits;
use serde::{Deserialize, Serialize};

use super::auth::AuthConfig;
use super::connections::ConnectionSettings;
use super::console::ConsoleConfig;
use super::database::{Backend, PostgresConfig};
use super::egress::EgressSettings;
use super::metrics::MetricsSettings;
use super::rate_limits::RateLimitSettings;
use super::resolve::ResolveSettings;
use crate::services::Service;
use crate::telemetry::{LogFormat, TelemetryConfig};

/// The whole configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address to listen on.
    pub listen: String,
    /// The URL clients reach this server at (`https://pinfold.example`):
    /// Pinfold's resource identifier in its RFC 9728 metadata and in the
    /// `resource_metadata` of every `401`. Empty: each request's `Host`
    /// names it, over `http` (fine on loopback, wrong behind TLS).
    #[serde(default)]
    pub public_url: String,
    /// Directory for the SQLite database and the dev signing key.
    pub data_dir: PathBuf,
    /// `postgres://...` or `sqlite://...`; empty means SQLite in `data_dir`.
    pub database_url: String,
    /// PostgreSQL only: the role owning the schema, which applies
    /// migrations (`pinfold migrate`, and `migrate_on_start`), while
    /// `database_url` names the runtime login role (a member of
    /// `pinfold_runtime`: owns nothing, no superuser, no `BYPASSRLS`). Unset:
    /// migrations run over `database_url`. A secret (it may hold a
    /// password): never serialised.
    #[serde(default, skip_serializing)]
    pub database_owner_url: Option<String>,
    /// Services whose routes this process serves: any of `tenancy`,
    /// `registry`, `resolve`, `scope`, `guard` (a list, or one comma-separated string
    /// as in `PINFOLD_SERVICES=tenancy,registry`). The operational routes are
    /// always served. See [`crate::services`].
    #[serde(deserialize_with = "list_or_commas")]
    pub services: Vec<String>,
    /// Dev mode: generate a signing key in `data_dir` and print tokens.
    pub dev: bool,
    /// Apply pending migrations at startup (else refuse to start while any are pending).
    pub migrate_on_start: bool,
    /// Largest accepted request body, in bytes.
    pub body_limit_bytes: usize,
    /// Per-request timeout, in seconds.
    pub request_timeout_secs: u64,
    /// Graceful-shutdown grace period, in seconds.
    pub shutdown_grace_secs: u64,
    /// `text` or `json`.
    pub log_format: String,
    /// The current encryption key, 32 random bytes in base64: every secret
    /// stored from now on (attestation keys, upstream headers, client
    /// secrets, PKCE verifiers) is sealed under keys derived from it.
    /// Required outside dev mode (dev mode keeps one in the data directory).
    /// A secret: never serialised.
    #[serde(default, skip_serializing)]
    pub encryption_key: Option<String>,
    /// Earlier encryption keys, base64 like `encryption_key`: what was
    /// sealed under them still opens, nothing new is sealed under them, and
    /// `pinfold keys reseal` moves it under `encryption_key`. A list, or one
    /// comma-separated string (`PINFOLD_ENCRYPTION_KEYS_OLD`). Secrets:
    /// never serialised.
    #[serde(default, skip_serializing, deserialize_with = "list_or_commas")]
    pub encryption_keys_old: Vec<String>,
    /// Token verification.
    pub auth: AuthConfig,
    /// PostgreSQL pool.
    pub postgres: PostgresConfig,
    /// Logs, traces and metrics export (`[telemetry]`).
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    /// Limits on published documents (`[limits]`): size, counts, depth.
    /// Everything that re-reads a stored document uses the same limits.
    #[serde(default)]
    pub limits: Limits,
    /// The resolve cache (`[resolve]`): session lifetimes, cache size,
    /// upstream timeouts.
    #[serde(default)]
    pub resolve: ResolveSettings,
    /// Rate limits (`[rate_limits]`): token buckets per tenant and per
    /// caller, per route class. Per process: see `docs/OPERATIONS.md`.
    #[serde(default)]
    pub rate_limits: RateLimitSettings,
    /// Connection limits (`[connections]`): header read timeout, most open
    /// connections.
    #[serde(default)]
    pub connections: ConnectionSettings,
    /// Outbound requests (`[egress]`): loopback for development, the
    /// allow-list of the server's own requests.
    #[serde(default)]
    pub egress: EgressSettings,
    /// Who may scrape `/metrics` (`[metrics]`): a bearer token, client
    /// address ranges. Nothing set: anyone.
    #[serde(default)]
    pub metrics: MetricsSettings,
    /// The review console (`[console]`): on or off, session lifetime, its
    /// OAuth client at the identity provider.
    #[serde(default)]
    pub console: ConsoleConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            public_url: String::new(),
            data_dir: PathBuf::from("./pinfold-data"),
            database_url: String::new(),
            services: Service::ALL.map(|s| s.name().to_owned()).to_vec(),
            dev: false,
            migrate_on_start: true,
            body_limit_bytes: 2 * 1024 * 1024,
            request_timeout_secs: 30,
            shutdown_grace_secs: 20,
            log_format: "text".into(),
            encryption_key: None,
            encryption_keys_old: Vec::new(),
            database_owner_url: None,
            auth: AuthConfig {
                leeway_secs: 30,
                jwks_min_refetch_secs: 60,
                issuers: Vec::new(),
            },
            postgres: PostgresConfig {
                max_connections: 16,
                acquire_timeout_secs: 5,
                statement_timeout_secs: 10,
            },
            telemetry: TelemetryConfig::default(),
            limits: Limits::default(),
            resolve: ResolveSettings::default(),
            rate_limits: RateLimitSettings::default(),
            connections: ConnectionSettings::default(),
            egress: EgressSettings::default(),
            metrics: MetricsSettings::default(),
            console: ConsoleConfig::default(),
        }
    }
}

impl Config {
    /// Checks every setting; the error names the first bad one.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.listen_addr()?;
        if !self.public_url.is_empty() {
            let u = crate::url_policy::http_url(&self.public_url)
                .map_err(|e| anyhow::anyhow!("public_url: {e}"))?;
            if u.query().is_some() || u.fragment().is_some() {
                bail!("public_url must have no query or fragment");
            }
        }
        if self.body_limit_bytes == 0 {
            bail!("body_limit_bytes must be greater than 0");
        }
        if self.request_timeout_secs == 0 {
            bail!("request_timeout_secs must be greater than 0");
        }
        if !matches!(self.log_format.as_str(), "text" | "json") {
            bail!(
                "log_format must be \"text\" or \"json\", not {:?}",
                self.log_format
            );
        }
        self.services()?;
        self.resolve.validate()?;
        self.rate_limits.validate()?;
        self.connections.validate()?;
        self.egress.validate()?;
        self.metrics.validate()?;
        let l = &self.limits;
        for (name, value) in [
            ("max_document_bytes", l.max_document_bytes),
            ("max_tools", l.max_tools),
            ("max_items", l.max_items),
            ("max_depth", l.max_depth),
            ("max_possibilities", l.max_possibilities),
            ("max_name_chars", l.max_name_chars),
            ("max_card_description_chars", l.max_card_description_chars),
        ] {
            if value == 0 {
                bail!("limits.{name} must be greater than 0");
            }
        }
        self.auth.validate(self.dev_mode())?;
        let issuers: Vec<String> = self.auth.issuers.iter().map(|i| i.issuer.clone()).collect();
        self.console.validate(&issuers, &self.public_url)?;
        self.postgres.validate()?;
        self.backend()?;
        crate::telemetry::validate_config(&self.telemetry)?;
        Ok(())
    }

    /// The parsed listen address.
    pub fn listen_addr(&self) -> anyhow::Result<SocketAddr> {
        self.listen.parse().with_context(|| {
            format!(
                "listen: {:?} is not an address like 127.0.0.1:8080",
                self.listen
            )
        })
    }

    /// The database this configuration points at.
    pub fn backend(&self) -> anyhow::Result<Backend> {
        super::database::backend(&self.database_url, &self.data_dir)
    }

    /// `database_owner_url` when set: a PostgreSQL URL, and only beside a
    /// PostgreSQL `database_url`.
    pub fn owner_url(&self) -> anyhow::Result<Option<String>> {
        super::database::owner_url(
            self.database_owner_url.as_deref(),
            &self.database_url,
            &self.data_dir,
        )
    }

    /// The services this process serves, sorted, without duplicates.
    pub fn services(&self) -> anyhow::Result<Vec<Service>> {
        crate::services::parse_list(&self.services).map_err(|e| anyhow::anyhow!("services: {e}"))
    }

    /// The log line format (`log_format`, checked by [`Config::validate`]).
    pub fn log_format(&self) -> LogFormat {
        if self.log_format == "json" {
            LogFormat::Json
        } else {
            LogFormat::Text
        }
    }

    /// Whether outbound requests may reach loopback: as `[egress]` says,
    /// else only in dev mode on a loopback listener.
    pub fn egress_loopback(&self) -> bool {
        let on_loopback = self.listen_addr().is_ok_and(|a| a.ip().is_loopback());
        self.egress.loopback(self.dev_mode() && on_loopback)
    }

    /// Whether dev mode is on: explicitly, or because no issuer is configured.
    pub fn dev_mode(&self) -> bool {
        self.dev || self.auth.issuers.is_empty()
    }
}

/// A list of strings, or one string of comma-separated items (what an
/// environment variable can hold).
pub(super) fn list_or_commas<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum ListOrCommas {
        List(Vec<String>),
        Commas(String),
    }
    Ok(match ListOrCommas::deserialize(d)? {
        ListOrCommas::List(l) => l,
        ListOrCommas::Commas(s) => s
            .split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(str::to_owned)
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        Config::default().validate().unwrap();
        assert_eq!(
            Config::default().backend().unwrap(),
            Backend::Sqlite("sqlite://./pinfold-data/pinfold.db".into())
        );
    }

    #[test]
    fn bad_settings_are_named() {
        let c = Config {
            listen: "nope".into(),
            ..Config::default()
        };
        assert!(c.validate().unwrap_err().to_string().starts_with("listen:"));
        let mut c = Config::default();
        c.auth.leeway_secs = 31;
        assert!(c.validate().unwrap_err().to_string().contains("leeway"));
        let c = Config {
            database_url: "mysql://x".into(),
            ..Config::default()
        };
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("database_url")
        );
    }

    #[test]
    fn services_default_to_all_and_are_checked() {
        assert_eq!(Config::default().services().unwrap(), Service::ALL.to_vec());
        let c = Config {
            services: vec!["registry".into(), "billing".into()],
            ..Config::default()
        };
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.starts_with("services: unknown service \"billing\""),
            "{e}"
        );
        let c = Config {
            services: Vec::new(),
            ..Config::default()
        };
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("at least one")
        );
    }
}
