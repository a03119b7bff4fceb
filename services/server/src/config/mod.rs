//! Configuration: defaults → TOML file → `PINFOLD_*` environment → flags.
//!
//! Nested keys use `__` in the environment (`PINFOLD_AUTH__LEEWAY_SECS=10`).
//! [`Config::validate`] runs at startup and names the first bad setting.
//!
//! | module | concern |
//! | --- | --- |
//! | `root` | the whole configuration ([`Config`]): its top-level settings, their defaults, what they derive (listen address, database, services, log format, dev mode), and the check of every setting in order |
//! | `load` | reading it: defaults, then the file, the environment and the flags ([`Config::load`], [`Overrides`]), and the `PINFOLD_*` variables that name no setting |
//! | `auth` | `[auth]`: token verification, the trusted issuers and their claim rules |
//! | `resolve` | `[resolve]`: session lifetimes, cache size, upstream timeouts |
//! | `rate_limits` | `[rate_limits]`: token buckets per route class, and the limiter they describe |
//! | `egress` | `[egress]`: loopback for development, the allow-list of the server's own requests, how many HTTP clients are kept |
//! | `connections` | `[connections]`: header read timeout, most open connections |
//! | `metrics` | `[metrics]`: who may scrape `/metrics` (token, client address ranges) |
//! | `console` | `[console]`: the review console, its session lifetime, its OAuth client at the identity provider |
//! | `database` | which database `database_url` names, the owner URL beside it, `[postgres]`, and password redaction for messages |
//!
//! `[telemetry]` is [`crate::telemetry`]'s and `[limits]` is
//! `pinfold_core`'s; the configuration embeds them. Nothing here knows the
//! application: what it is built into is decided by whoever reads it.

mod auth;
mod connections;
mod console;
mod database;
mod egress;
mod load;
mod metrics;
mod rate_limits;
mod resolve;
mod root;

pub use auth::{AuthConfig, ClaimRuleSettings, IssuerSettings};
pub use connections::ConnectionSettings;
pub use console::{ConsoleConfig, ConsoleOidcSettings};
pub use database::{Backend, PostgresConfig, redact_url};
pub use egress::EgressSettings;
pub use load::{Overrides, config_keys, unknown_env_vars};
pub use metrics::MetricsSettings;
pub use rate_limits::{ClassLimits, RateLimitSettings};
pub use resolve::ResolveSettings;
pub use root::Config;
