//! Configuration: defaults → TOML file → `PINFOLD_*` environment → flags.
//!
//! Nested keys use `__` in the environment (`PINFOLD_AUTH__LEEWAY_SECS=10`).
//! [`Config::validate`] runs at startup and names the first bad setting.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use pinfold_core::card::Limits;
use serde::{Deserialize, Serialize};

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
    /// `registry`, `resolve`, `scope` (a list, or one comma-separated string
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
    /// 32 random bytes, base64: seals the tenants' attestation keys at rest.
    /// Required outside dev mode (dev mode keeps one in the data directory).
    #[serde(default, skip_serializing)]
    pub encryption_key: Option<String>,
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
}

/// Rate limits of one route class: a sustained rate (requests per second)
/// and a burst, for the tenant as a whole and for each caller in it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassLimits {
    /// Requests per second one tenant may sustain.
    pub tenant_rate: f64,
    /// Requests one tenant may make at once after a quiet period.
    pub tenant_burst: u32,
    /// Requests per second one caller (issuer and subject) may sustain.
    pub principal_rate: f64,
    /// Requests one caller may make at once after a quiet period.
    pub principal_burst: u32,
}

impl ClassLimits {
    const fn new(
        tenant_rate: f64,
        tenant_burst: u32,
        principal_rate: f64,
        principal_burst: u32,
    ) -> Self {
        ClassLimits {
            tenant_rate,
            tenant_burst,
            principal_rate,
            principal_burst,
        }
    }
}

/// `[rate_limits]`: token buckets charged when a request is admitted to a
/// tenant (see `pinfold_http::ratelimit`); over either → `429 rate_limited`
/// with `Retry-After`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitSettings {
    /// Whether requests are limited at all.
    pub enabled: bool,
    /// Most buckets this process keeps (each is a few dozen bytes); idle
    /// full buckets are dropped first.
    pub max_buckets: usize,
    /// `PUT .../versions/{version}`, `POST .../import/server-json`.
    pub publish: ClassLimits,
    /// Every `/sessions` route (opening, resolving, closing, listing).
    pub resolve: ClassLimits,
    /// `POST .../scopes/plan`.
    pub plan: ClassLimits,
    /// Grants, their code exchange, provider profiles.
    pub grants: ClassLimits,
    /// Every other tenant route.
    pub reads: ClassLimits,
}

impl Default for RateLimitSettings {
    fn default() -> Self {
        RateLimitSettings {
            enabled: true,
            max_buckets: 100_000,
            publish: ClassLimits::new(5.0, 50, 2.0, 20),
            resolve: ClassLimits::new(500.0, 1000, 200.0, 400),
            plan: ClassLimits::new(50.0, 100, 20.0, 50),
            grants: ClassLimits::new(20.0, 50, 5.0, 20),
            reads: ClassLimits::new(1000.0, 2000, 500.0, 1000),
        }
    }
}

impl RateLimitSettings {
    /// Each class with its limits, in [`pinfold_http::ratelimit::RouteClass::ALL`] order.
    pub fn classes(&self) -> [(pinfold_http::ratelimit::RouteClass, ClassLimits); 5] {
        use pinfold_http::ratelimit::RouteClass as C;
        [
            (C::Publish, self.publish),
            (C::Resolve, self.resolve),
            (C::Plan, self.plan),
            (C::Grants, self.grants),
            (C::Reads, self.reads),
        ]
    }

    /// The limiter these settings describe (`None` when disabled).
    pub fn limiter(
        &self,
        clock: pinfold_http::ratelimit::Clock,
    ) -> Option<std::sync::Arc<pinfold_http::ratelimit::RateLimiter>> {
        use pinfold_http::ratelimit::{Limits, Rate, RateLimiter};
        if !self.enabled {
            return None;
        }
        let classes = self.classes();
        let tenant = classes.map(|(_, l)| Rate {
            per_second: l.tenant_rate,
            burst: l.tenant_burst,
        });
        let principal = classes.map(|(_, l)| Rate {
            per_second: l.principal_rate,
            burst: l.principal_burst,
        });
        Some(std::sync::Arc::new(RateLimiter::new(
            Limits {
                tenant,
                principal,
                max_buckets: self.max_buckets,
            },
            clock,
        )))
    }

    fn validate(&self) -> anyhow::Result<()> {
        if self.max_buckets < 1024 {
            bail!("rate_limits.max_buckets must be at least 1024");
        }
        for (class, l) in self.classes() {
            let at = format!("rate_limits.{}", class.name());
            for (name, rate) in [
                ("tenant_rate", l.tenant_rate),
                ("principal_rate", l.principal_rate),
            ] {
                if !(rate.is_finite() && rate > 0.0) {
                    bail!("{at}.{name} must be a number greater than 0");
                }
            }
            for (name, burst) in [
                ("tenant_burst", l.tenant_burst),
                ("principal_burst", l.principal_burst),
            ] {
                if burst == 0 {
                    bail!("{at}.{name} must be at least 1");
                }
            }
        }
        Ok(())
    }
}

