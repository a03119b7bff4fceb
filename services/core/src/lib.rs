//! pinfold-core: the pure heart of Pinfold.
//!
//! Core owns the domain model and every algorithm the services share:
//!
//! - [`card`]: the server card with its capability signature (SEP-2091),
//!   validated under configurable [`card::Limits`], every error with a JSON
//!   pointer ([`error::ValidationErrors`]);
//! - [`names`]: identity of servers and versions;
//! - [`digest`]: RFC 8785 canonical form and `sha256:` digests;
//! - [`annotations`]: typed hints, normalisation and the danger order;
//! - [`reduce`]: worst-case reduction (signature → `tools/list`);
//! - [`contain`]: containment of runtime observations and enforcement
//!   [`Mode`]s;
//! - [`diff`]: capability diff between two versions;
//! - [`param_headers`]: tool arguments mirrored into HTTP headers
//!   (`x-mcp-header`, SEP-2243), the one rule `diff` and `contain` share
//!   on them;
//! - [`draft`]: draft cards from captured lists, and the merge of several
//!   captures into one signature;
//! - [`scope`]: the scope envelope of a signature, scope hierarchies and
//!   their presets, and the least-privilege planner;
//! - [`uri_template`]: RFC 6570 template matching in bounded time;
//! - [`ops`]: the pure entry points behind the CLI and HTTP API;
//! - [`json`]: strict JSON input; [`ids`]: shared identifiers;
//! - [`audit`]: the audit event a change appends.
//!
//! The rules these modules apply are described, for readers of the
//! project rather than of the code, in `docs/SEMANTICS.md`.
//!
//! Core must never know about IO, HTTP, SQL, async runtimes (no tokio),
//! clocks, configuration files or any service crate. Everything here is a
//! deterministic function of its inputs; outputs are sorted or in document
//! order, never in hash order.

pub mod annotations;
pub mod audit;
pub mod card;
pub mod contain;
pub mod diff;
pub mod digest;
pub mod draft;
pub mod error;
pub mod guard;
pub mod ids;
pub mod json;
pub mod names;
pub mod ops;
pub mod param_headers;
pub mod reduce;
pub mod scope;
pub mod uri_template;

pub use contain::Mode;
