//! pinfold-store-rows: what the two store crates share, so that a column is
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
mod resolve;
mod scope;
mod tenancy;

pub use registry::{
    KeyRow, KeyedVersionRow, ListedVersionRow, ReviewRow, ServerSummaryRow, VersionMetaRow,
    VersionRecordRow, VersionRow,
};
pub use resolve::{SessionDbRow, session_error, session_error_from};
pub use scope::{
    GrantDbRow, ProviderDbRow, StateDbRow, scope_error, scope_error_from, scopes_json,
};
pub use tenancy::{AuditRow, PolicyRow, TenantRow};

use pinfold_registry::RegistryStoreError;
use pinfold_tenancy::StoreError;

/// Whether a driver error means the database cannot be reached right now
/// (so the request may succeed unchanged later), rather than that the
/// request or the data is wrong: IO and TLS failures (connection refused,
/// reset, closed), the pool's wait for a connection timing out or the pool
/// closing, SQLite's worker thread gone or the file busy past the busy
/// timeout, and PostgreSQL's SQLSTATE class 08 (connection exception),
/// 57P01–57P03 (the server shutting down or starting up) and 53300 (too
/// many connections).
pub fn is_unavailable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|c| unavailable_code(&c)),
        _ => false,
    }
}

/// The driver error codes [`is_unavailable`] treats as "cannot be reached":
/// PostgreSQL SQLSTATEs (five characters) and SQLite's primary result codes
/// `SQLITE_BUSY` (5) and `SQLITE_LOCKED` (6) with their extended codes.
fn unavailable_code(code: &str) -> bool {
    if code.len() == 5 {
        // A SQLSTATE (SQLite's codes have at most four digits).
        return code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03" | "53300");
    }
    code.parse::<u32>().is_ok_and(|n| matches!(n & 0xff, 5 | 6))
}

/// A driver error in tenancy terms: a unique violation is a `Conflict`, a
/// database that cannot be reached ([`is_unavailable`]) is `Unavailable`,
/// anything else is `Other`.
pub fn store_error(e: sqlx::Error) -> StoreError {
    match &e {
        sqlx::Error::Database(db) if db.is_unique_violation() => {
            StoreError::Conflict(db.message().to_owned())
        }
        _ if is_unavailable(&e) => StoreError::Unavailable(e.to_string()),
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

#[cfg(test)]
mod tests {
    use pinfold_registry::model::{ServerRow, Status, VersionMeta};
    use pinfold_tenancy::model::{Mode, PolicyRecord};

    use super::*;

    fn policy_row(mode: &str, overrides: &str) -> PolicyRow {
        PolicyRow {
            enforcement_mode: mode.into(),
            approval_required: false,
            overrides: overrides.into(),
            revision: 4,
            updated_at: 5,
            updated_by: "op".into(),
        }
    }

    #[test]
    fn connectivity_errors_are_unavailable_and_others_are_not() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(is_unavailable(&sqlx::Error::Io(refused)));
        assert!(is_unavailable(&sqlx::Error::PoolTimedOut));
        assert!(is_unavailable(&sqlx::Error::PoolClosed));
        assert!(!is_unavailable(&sqlx::Error::RowNotFound));
        assert!(!is_unavailable(&sqlx::Error::Protocol("bad".into())));
        for code in ["08006", "08001", "57P01", "57P03", "53300", "5", "517", "6"] {
            assert!(unavailable_code(code), "{code}");
        }
        // Unique violation, check violation, syntax error, SQLite constraint.
        for code in ["23505", "23514", "42601", "19", "2067", "1"] {
            assert!(!unavailable_code(code), "{code}");
        }
        assert!(matches!(
            store_error(sqlx::Error::PoolTimedOut),
            StoreError::Unavailable(_)
        ));
        assert!(matches!(
            store_error(sqlx::Error::RowNotFound),
            StoreError::Other(_)
        ));
    }

    #[test]
    fn a_policy_row_becomes_a_policy_record() {
        let rec = PolicyRecord::try_from(policy_row(
            "strict",
            r#"{"servers":{"a/b":{"enforcement_mode":"advisory"}}}"#,
        ))
        .unwrap();
        assert_eq!(rec.policy.enforcement_mode, Mode::Strict);
        assert_eq!(rec.policy.mode_for("a/b"), Mode::Advisory);
        assert!(!rec.policy.approval_required);
        assert_eq!((rec.revision, rec.updated_at.millis()), (4, 5));
    }

    #[test]
    fn corrupt_rows_are_errors_not_panics() {
        assert!(PolicyRecord::try_from(policy_row("lenient", "{}")).is_err());
        assert!(PolicyRecord::try_from(policy_row("strict", "not json")).is_err());
        let meta = VersionMetaRow {
            version: "1.0.0".into(),
            digest: "sha256:00".into(),
            published_by: "p".into(),
            published_at: 1,
            status: "unknown".into(),
            revision: 1,
            status_changed_at: 1,
            status_reason: None,
            approved_by: None,
            approved_at: None,
        };
        assert!(VersionMeta::try_from(meta).is_err());
        let tenant = TenantRow {
            id: "Not A Tenant".into(),
            name: "n".into(),
            created_at: 0,
            created_by: "c".into(),
        };
        assert!(pinfold_tenancy::TenantRecord::try_from(tenant).is_err());
    }

    #[test]
    fn a_version_row_keeps_every_status_column() {
        let meta = VersionMeta::try_from(VersionMetaRow {
            version: "1.0.0".into(),
            digest: "sha256:00".into(),
            published_by: "p".into(),
            published_at: 1,
            status: "approved".into(),
            revision: 2,
            status_changed_at: 3,
            status_reason: Some("ok".into()),
            approved_by: Some("r".into()),
            approved_at: Some(3),
        })
        .unwrap();
        assert_eq!(meta.status.status, Status::Approved);
        assert_eq!(meta.status.revision, 2);
        assert_eq!(meta.status.changed_at.millis(), 3);
        assert_eq!(meta.status.reason.as_deref(), Some("ok"));
        assert_eq!(meta.status.approved_by.as_deref(), Some("r"));
        assert_eq!(meta.status.approved_at.map(|t| t.millis()), Some(3));
    }

    #[test]
    fn a_server_without_versions_was_last_updated_when_created() {
        let (key, row): (String, ServerRow) = ServerSummaryRow {
            name: "io.acme/files".into(),
            display_name: "io.Acme/files".into(),
            created_at: 10,
            title: None,
            description: None,
            updated_at: None,
            version_count: 0,
        }
        .into();
        assert_eq!(key, "io.acme/files");
        assert_eq!(row.name, "io.Acme/files");
        assert_eq!(row.updated_at.millis(), 10);
    }
}