/// `[connections]`: what one client connection may hold.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConnectionSettings {
    /// Seconds a client has to send a request's complete header section
    /// (per request, also between requests on a kept-alive connection);
    /// later, the connection is closed.
    pub header_read_timeout_secs: u64,
    /// Most connections open at once; the listener stops accepting while
    /// this many are open.
    pub max_connections: usize,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        ConnectionSettings {
            header_read_timeout_secs: 10,
            max_connections: 10_000,
        }
    }
}

/// Resolve-cache settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResolveSettings {
    /// Session lifetime when a request names none, in seconds.
    pub default_session_ttl_secs: u64,
    /// Longest session lifetime a request may ask for, in seconds.
    pub max_session_ttl_secs: u64,
    /// Bytes of resolved answers this process caches (all tenants).
    pub cache_capacity_bytes: u64,
    /// Percentage of the cache one tenant may fill (1 to 100): a tenant
    /// over its share evicts its own entries, never another tenant's.
    pub cache_tenant_share_percent: u8,
    /// Total time for one upstream exchange (connect, initialize, resolve),
    /// in milliseconds.
    pub upstream_timeout_ms: u64,
    /// TCP connect timeout towards an upstream, in milliseconds.
    pub upstream_connect_timeout_ms: u64,
    /// Largest upstream answer read, in bytes: a JSON body, and each
    /// server-sent event of a streamed answer (default 1 MiB, at least
    /// 4 KiB). A larger one is a transport failure (fallback).
    pub upstream_max_response_bytes: u64,
    /// Fraction (0 to 1) of cache hits re-fetched from the upstream to
    /// check that it still answers the same (determinism sampling).
    pub recheck_rate: f64,
}

impl ResolveSettings {
    /// The bytes one tenant may hold.
    pub fn cache_tenant_share_bytes(&self) -> u64 {
        let share = u128::from(self.cache_capacity_bytes)
            * u128::from(self.cache_tenant_share_percent)
            / 100;
        u64::try_from(share).unwrap_or(u64::MAX)
    }
}

impl Default for ResolveSettings {
    fn default() -> Self {
        ResolveSettings {
            default_session_ttl_secs: 3600,
            max_session_ttl_secs: 86_400,
            cache_capacity_bytes: 256 * 1024 * 1024,
            cache_tenant_share_percent: 25,
            upstream_timeout_ms: 5_000,
            upstream_connect_timeout_ms: 2_000,
            upstream_max_response_bytes: 1024 * 1024,
            recheck_rate: 0.0,
        }
    }
}

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

/// PostgreSQL pool settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresConfig {
    /// Largest number of connections per replica.
    pub max_connections: u32,
    /// Seconds a request waits for a connection.
    pub acquire_timeout_secs: u64,
    /// Server-side statement timeout, in seconds.
    pub statement_timeout_secs: u64,
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
        }
    }
}

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

