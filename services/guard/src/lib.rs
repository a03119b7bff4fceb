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
//! (`GuardStore`), [`state`] (what the routes need from the server:
//! `Servers` over the registry, `Sealer` over the keyring, the egress path;
//! `GuardState`), [`routes`] (`/v1/tenants/{tenant}/servers/{server}/guard`:
//! put, read, delete a route).

pub mod endpoint;
pub mod model;
pub mod routes;
pub mod state;
pub mod store;

pub use routes::router;
pub use state::{GuardState, PinnedServer, Sealer, Servers};
