//! Bearer-token authentication.
//!
//! Every request that touches tenant data carries `Authorization: Bearer
//! <JWT>`. Verification is explicit and strict (ARCHITECTURE.md, "Auth"):
//!
//! - the header is at most 8 KiB and the token has exactly three segments;
//! - the issuer (`iss`) selects a configured issuer; its algorithm allow-list
//!   must contain the header's `alg` (so `none` and HS/RS/EdDSA confusion
//!   fail before any key is touched);
//! - `exp`, `iss`, `aud`, `sub` are required, `nbf` is validated, leeway is
//!   at most 30 seconds;
//! - keys come from configuration or the issuer's JWKS URL; `jku`, `x5u` and
//!   an embedded `jwk` in the token header are never followed;
//! - an unknown `kid` refetches the JWKS at most once per refetch interval
//!   (default 60 s), so a flood of forged `kid`s cannot hammer the provider;
//! - the tenant and roles come from the token's `tenant` and `roles` claims,
//!   or, for an issuer with a [`ClaimMapping::Rules`] (GitHub Actions, whose
//!   tokens name a repository and a workflow, not a tenant), from the first
//!   configured rule whose claims all match, and never from the token then.
//!
//! Verified tokens are cached (`cache`): a repeat of a verified token skips
//! verification and only has its `exp` checked again. Tokens are never
//! logged.
//!
//! - `principal`: the roles a token may carry and the verified identity.
//! - `error`: why a request is not authenticated, and its 401 answer.
//! - `claims`: how an issuer's tokens name their tenant and roles (the
//!   token's own claims, or configured claim rules).
//! - `issuer`: a trusted issuer's configuration and its keys (static, or
//!   a JWKS document fetched and refetched under a bound).
//! - `verify`: verifying one token against the issuers, without the cache.
//! - `cache`: the cache of verified tokens.
//! - `authenticator`: [`Authenticator`], the `Authorization` header to a
//!   principal, the cache first.
//! - `extract`: [`Auth`], the extractor a handler takes the principal by.

mod authenticator;
mod cache;
mod claims;
mod error;
mod extract;
mod issuer;
mod principal;
mod verify;

pub use authenticator::{Authenticator, MAX_AUTHORIZATION_BYTES, MAX_LEEWAY_SECS};
pub use claims::{ClaimMapping, ClaimPattern, ClaimRule, RuleError};
pub use error::AuthError;
pub use extract::Auth;
pub use issuer::{IssuerConfig, JwksFetch, KeySource};
pub use principal::{Principal, Role};
