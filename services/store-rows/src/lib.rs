//! pinfold-store-rows: what the two store crates share, so that a column is
//! mapped once.
//!
//! One `#[derive(sqlx::FromRow)]` struct per result shape, generic over the
//! database (SQLite and PostgreSQL decode the same Rust types: `BIGINT` or
//! `INTEGER` milliseconds, `TEXT`, booleans, and JSON read as text), and one
//! conversion from each into the domain type of the service that owns it.
//! Also the mapping of driver errors into the services' store errors
//! (`error`), and the sealed columns the key rotation walks (`sealed`).
//!
//! No SQL here: the queries, and the column names they select, live in
//! `store-sqlite` and `store-postgres`; a query selects the columns a row
//! struct names.

mod console;
mod error;
mod guard;
mod registry;
mod resolve;
mod scope;
mod sealed;
mod tenancy;

pub use console::{ConsoleSessionDbRow, console_error};
pub use error::{is_unavailable, registry_error, registry_error_from, store_error};
pub use guard::{GuardRouteDbRow, guard_error, guard_error_from, header_names_json};
pub use registry::{
    KeyRow, KeyedVersionRow, ListedVersionRow, ReviewRow, ServerSummaryRow, VersionMetaRow,
    VersionRecordRow, VersionRow,
};
pub use resolve::{SessionDbRow, session_error, session_error_from};
pub use scope::{
    GrantDbRow, ProviderDbRow, StateDbRow, scope_error, scope_error_from, scopes_json,
};
pub use sealed::{Replacement, SealedColumn, SealedDbRow};
pub use tenancy::{AuditRow, PolicyRow, TenantRow};
