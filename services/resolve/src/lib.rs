//! pinfold-resolve: the resolve-cache service. Sessions pin a trusted
//! signature version for one principal and one upstream MCP server; within a
//! session, `tools/resolve` and `tools/annotations` answers are fetched from
//! the upstream once, checked against the signature, and memoized.
//!
//! The engine ([`engine::Engine`]) answers one call given a session's
//! context ([`engine::SessionCtx`]: tenant, session, pinned and prepared
//! signature version, mode, cache policy, upstream) with a complete tool,
//! checked against the signature. Modules:
//!
//! - [`session`], [`store`]: session rows and their storage contract;
//! - [`state`]: what the handlers share, and the traits the server
//!   implements over the registry and tenancy ([`state::Signatures`],
//!   [`state::Sealer`]);
//! - [`routes`]: the HTTP handlers;
//! - [`prepared`]: a signature version prepared once per digest (worst
//!   cases, resolve kinds, compiled input-schema validators) and [`key`]:
//!   cache keys over RFC 8785 canonical arguments; both are
//!   `pinfold-resolve-check`'s, re-exported (that crate has no IO, so the
//!   fuzz targets build it);
//! - `answer`: a checked upstream answer, as served and cached;
//! - [`cache`]: the bytes-weighted cache, the weight of an entry and its
//!   per-tenant share policy;
//! - [`upstream`]: the MCP client (rmcp opens connections over Streamable
//!   HTTP; a sessionless connection's resolve calls are our own POSTs);
//! - [`engine`]: coalescing, checking, serving, determinism;
//! - [`stats`]: counters for `/metrics`.
//!
//! Like every service crate it may depend on `pinfold-core` and
//! `pinfold-http`, never on another service crate and never on SQL.

mod answer;
pub mod cache;
pub mod engine;
pub mod error;
pub(crate) mod resolution;
pub mod routes;
pub mod session;
pub mod state;
pub mod stats;
pub mod store;
pub mod upstream;

pub use pinfold_resolve_check::{key, prepared};

pub use engine::{
    Engine, EngineConfig, Invalidation, Resolution, ResolveError, ResolveEvent, SessionCtx, Source,
};
pub use prepared::{PreparedSignature, PreparedTool, ToolKind};
pub use session::{AuditNote, CachePolicy, SessionRow};
pub use state::{
    LiveSession, LiveSessions, Pinned, ResolveConfig, ResolveState, Sealer, ServerPolicy,
    Signatures, Standing, headers_context,
};
pub use stats::{FallbackReason, StatsSnapshot};
pub use store::{SessionStore, SessionStoreError};
pub use upstream::{TargetError, UpstreamTarget};
