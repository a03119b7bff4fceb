//! signet-scope: the scope service: OAuth provider profiles, the
//! least-privilege scope planner's routes, and authorization requests.
//!
//! The planner itself is pure and lives in `signet_core::scope`; this crate
//! feeds it published tools (through [`state::Signatures`]) and provider
//! profiles (through [`providers::Providers`]), both traits the server
//! implements, and shapes its answer for the wire ([`planning`]).
//!
//! Like every service crate it may depend on `signet-core` and `signet-http`,
//! never on another service crate and never on SQL.

pub mod planning;
pub mod providers;
pub mod routes;
pub mod state;

pub use providers::{ProviderView, Providers};
pub use state::{ScopeState, Signatures, VersionTools};
