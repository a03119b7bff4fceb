//! signet-resolve: the resolve-cache service. Sessions pin a trusted
//! signature version for one principal and one upstream MCP server; within a
//! session, `tools/resolve` and `tools/annotations` results are fetched from
//! the upstream once, checked against the signature, and memoized.
//!
//! Like every service crate it may depend on `signet-core` and `signet-http`,
//! never on another service crate and never on SQL.

pub mod error;
pub mod routes;
pub mod session;
pub mod state;
pub mod store;

pub use session::{AuditNote, CachePolicy, SessionRow};
pub use state::{
    LiveSession, LiveSessions, Pinned, ResolveConfig, ResolveState, Sealer, ServerPolicy,
    Signatures, Standing,
};
pub use store::{SessionStore, SessionStoreError};
