//! The official MCP registry's read API (`/v0.1`) over a tenant's approved
//! versions: a private subregistry at `/t/{tenant}` (the view and the use
//! cases are in [`crate::subregistry`]).
//!
//! Reads need the `reader` (or `admin`) role. Not-found answers use the
//! official API's body, `{"error": "..."}` (`application/json`), for an
//! unknown server or version and for another tenant's (or a missing)
//! subregistry alike; authentication (401), role (403) and query (400)
//! failures are problem+json like the rest of Pinfold. Every `200` carries a
//! strong `ETag`; `If-None-Match` answers `304`. Answers are `private,
//! no-cache` with `Vary: Authorization`: a status can change at any time
//! and a shared cache must never hand one tenant's answer to another.

pub mod answer;
pub mod error;
pub mod handlers;
pub mod params;
