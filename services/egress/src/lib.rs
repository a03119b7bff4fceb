//! Every outbound HTTP request of the Pinfold server goes through this
//! crate: to upstream MCP servers (resolve sessions, and the guard next),
//! to identity providers (discovery, token exchange) and to JWKS
//! documents. What it guarantees:
//!
//! - **An address policy on the addresses actually connected to**
//!   ([`policy`], [`Rules`]): a name is resolved once, refused addresses
//!   are dropped, and the connection is made only to what passed; an IP
//!   literal is judged as written before anything is sent. By default only
//!   public unicast passes; a tenant widens it with its allow-list, the
//!   operator with loopback for development.
//! - **No redirects, no proxies from the environment**, a connect timeout
//!   and a total timeout ([`Egress::request`]); a caller that goes away
//!   drops its request, and with it the connection.
//! - **A bounded set of clients** (one per distinct [`Rules`], so no pooled
//!   connection crosses tenants; the least recently used goes).
//! - **Bounded reads**: [`read_body`] and the event-stream reader
//!   [`events`](events::events).
//! - **Errors that say "not allowed" or "unreachable"** ([`EgressError`]),
//!   never which port answered what; credentials over plain `http://`
//!   only to hosts the allow-list names.
//! - **One redaction** of URLs and headers for logs, errors and audit
//!   ([`redact`]).
//! - `Retry-After` read through `httpdate` ([`retry_after`]).

pub mod body;
pub mod client;
pub mod error;
pub mod events;
pub mod policy;
pub mod redact;
mod resolver;
pub mod retry_after;

pub use body::read_body;
pub use client::{Egress, EgressConfig};
pub use error::{EgressError, refused_by_policy};
pub use policy::{AllowList, AllowListError, Rules};
