//! pinfold-registry: the registry service.
//!
//! It owns publishing immutable capability signatures (SEP-2091), their
//! review and lifecycle, the read views (record, document, worst-case
//! `tools/list`, card), diff and verify on top of `pinfold-core`, signed
//! attestations, and import of official-registry `server.json` documents. It
//! declares the [`RegistryStore`] trait (implemented by the store crates) and
//! the [`PolicySource`] trait (implemented by the server over the tenancy
//! store).
//!
//! Like every service crate it may depend on `pinfold-core` and `pinfold-http`,
//! never on another service crate and never on SQL.

pub mod error;
pub mod index;
pub mod keys;
pub mod model;
pub mod policy;
pub mod routes;
pub mod service;
pub mod state;
pub mod store;
pub mod subregistry;

pub use policy::{EnforcementModes, PolicySource, RegistryPolicy};
pub use routes::router;
pub use state::RegistryState;
pub use store::{RegistryStore, RegistryStoreError};
