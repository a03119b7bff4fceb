//! signet-store-rows: what the two store crates share, so that a column is
//! mapped once.
//!
//! One `#[derive(sqlx::FromRow)]` struct per result shape, generic over the
//! database (SQLite and PostgreSQL decode the same Rust types: `BIGINT` or
//! `INTEGER` milliseconds, `TEXT`, booleans, and JSON read as text), and one
//! conversion from each into the domain type of the service that owns it.
//! Also the mapping of driver errors into the services' store errors.
//!
//! No SQL here: the queries, and the column names they select, live in
//! `store-sqlite` and `store-postgres`; a query selects the columns a row
//! struct names.

mod registry;
mod tenancy;

pub use registry::{KeyRow, ReviewRow, ServerSummaryRow, VersionMetaRow, VersionRow};
pub use tenancy::{AuditRow, PolicyRow, TenantRow};

use signet_registry::RegistryStoreError;
use signet_tenancy::StoreError;

/// A driver error in tenancy terms: a unique violation is a `Conflict`, a
/// pool or IO failure makes the database `Unavailable`, anything else is
/// `Other`.
pub fn store_error(e: sqlx::Error) -> StoreError {
    match &e {
        sqlx::Error::Database(db) if db.is_unique_violation() => {
            StoreError::Conflict(db.message().to_owned())
        }
        sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed => {
            StoreError::Unavailable(e.to_string())
        }
        _ => StoreError::Other(e.to_string()),
    }
}

/// A tenancy store error in registry terms (an audit append inside a
/// registry write).
pub fn registry_error_from(e: StoreError) -> RegistryStoreError {
    match e {
        StoreError::Unavailable(m) => RegistryStoreError::Unavailable(m),
        other => RegistryStoreError::Other(other.to_string()),
    }
}

/// A driver error in registry terms.
pub fn registry_error(e: sqlx::Error) -> RegistryStoreError {
    registry_error_from(store_error(e))
}
