//! signet-http: the HTTP edge every Signet service shares.
//!
//! It owns the one error type that crosses the wire ([`ApiError`], rendered
//! as RFC 9457 `application/problem+json`), the strict JSON body extractor
//! ([`StrictJson`]), bearer-token authentication ([`auth`]) and the tenant
//! extractor ([`TenantScope`]) that makes a tenant-less handler impossible to
//! write. It knows no database and no service: services build on it, the
//! server wires it.

pub mod auth;
pub mod body;
pub mod cpu;
pub mod hot;
pub mod pagination;
pub mod problem;
pub mod tenant;

pub use auth::{Authenticator, Principal, Role};
pub use body::StrictJson;
pub use problem::{ApiError, FieldError, ProblemBody};
pub use tenant::TenantScope;
