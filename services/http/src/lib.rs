//! pinfold-http: the HTTP edge every Pinfold service shares.
//!
//! It owns the one error type that crosses the wire ([`ApiError`], rendered
//! as RFC 9457 `application/problem+json`), the strict JSON body extractor
//! ([`StrictJson`]), bearer-token authentication ([`auth`]) and the tenant
//! extractor ([`TenantScope`]) that makes a tenant-less handler impossible to
//! write. It knows no database and no service: services build on it, the
//! server wires it.

pub mod auth;
pub mod bearer;
pub mod body;
pub mod cpu;
pub mod egress;
pub mod hot;
pub mod pagination;
pub mod problem;
pub mod ratelimit;
pub mod report;
pub mod schema;
pub mod tenant;
pub mod upstream;

pub use auth::{Authenticator, Principal, Role};
pub use body::StrictJson;
pub use problem::{ApiError, FieldError, ProblemBody};
pub use tenant::TenantScope;

/// A JSON Schema `pattern` (unanchored, so "contains") that a text matches
/// when it is not only white space: one character outside Rust's
/// `char::is_whitespace`, listed explicitly so that the document and
/// `str::trim` agree character for character (the `\s` of regular
/// expression engines differs between languages). Schema attributes need a
/// literal, so request types repeat it; the server's contract test checks
/// every copy against this one.
pub const NOT_BLANK_PATTERN: &str =
    r"[^\t\n\u000b\u000c\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]";
