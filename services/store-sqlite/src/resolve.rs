//! The resolve service's session store on SQLite.

use async_trait::async_trait;
use pinfold_core::ids::{TenantId, Timestamp};
use pinfold_resolve::{AuditNote, SessionRow, SessionStore, SessionStoreError};
use pinfold_store_rows::{SessionDbRow, session_error as serr, session_error_from as aerr};

use crate::{SqliteStore, insert_audit};

const COLUMNS: &str = "id, principal, issuer, server, version, digest, mode, cache_policy, \
     upstream_url, upstream_sealed, created_at, expires_at";

#[async_trait]
impl SessionStore for SqliteStore {
    async fn insert_session(
        &self,
        tenant: &TenantId,
        s: &SessionRow,
        audit: &AuditNote,
    ) -> Result<(), SessionStoreError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(serr)?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO resolve_sessions (tenant_id, {COLUMNS})
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )))
        .bind(tenant.as_str())
        .bind(&s.id)
        .bind(&s.principal)
        .bind(&s.issuer)
        .bind(&s.server)
        .bind(&s.version)
        .bind(&s.digest)
        .bind(s.mode.as_str())
        .bind(s.cache_policy.as_str())
        .bind(&s.upstream_url)
        .bind(&s.upstream_sealed)
        .bind(s.created_at.millis())
        .bind(s.expires_at.millis())
        .execute(&mut *tx)
        .await
        .map_err(serr)?;
        insert_audit(&mut tx, tenant, audit).await.map_err(aerr)?;
        tx.commit().await.map_err(serr)
    }

    async fn session(
        &self,
        tenant: &TenantId,
        id: &str,
    ) -> Result<Option<SessionRow>, SessionStoreError> {
        sqlx::query_as::<_, SessionDbRow>(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM resolve_sessions WHERE tenant_id = ? AND id = ?"
        )))
        .bind(tenant.as_str())
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(serr)?
        .map(SessionRow::try_from)
        .transpose()
    }

    async fn delete_session(
        &self,
        tenant: &TenantId,
        id: &str,
        audit: &AuditNote,
    ) -> Result<bool, SessionStoreError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(serr)?;
        let gone = sqlx::query("DELETE FROM resolve_sessions WHERE tenant_id = ? AND id = ?")
            .bind(tenant.as_str())
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(serr)?
            .rows_affected();
        if gone == 0 {
            return Ok(false);
        }
        insert_audit(&mut tx, tenant, audit).await.map_err(aerr)?;
        tx.commit().await.map_err(serr)?;
        Ok(true)
    }

    async fn sessions(
        &self,
        tenant: &TenantId,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<SessionRow>, SessionStoreError> {
        sqlx::query_as::<_, SessionDbRow>(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM resolve_sessions
             WHERE tenant_id = ? AND id > ? ORDER BY id LIMIT ?"
        )))
        .bind(tenant.as_str())
        .bind(after.unwrap_or(""))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(serr)?
        .into_iter()
        .map(SessionRow::try_from)
        .collect()
    }

    async fn record(&self, tenant: &TenantId, audit: &AuditNote) -> Result<(), SessionStoreError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(serr)?;
        insert_audit(&mut tx, tenant, audit).await.map_err(aerr)?;
        tx.commit().await.map_err(serr)
    }

    async fn purge_expired(&self, before: Timestamp, limit: u32) -> Result<u64, SessionStoreError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(serr)?;
        let n = sqlx::query(
            "DELETE FROM resolve_sessions WHERE rowid IN
                (SELECT rowid FROM resolve_sessions WHERE expires_at < ? LIMIT ?)",
        )
        .bind(before.millis())
        .bind(i64::from(limit))
        .execute(&mut *tx)
        .await
        .map_err(serr)?
        .rows_affected();
        tx.commit().await.map_err(serr)?;
        Ok(n)
    }
}
