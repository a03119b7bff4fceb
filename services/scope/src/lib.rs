//! signet-scope: the scope service: OAuth provider profiles, the
//! least-privilege scope planner's routes, and authorization requests.
//!
//! The planner itself is pure and lives in `signet_core::scope`; this crate
//! reaches provider profiles through the [`providers::Providers`] trait the
//! server implements.
//!
//! Like every service crate it may depend on `signet-core` and `signet-http`,
//! never on another service crate and never on SQL.

pub mod providers;

pub use providers::{ProviderView, Providers};
