//! The embedded migrations and their application: by the runtime pool, or
//! over one connection as the schema's owner, and which are still pending.

use std::str::FromStr;

use pinfold_store_rows::store_error as err;
use pinfold_tenancy::StoreError;
use sqlx::postgres::PgConnectOptions;

use crate::store::PgStore;

/// The embedded migrations (`migrations/postgres`).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres");

impl PgStore {
    /// Applies pending migrations; a no-op when none are pending. Replicas
    /// starting together serialise on sqlx's advisory lock.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        MIGRATOR
            .run(&self.pool)
            .await
            .map_err(|e| StoreError::Other(format!("migration failed: {e}")))
    }

    /// Applies pending migrations over one connection to `owner_url`: the
    /// role owning the schema, which the runtime role never is (it owns
    /// nothing, so it could not create or alter a table). Migration 0006
    /// creates the `pinfold_runtime` group role when it does not exist, which
    /// then needs `CREATEROLE` (or a role created beforehand).
    pub async fn migrate_as_owner(owner_url: &str) -> Result<(), StoreError> {
        use sqlx::Connection as _;
        let opts = PgConnectOptions::from_str(owner_url).map_err(err)?;
        let mut conn = sqlx::PgConnection::connect_with(&opts).await.map_err(err)?;
        let ran = MIGRATOR
            .run(&mut conn)
            .await
            .map_err(|e| StoreError::Other(format!("migration failed: {e}")));
        let _ = conn.close().await;
        ran
    }

    /// Versions of the embedded migrations not yet applied.
    pub async fn pending_migrations(&self) -> Result<Vec<i64>, StoreError> {
        let exists: Option<String> =
            sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations')::text")
                .fetch_one(&self.pool)
                .await
                .map_err(err)?;
        let applied: Vec<i64> = if exists.is_some() {
            sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
                .fetch_all(&self.pool)
                .await
                .map_err(err)?
        } else {
            Vec::new()
        };
        Ok(MIGRATOR
            .iter()
            .map(|m| m.version)
            .filter(|v| !applied.contains(v))
            .collect())
    }
}
