//! signet-resolve: the resolve-cache service: Signet resolve sessions, the
//! per-session cache of `tools/resolve` / `tools/annotations` answers, and
//! the upstream MCP client.
//!
//! The engine ([`engine::Engine`]) is a library: given a session's context
//! ([`engine::SessionCtx`]: tenant, session, pinned and prepared signature
//! version, mode, cache policy, upstream) it answers one call with a
//! complete tool, checked against the signature. Modules:
//!
//! - [`prepared`]: a signature version prepared once per digest (worst
//!   cases, resolve kinds, input-schema validators);
//! - [`key`]: cache keys over RFC 8785 canonical arguments;
//! - [`cache`]: the bytes-weighted cache and its per-tenant share policy;
//! - [`upstream`]: the MCP client (rmcp over Streamable HTTP);
//! - [`engine`]: coalescing, checking, serving, determinism;
//! - [`stats`]: counters for `/metrics`.
//!
//! Like every service crate it may depend on `signet-core` and
//! `signet-http`, never on another service crate and never on SQL.

pub mod cache;
pub mod engine;
pub mod key;
pub mod prepared;
pub mod stats;
pub mod upstream;

pub use engine::{
    CachePolicy, Engine, EngineConfig, Resolution, ResolveError, ResolveEvent, SessionCtx, Source,
};
pub use prepared::{PreparedSignature, PreparedTool, ToolKind};
pub use stats::{FallbackReason, StatsSnapshot};
pub use upstream::{TargetError, UpstreamTarget};