/// Which database a configuration points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite file.
    Sqlite(String),
    /// A PostgreSQL server.
    Postgres(String),
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
        let r = &self.resolve;
        if r.cache_capacity_bytes < 1024 * 1024 {
            bail!("resolve.cache_capacity_bytes must be at least 1 MiB");
        }
        if !(1..=100).contains(&r.cache_tenant_share_percent) {
            bail!("resolve.cache_tenant_share_percent must be between 1 and 100");
        }
        if r.upstream_timeout_ms == 0 || r.upstream_connect_timeout_ms == 0 {
            bail!(
                "resolve.upstream_timeout_ms and upstream_connect_timeout_ms must be greater than 0"
            );
        }
        if r.upstream_max_response_bytes < 4096 {
            bail!("resolve.upstream_max_response_bytes must be at least 4096");
        }
        if !(0.0..=1.0).contains(&r.recheck_rate) {
            bail!("resolve.recheck_rate must be between 0 and 1");
        }
        if r.max_session_ttl_secs == 0 {
            bail!("resolve.max_session_ttl_secs must be greater than 0");
        }
        if r.default_session_ttl_secs == 0 || r.default_session_ttl_secs > r.max_session_ttl_secs {
            bail!(
                "resolve.default_session_ttl_secs must be between 1 and resolve.max_session_ttl_secs ({})",
                r.max_session_ttl_secs
            );
        }
        self.rate_limits.validate()?;
        if self.connections.header_read_timeout_secs == 0 {
            bail!("connections.header_read_timeout_secs must be greater than 0");
        }
        if self.connections.max_connections == 0 {
            bail!("connections.max_connections must be greater than 0");
        }
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
        if self.auth.leeway_secs > pinfold_http::auth::MAX_LEEWAY_SECS {
            bail!(
                "auth.leeway_secs must be at most 30 (got {})",
                self.auth.leeway_secs
            );
        }
        for (i, iss) in self.auth.issuers.iter().enumerate() {
            let at = format!("auth.issuers[{i}]");
            if iss.issuer.is_empty() {
                bail!("{at}.issuer must not be empty");
            }
            // Issuers are looked up by their `iss`: a second entry for the
            // same URL would silently replace the first (its keys, audience
            // and rules).
            if let Some(k) = self.auth.issuers[..i]
                .iter()
                .position(|o| o.issuer == iss.issuer)
            {
                bail!(
                    "{at}.issuer: repeats auth.issuers[{k}] ({:?}); list each issuer once",
                    iss.issuer
                );
            }
            if self.dev_mode() && iss.issuer == crate::devkeys::DEV_ISSUER {
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
        if self.postgres.max_connections == 0 {
            bail!("postgres.max_connections must be greater than 0");
        }
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
        let url = self.database_url.trim();
        if url.is_empty() {
            let path = self.data_dir.join("pinfold.db");
            return Ok(Backend::Sqlite(format!("sqlite://{}", path.display())));
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Backend::Postgres(url.to_owned()))
        } else if url.starts_with("sqlite:") {
            Ok(Backend::Sqlite(url.to_owned()))
        } else {
            bail!("database_url must start with postgres://, postgresql:// or sqlite:")
        }
    }

    /// `database_owner_url` when set: a PostgreSQL URL, and only beside a
    /// PostgreSQL `database_url`.
    pub fn owner_url(&self) -> anyhow::Result<Option<String>> {
        let Some(url) = self
            .database_owner_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
        else {
            return Ok(None);
        };
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            bail!("database_owner_url must start with postgres:// or postgresql://");
        }
        if !matches!(self.backend()?, Backend::Postgres(_)) {
            bail!("database_owner_url is for PostgreSQL; database_url names SQLite");
        }
        Ok(Some(url.to_owned()))
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

    /// Whether dev mode is on: explicitly, or because no issuer is configured.
    pub fn dev_mode(&self) -> bool {
        self.dev || self.auth.issuers.is_empty()
    }
}

/// A list of strings, or one string of comma-separated items (what an
/// environment variable can hold).
fn list_or_commas<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
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

/// The top-level configuration keys (what `PINFOLD_<KEY>` may name).
pub fn config_keys() -> Vec<String> {
    let mut keys: Vec<String> = match serde_json::to_value(Config::default()) {
        Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
        _ => Vec::new(),
    };
    // Secrets are never serialised, but may come from the environment.
    keys.push("encryption_key".into());
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

/// `database_url` with any password replaced by `***`, for messages.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..s + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
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
    fn bad_resolve_settings_are_named() {
        for (tweak, word) in [
            (
                (|r: &mut ResolveSettings| r.default_session_ttl_secs = 90_000) as fn(&mut _),
                "default_session_ttl_secs",
            ),
            (|r| r.max_session_ttl_secs = 0, "max_session_ttl_secs"),
            (
                |r| r.cache_tenant_share_percent = 0,
                "cache_tenant_share_percent",
            ),
            (
                |r| r.cache_tenant_share_percent = 101,
                "cache_tenant_share_percent",
            ),
            (|r| r.cache_capacity_bytes = 1000, "cache_capacity_bytes"),
            (|r| r.upstream_timeout_ms = 0, "upstream_timeout_ms"),
            (
                |r| r.upstream_max_response_bytes = 100,
                "upstream_max_response_bytes",
            ),
            (|r| r.recheck_rate = 1.5, "recheck_rate"),
        ] {
            let mut c = Config::default();
            tweak(&mut c.resolve);
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(word), "{word}: {e}");
        }
        let r = ResolveSettings::default();
        assert_eq!(r.cache_tenant_share_bytes(), 256 * 1024 * 1024 / 4);
    }

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
    fn env_keys_match_settings_and_nested_settings() {
        assert!(env_key_matches("DATABASE_URL", "database_url"));
        assert!(env_key_matches("AUTH__LEEWAY_SECS", "auth"));
        assert!(!env_key_matches("AUTHX", "auth"));
        assert!(!env_key_matches("BIN", "body_limit_bytes"));
        let keys = config_keys();
        assert!(keys.contains(&"listen".to_owned()));
        assert!(keys.contains(&"encryption_key".to_owned()));
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

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_url("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact_url("postgres://h/db"), "postgres://h/db");
    }
}
