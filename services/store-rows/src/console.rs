//! Rows of `console_sessions`.

use pinfold_console::{ConsoleSession, ConsoleStoreError};
use pinfold_core::ids::Timestamp;

use crate::error::is_unavailable;

/// The columns of `console_sessions` after `tenant_id`, in table order.
#[derive(Debug, sqlx::FromRow)]
pub struct ConsoleSessionDbRow {
    /// SHA-256 of the session secret (hex).
    pub id_hash: String,
    /// Token `sub`.
    pub subject: String,
    /// Token `iss`.
    pub issuer: String,
    /// Token roles, comma-separated.
    pub roles: String,
    /// Milliseconds since the epoch.
    pub created_at: i64,
    /// Milliseconds since the epoch.
    pub expires_at: i64,
}

impl From<ConsoleSessionDbRow> for ConsoleSession {
    fn from(r: ConsoleSessionDbRow) -> Self {
        ConsoleSession {
            id_hash: r.id_hash,
            subject: r.subject,
            issuer: r.issuer,
            roles: r.roles,
            created_at: Timestamp::from_millis(r.created_at),
            expires_at: Timestamp::from_millis(r.expires_at),
        }
    }
}

/// A driver error in console-store terms.
pub fn console_error(e: sqlx::Error) -> ConsoleStoreError {
    if is_unavailable(&e) {
        ConsoleStoreError::Unavailable(e.to_string())
    } else {
        ConsoleStoreError::Other(e.to_string())
    }
}
