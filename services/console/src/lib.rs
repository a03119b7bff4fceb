//! The review console: the pages an admin or reviewer reads and decides on
//! (`/console`), rendered on the server with `maud` (compile-time
//! templates that escape every interpolated value), no script, one
//! stylesheet served by the same binary.
//!
//! Layers from the bottom:
//!
//! - `analysis`: what a reviewer is shown of a version, computed without
//!   IO: each tool's worst-case chips, the escalations of a change against
//!   the current approved version first (from `pinfold_core::diff`, the one
//!   classification `verify` shares), a change's headline, the schema notes
//!   of a changed schema (properties added and removed, types widened, enum
//!   values added, arguments newly sent in HTTP headers).
//! - `render/`: the pages (`layout`, the shell and its navigation; `queue`,
//!   `version`, `audit`, `ledger`, `signin`), each a function from plain
//!   view data to HTML.
//! - `assets`: the stylesheet and the security headers every console page
//!   carries (a strict `Content-Security-Policy`: no script at all, no
//!   third-party origin).
//! - `session`: server-side sessions (the model, the `ConsoleStore` the
//!   database crates implement, secrets, CSRF tokens, cookies).
//! - `oidc`: the console as an OAuth client of the identity provider
//!   (discovery, authorization code with PKCE S256, the code exchange).
//! - `state`: what the routes need (`ConsoleState`, `ConsoleSettings`, the
//!   dev one-click sign-in as `DevSignIn`).
//! - `routes/`: the HTTP routes under `/console` (a signed-in session's
//!   requests charged to the rate limiter's `console` class).

pub mod analysis;
pub mod assets;
pub mod oidc;
pub mod render;
pub mod routes;
pub mod session;
pub mod state;

pub use routes::router;
pub use session::{ConsoleSession, ConsoleStore, ConsoleStoreError};
pub use state::{ConsoleSettings, ConsoleState, DevSignIn};
