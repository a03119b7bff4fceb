//! The database a configuration names: the backend `database_url` points
//! at (SQLite in the data directory when empty), the PostgreSQL owner URL
//! beside it, `[postgres]` (the pool), and URLs with their password
//! redacted for messages.

use std::path::Path;

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// Which database a configuration points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite file.
    Sqlite(String),
    /// A PostgreSQL server.
    Postgres(String),
}

/// The database `database_url` points at; empty: SQLite in `data_dir`.
pub(super) fn backend(database_url: &str, data_dir: &Path) -> anyhow::Result<Backend> {
    let url = database_url.trim();
    if url.is_empty() {
        let path = data_dir.join("pinfold.db");
        return Ok(Backend::Sqlite(format!("sqlite://{}", path.display())));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Backend::Postgres(url.to_owned()))
    } else if url.starts_with("sqlite:") {
        Ok(Backend::Sqlite(url.to_owned()))
    } else {
        bail!("database_url must start with postgres://, postgresql:// or sqlite:")
    }
}

/// `database_owner_url` when set: a PostgreSQL URL, and only beside a
/// PostgreSQL `database_url` (read from `data_dir` as [`backend`] does).
pub(super) fn owner_url(
    database_owner_url: Option<&str>,
    database_url: &str,
    data_dir: &Path,
) -> anyhow::Result<Option<String>> {
    let Some(url) = database_owner_url.map(str::trim).filter(|u| !u.is_empty()) else {
        return Ok(None);
    };
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        bail!("database_owner_url must start with postgres:// or postgresql://");
    }
    if !matches!(backend(database_url, data_dir)?, Backend::Postgres(_)) {
        bail!("database_owner_url is for PostgreSQL; database_url names SQLite");
    }
    Ok(Some(url.to_owned()))
}

/// PostgreSQL pool settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresConfig {
    /// Largest number of connections per replica.
    pub max_connections: u32,
    /// Seconds a request waits for a connection.
    pub acquire_timeout_secs: u64,
    /// Server-side statement timeout, in seconds.
    pub statement_timeout_secs: u64,
}

impl PostgresConfig {
    /// Checks `[postgres]`.
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        if self.max_connections == 0 {
            bail!("postgres.max_connections must be greater than 0");
        }
        Ok(())
    }
}

/// A database URL (`database_url`, `database_owner_url`) with any password
/// replaced by `***`, for messages.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..s + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_url("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact_url("postgres://h/db"), "postgres://h/db");
    }
}
