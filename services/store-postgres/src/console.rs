//! The console's session store on PostgreSQL (every statement in a
//! transaction bound to its tenant, the background purge's to the purge
//! binding).

use async_trait::async_trait;
use pinfold_console::{ConsoleSession, ConsoleStore, ConsoleStoreError};
use pinfold_core::ids::{TenantId, Timestamp};
use pinfold_store_rows::{ConsoleSessionDbRow, console_error as err};

use crate::store::PgStore;
use crate::tenant_tx::PURGE_MARKER;

const COLUMNS: &str = "id_hash, subject, issuer, roles, created_at, expires_at";

#[async_trait]
impl ConsoleStore for PgStore {
    async fn insert_console_session(
        &self,
        tenant: &TenantId,
        s: &ConsoleSession,
    ) -> Result<(), ConsoleStoreError> {
        let mut tx = self.tenant_tx(tenant).await.map_err(err)?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO console_sessions (tenant_id, {COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"
        )))
        .bind(tenant.as_str())
        .bind(&s.id_hash)
        .bind(&s.subject)
        .bind(&s.issuer)
        .bind(&s.roles)
        .bind(s.created_at.millis())
        .bind(s.expires_at.millis())
        .execute(&mut *tx)
        .await
        .map_err(err)?;
        tx.commit().await.map_err(err)
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
             WHERE tenant_id = $1 AND id_hash = $2 AND expires_at > $3"
            )))
            .bind(tenant.as_str())
            .bind(id_hash)
            .bind(now.millis())
            .fetch_optional(&mut *self.tenant_tx(tenant).await.map_err(err)?)
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
        let mut tx = self.tenant_tx(tenant).await.map_err(err)?;
        let done =
            sqlx::query("DELETE FROM console_sessions WHERE tenant_id = $1 AND id_hash = $2")
                .bind(tenant.as_str())
                .bind(id_hash)
                .execute(&mut *tx)
                .await
                .map_err(err)?;
        tx.commit().await.map_err(err)?;
        Ok(done.rows_affected() > 0)
    }

    async fn purge_console_sessions(
        &self,
        tenant: &TenantId,
        now: Timestamp,
    ) -> Result<u64, ConsoleStoreError> {
        let mut tx = self.tenant_tx(tenant).await.map_err(err)?;
        let done =
            sqlx::query("DELETE FROM console_sessions WHERE tenant_id = $1 AND expires_at <= $2")
                .bind(tenant.as_str())
                .bind(now.millis())
                .execute(&mut *tx)
                .await
                .map_err(err)?;
        tx.commit().await.map_err(err)?;
        Ok(done.rows_affected())
    }

    async fn purge_expired_console_sessions(
        &self,
        before: Timestamp,
        limit: u32,
    ) -> Result<u64, ConsoleStoreError> {
        // The purge binding (migration 0011): expired rows of every tenant,
        // nothing else, as for resolve sessions and grant states.
        let mut tx = self.bound_tx(PURGE_MARKER).await.map_err(err)?;
        let n = sqlx::query(
            "DELETE FROM console_sessions WHERE (tenant_id, id_hash) IN
                (SELECT tenant_id, id_hash FROM console_sessions WHERE expires_at < $1 LIMIT $2)",
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
