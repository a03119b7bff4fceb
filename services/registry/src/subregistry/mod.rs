//! The subregistry: a tenant's approved versions in the shapes of the
//! official MCP registry's read API (`/v0.1`), so that an existing registry
//! client can use `https://pinfold.example/t/{tenant}` as the base URL of a
//! private subregistry. The use cases and the view, without HTTP (the
//! handlers are in `routes::v01`).
//!
//! What is visible: every version that was ever approved — `approved`
//! (official status `active`), `deprecated` (`deprecated`) and `revoked`
//! after an approval (`deleted`, listed only with `include_deleted`).
//! Pending and rejected versions, and versions revoked before anyone
//! approved them, never appear.
//!
//! Each entry's `server` is the published card without its `signature`
//! (the `server.json` part). The official `_meta` key allows no extra
//! members, so Pinfold's own data — digest, attestation, enforcement mode,
//! status and the worst-case tools — goes under [`response::PINFOLD_META`].

pub mod cache;
pub mod etag;
pub mod listing;
pub mod response;
pub mod server_json;
pub mod views;
pub mod visibility;

#[cfg(test)]
mod fixtures;
