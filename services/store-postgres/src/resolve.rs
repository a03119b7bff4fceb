//! The resolve service's session store on PostgreSQL.

use async_trait::async_trait;
use pinfold_core::ids::{TenantId, Timestamp};
use pinfold_resolve::{AuditNote, SessionRow, SessionStore, SessionStoreError};
use pinfold_store_rows::{SessionDbRow, session_error as serr, session_error_from as aerr};

use crate::notify::RESOLVE_CHANNEL;
use crate::store::PgStore;
use crate::tenancy::insert_audit;
use crate::tenant_tx::PURGE_MARKER;

const COLUMNS: &str = "id, principal, issuer, server, version, digest, mode, cache_policy, \
     upstream_url, upstream_sealed, created_at, expires_at";

#[async_trait]
impl SessionStore for PgStore {
    async fn insert_session(
        &self,
        tenant: &TenantId,
        s: &SessionRow,
        audit: &AuditNote,
    ) -> Result<(), SessionStoreError> {
        let mut tx = self.tenant_tx(tenant).await.map_err(serr)?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO resolve_sessions (tenant_id, {COLUMNS})
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
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
            "SELECT {COLUMNS} FROM resolve_sessions WHERE tenant_id = $1 AND id = $2"
        )))
        .bind(tenant.as_str())
        .bind(id)
        .fetch_optional(&mut *self.tenant_tx(tenant).await.map_err(serr)?)
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
        let mut tx = self.tenant_tx(tenant).await.map_err(serr)?;
        let gone = sqlx::query("DELETE FROM resolve_sessions WHERE tenant_id = $1 AND id = $2")
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
        self.notify_session_closed(tenant, id).await;
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
             WHERE tenant_id = $1 AND id > $2 ORDER BY id LIMIT $3"
        )))
        .bind(tenant.as_str())
        .bind(after.unwrap_or(""))
        .bind(i64::from(limit))
        .fetch_all(&mut *self.tenant_tx(tenant).await.map_err(serr)?)
        .await
        .map_err(serr)?
        .into_iter()
        .map(SessionRow::try_from)
        .collect()
    }

    async fn record(&self, tenant: &TenantId, audit: &AuditNote) -> Result<(), SessionStoreError> {
        let mut tx = self.tenant_tx(tenant).await.map_err(serr)?;
        insert_audit(&mut tx, tenant, audit).await.map_err(aerr)?;
        tx.commit().await.map_err(serr)
    }

    async fn purge_expired(&self, before: Timestamp, limit: u32) -> Result<u64, SessionStoreError> {
        let mut tx = self.bound_tx(PURGE_MARKER).await.map_err(serr)?;
        let n = sqlx::query(
            "DELETE FROM resolve_sessions WHERE (tenant_id, id) IN
                (SELECT tenant_id, id FROM resolve_sessions WHERE expires_at < $1 LIMIT $2)",
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

impl PgStore {
    /// Announces a closed session (`tenant<TAB>id`) after its commit, so
    /// every replica drops what it cached for it. If this is lost, other
    /// replicas forget the session when their copy reaches its time to
    /// live (30 s), as the registry's ETag index does.
    async fn notify_session_closed(&self, tenant: &TenantId, id: &str) {
        let sent = sqlx::query("SELECT pg_notify($1, $2)")
            .bind(RESOLVE_CHANNEL)
            .bind(format!("{tenant}\t{id}"))
            .execute(&self.pool)
            .await;
        if let Err(e) = sent {
            tracing::warn!(error = %e, "session close notification failed; other replicas forget the session within 30 s");
        }
    }
}
