//! The guard: an MCP endpoint per route that holds a server to its approved
//! signature on the wire.
//!
//! A *route* (`/v1/tenants/{tenant}/servers/{server}/guard`) says where the
//! upstream is, which version of the signature binds it, under which mode
//! and `calls` policy. The rules themselves (what a client is shown, which
//! calls are refused) are core's (`pinfold_core::guard`); this crate stores
//! routes and carries the rules onto Streamable HTTP.
//!
//! Layers from the bottom: [`model`] (routes and what pins them), [`store`]
//! (`GuardStore`).

pub mod endpoint;
pub mod model;
pub mod store;
