//! The console's session store on SQLite.

use async_trait::async_trait;
use pinfold_console::{ConsoleSession, ConsoleStore, ConsoleStoreError};
use pinfold_core::ids::{TenantId, Timestamp};
use pinfold_store_rows::{ConsoleSessionDbRow, console_error as err};

use crate::SqliteStore;

const COLUMNS: &str = "id_hash, subject, issuer, roles, created_at, expires_at";

#[async_trait]
impl ConsoleStore for SqliteStore {
    async fn insert_console_session(
        &self,
        tenant: &TenantId,
        s: &ConsoleSession,
    ) -> Result<(), ConsoleStoreError> {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO console_sessions (tenant_id, {COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
        )))
        .bind(tenant.as_str())
        .bind(&s.id_hash)
        .bind(&s.subject)
        .bind(&s.issuer)
        .bind(&s.roles)
        .bind(s.created_at.millis())
        .bind(s.expires_at.millis())
        .execute(&self.pool)
        .await
        .map_err(err)?;
        Ok(())
    }

    async fn console_session(
        &self,
        tenant: &TenantId,
        id_hash: &str,
        now: Timestamp,
    ) -> Result<Option<ConsoleSession>, ConsoleStoreError> {
        Ok(
            sqlx::query_as::<_, ConsoleSessionDbRow>(sqlx::AssertSqlSafe(format!(
                "SELECT {COLUMNS} FROM console_sessions
             WHERE tenant_id = ? AND id_hash = ? AND expires_at > ?"
            )))
            .bind(tenant.as_str())
            .bind(id_hash)
            .bind(now.millis())
            .fetch_optional(&self.pool)
            .await
            .map_err(err)?
            .map(ConsoleSession::from),
        )
    }

    async fn end_console_session(
        &self,
        tenant: &TenantId,
        id_hash: &str,
    ) -> Result<bool, ConsoleStoreError> {
        let done = sqlx::query("DELETE FROM console_sessions WHERE tenant_id = ? AND id_hash = ?")
            .bind(tenant.as_str())
            .bind(id_hash)
            .execute(&self.pool)
            .await
            .map_err(err)?;
        Ok(done.rows_affected() > 0)
    }

    async fn purge_console_sessions(
        &self,
        tenant: &TenantId,
        now: Timestamp,
    ) -> Result<u64, ConsoleStoreError> {
        let done =
            sqlx::query("DELETE FROM console_sessions WHERE tenant_id = ? AND expires_at <= ?")
                .bind(tenant.as_str())
                .bind(now.millis())
                .execute(&self.pool)
                .await
                .map_err(err)?;
        Ok(done.rows_affected())
    }

    async fn purge_expired_console_sessions(
        &self,
        before: Timestamp,
        limit: u32,
    ) -> Result<u64, ConsoleStoreError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await.map_err(err)?;
        let n = sqlx::query(
            "DELETE FROM console_sessions WHERE rowid IN
                (SELECT rowid FROM console_sessions WHERE expires_at < ? LIMIT ?)",
        )
        .bind(before.millis())
        .bind(i64::from(limit))
        .execute(&mut *tx)
        .await
        .map_err(err)?
        .rows_affected();
        tx.commit().await.map_err(err)?;
        Ok(n)
    }
}
