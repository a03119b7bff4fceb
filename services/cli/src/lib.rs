//! The client side of the `pinfold` binary: the commands a platform team runs
//! from CI against live MCP servers and a Pinfold server (capture, publish,
//! verify). The server binary (`pinfold-server`) only parses the command line
//! and calls in here; nothing in this crate serves HTTP or touches a database.
//!
//! - [`remote`]: a small HTTP client for Pinfold's own `/v1` API (base URL,
//!   tenant, bearer token from the environment, problem+json bodies).
//! - [`retry`]: bounded retries with backoff (honouring `Retry-After`) for
//!   requests that are safe to repeat.
//! - [`publish`]: `pinfold publish`, its outcomes and exit codes, and
//!   `--wait-approved`.
//! - [`oidc`]: the GitHub Actions OIDC token request behind
//!   `--github-oidc`.
//! - [`progress`]: progress on stderr (a spinner on a terminal, plain lines
//!   otherwise), for any command that waits.
//! - [`capture`]: `pinfold capture`, a live MCP server (Streamable HTTP or
//!   stdio) to a draft card; `--merge` folds several captures into one.
//! - [`verify`]: `pinfold verify`, a live MCP server against the approved
//!   signature in Pinfold.
//! - [`guard`]: `pinfold guard`, a local stdio MCP server run under its
//!   approved signature for desktop clients.

pub mod capture;
pub mod guard;
pub mod oidc;
pub mod progress;
pub mod publish;
pub mod remote;
pub mod retry;
pub mod verify;
