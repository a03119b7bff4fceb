//! The upstream MCP client: the official Rust SDK (`rmcp`) over Streamable
//! HTTP, on our own reqwest clients.
//!
//! - Every request goes out through the egress crate (`pinfold-egress`):
//!   the client comes from the server's one egress path under the
//!   session's rules (the tenant's `egress_allow`, the operator's loopback
//!   setting), so every address connected to is judged by the address
//!   policy; no redirects, the configured connect timeout. The total timeout of a resolution is
//!   applied around the whole exchange by the engine, so that the
//!   long-lived notification stream is not cut by it; when it passes, the
//!   engine closes the MCP connection, which drops its HTTP connections.
//! - A JSON answer, and each server-sent event of a streamed answer, is read
//!   up to `max_response_bytes` (1 MiB by default); a larger one fails the
//!   exchange, so an endless or oversized answer costs bounded memory.
//! - One MCP connection per Pinfold session and replica, made lazily on the
//!   first miss. With a server that offers MCP 2026-07-28 it is
//!   sessionless (`server/discover`; the client repeats its version and
//!   capabilities in every request's `_meta`, and list changes arrive on a
//!   `subscriptions/listen` stream); otherwise `initialize` (2025-11-25)
//!   once, and rmcp keeps the negotiated capabilities and the MCP session
//!   id, re-initializing when the upstream forgets the session. A
//!   connection that fails at the transport level is dropped and made
//!   again on the next miss.
//! - On a sessionless connection, resolve calls are sent by
//!   the `direct` module on the same reqwest client (one POST, one answer),
//!   not through rmcp's transport worker; rmcp still opens the connection
//!   and keeps its `subscriptions/listen` stream. A 2025-11-25 connection
//!   sends them through rmcp.
//! - The client advertises the tool-resolution extension under
//!   `capabilities.extensions`, sends `tools/resolve` (SEP-1862) or
//!   `tools/annotations` (dynamic-annotations seed), and adds the session's
//!   upstream headers — never the caller's Pinfold token, which this crate
//!   never sees.
//! - `notifications/tools/list_changed` from the upstream calls the hook
//!   given at connection time (the engine invalidates the session).
//!
//! Modules: `target` (where the upstream is, checked, and the rules it is
//! reached under), `pool` (the egress path: a URL admitted, its client),
//! `cancellable` (a connection's HTTP requests, ended with it), `handler`
//! (what the client says of itself and does on a list change),
//! `connection` (opening a connection and its 2025-11-25 calls through
//! rmcp), `direct` (the calls of a 2026-07-28 connection, reading
//! bodies and event streams with the egress crate's bounded readers) and
//! `error` (a failed exchange, its text redacted, its `Retry-After`
//! found).

mod cancellable;
mod connection;
mod direct;
mod error;
mod handler;
mod pool;
mod target;

pub(crate) use connection::Connection;
pub(crate) use error::FetchError;
pub(crate) use handler::ListChangedHook;
pub(crate) use pool::Pool;
pub use target::{
    HEADER_NAME_PATTERN, HEADER_VALUE_PATTERN, MAX_HEADER_NAME_CHARS, MAX_HEADER_VALUE_CHARS,
    MAX_UPSTREAM_HEADERS, MAX_URL_CHARS, RESERVED_HEADERS, TargetError, UpstreamTarget,
    is_reserved_header, is_upstream_header_name, is_upstream_header_value, is_upstream_url,
    reserved_headers_pattern, upstream_url_pattern,
};
