//! Driver errors in the services' terms: which of them mean the database
//! cannot be reached ([`is_unavailable`]), and their mapping into the
//! tenancy and registry store errors.

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
    use super::*;

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
}
