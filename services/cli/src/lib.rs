//! The client side of the `signet` binary: the commands a platform team runs
//! from CI against live MCP servers and a Signet server (capture, publish,
//! verify). The server binary (`signet-server`) only parses the command line
//! and calls in here; nothing in this crate serves HTTP or touches a database.
//!
//! - [`remote`]: a small HTTP client for Signet's own `/v1` API (base URL,
//!   tenant, bearer token from the environment, problem+json bodies).
//! - [`retry`]: bounded retries with backoff (honouring `Retry-After`) for
//!   requests that are safe to repeat.
//! - [`publish`]: `signet publish`, its outcomes and exit codes, and
//!   `--wait-approved`.
//! - [`oidc`]: the GitHub Actions OIDC token request behind
//!   `--github-oidc`.
//! - [`progress`]: progress on stderr (a spinner on a terminal, plain lines
//!   otherwise), for any command that waits.
//! - [`capture`]: `signet capture`, a live MCP server (Streamable HTTP or
//!   stdio) to a draft card; `--merge` folds several captures into one.
//! - [`verify`]: `signet verify`, a live MCP server against the approved
//!   signature in Signet.

pub mod capture;
pub mod oidc;
pub mod progress;
pub mod publish;
pub mod remote;
pub mod retry;
pub mod verify;
