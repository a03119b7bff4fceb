//! signet-scope: the scope service: OAuth provider profiles and
//! least-privilege grants.
//!
//! - [`model`]: provider profiles and grants, their wire shapes and checks;
//! - [`hierarchy`]: a profile's scope hierarchy (closure, cycles);
//! - [`store`]: the storage contract ([`store::ScopeStore`]);
//! - [`state`]: what the handlers share, and what the server provides
//!   ([`state::Sealer`], the URL policy);
//! - [`oauth`]: discovery (RFC 8414, OpenID Connect), authorization
//!   requests with PKCE S256 and RFC 8707 `resource`, the code exchange
//!   (the `oauth2` crate over a client that follows no redirect);
//! - [`routes`]: the HTTP handlers.
//!
//! Like every service crate it may depend on `signet-core` and
//! `signet-http`, never on another service crate and never on SQL.

pub mod error;
pub mod hierarchy;
pub mod model;
pub mod oauth;
pub mod routes;
pub mod state;
pub mod store;

pub use model::{GrantRow, GrantStatus, Preset, Profile, ProviderRow, StateRow};
pub use state::{ScopeConfig, ScopeState, Sealer, UrlPolicy};
pub use store::{AuditNote, Expect, GrantOutcome, ProviderWrite, ScopeStore, ScopeStoreError};
