//! `pinfold capture`: list what a live MCP server offers and write a draft
//! server card with its signature.
//!
//! The client is the official Rust SDK (`rmcp`), over Streamable HTTP (our
//! own reqwest client: no redirects, bounded timeouts, the `--header`s on
//! every request) or over stdio (a child process started from
//! `--command`). It negotiates MCP 2026-07-28 (`server/discover`, no
//! protocol session) when the server offers it and otherwise the
//! `initialize` handshake of 2025-11-25, then runs every list the server
//! advertises (`tools/list`, `prompts/list`, `resources/list`,
//! `resources/templates/list`), following `nextCursor`.
//!
//! # Raw answers
//!
//! rmcp decodes list results into its own types, which drop every member
//! they do not model (a tool's `securitySchemes`, the tool-resolution
//! seed's `resolve`, `dynamicAnnotations`, an annotation's `agencyHint`,
//! `taskHint`, ...). A signature must hold exactly what the server said, so
//! the transports here are tapped: the Streamable HTTP client posts the
//! list requests itself and records each JSON-RPC response as received,
//! and the child's stdout passes through a reader that does the same. The
//! capture uses those raw results (keyed by request id); rmcp still runs
//! the protocol. Answers are read as strict JSON (duplicate keys are
//! refused: two readers could disagree on which one counts).
//!
//! The pure part — turning lists into a card, folding in `--merge`d
//! captures — is `pinfold_core::draft`.
//!
//! - `args`: the command line of `pinfold capture` and its exit codes.
//! - `target`: the server to capture (URL and `--header`s, or
//!   `--command`) and how it is shown without its credentials.
//! - `tap`: the record of raw list answers, and the stdio reader that
//!   fills it.
//! - `http`: the Streamable HTTP client that posts the list requests
//!   itself and fills the record.
//! - `session`: the MCP client (advertising a capability profile) and its
//!   handshake over either transport, through `pinfold_mcp_client::open`
//!   (the `server/discover` probe, else `initialize`); a stdio server runs
//!   in its own process group (`pinfold_mcp_client::stdio`).
//! - `error`: why a capture failed, shown without credentials.
//! - `lists`: a live capture: every advertised list, page by page.
//! - `merge`: reading the `--merge` files.
//! - `output`: writing the card and showing conflicts.
//! - `run`: `pinfold capture` from arguments to exit code.

mod args;
mod error;
mod http;
mod lists;
mod merge;
mod output;
mod run;
mod session;
mod tap;
mod target;

pub use args::{CaptureArgs, exit};
pub use error::CaptureError;
pub use lists::{Captured, capture};
pub use run::{CAPTURE_META, recorded_profiles, recorded_server_info, run};
pub use target::{HeaderArg, Target, parse_header};
