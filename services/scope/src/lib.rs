//! pinfold-scope: the scope service: OAuth provider profiles, the
//! least-privilege scope planner's routes, and grants.
//!
//! The planner itself is pure and lives in `pinfold_core::scope`; this crate
//! feeds it published tools (through [`state::Signatures`]) and provider
//! profiles (through [`providers::Providers`]), both traits the server
//! implements, and shapes its answer for the wire ([`planning`]).
//!
//! - [`model`]: provider profiles and grants, their wire shapes and checks;
//! - [`store`]: the storage contract ([`store::ScopeStore`]);
//! - [`config`]: the service's limits ([`config::ScopeConfig`]);
//! - [`state`]: what the handlers share, and what the server provides
//!   ([`state::Sealer`], [`state::Signatures`], the egress path and each
//!   tenant's rules);
//! - [`oauth`]: discovery (RFC 8414, OpenID Connect), authorization
//!   requests with PKCE S256 and RFC 8707 `resource`, the code exchange
//!   (the `oauth2` crate over the egress path, which follows no redirect),
//!   and the check of a URL a provider's credentials go to
//!   ([`oauth::provider_url`]);
//! - [`routes`]: the HTTP handlers.
//!
//! Like every service crate it may depend on `pinfold-core`,
//! `pinfold-http` and `pinfold-egress`, never on another service crate and
//! never on SQL.

pub mod config;
pub mod error;
pub mod model;
pub mod oauth;
pub mod planning;
pub mod providers;
pub mod routes;
pub mod state;
pub mod store;

pub use config::ScopeConfig;
pub use model::{GrantRow, GrantStatus, Preset, Profile, ProviderRow, StateRow};
pub use oauth::Outbound;
pub use providers::{ProviderView, Providers};
pub use state::{
    ScopeState, Sealer, SessionResolved, SessionTools, Signatures, VersionRemotes, VersionTools,
    secret_context, verifier_context,
};
pub use store::{AuditNote, Expect, GrantOutcome, ProviderWrite, ScopeStore, ScopeStoreError};
