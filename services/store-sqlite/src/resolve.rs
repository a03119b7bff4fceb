//! The resolve service's session store on SQLite.

use async_trait::async_trait;
use signet_core::ids::{TenantId, Timestamp};
use signet_resolve::{AuditNote, CachePolicy, SessionRow, SessionStore, SessionStoreError};
use signet_tenancy::StoreError;
use signet_tenancy::model::NewAuditEvent;
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use crate::{SqliteStore, err, insert_audit};

fn serr(e: sqlx::Error) -> SessionStoreError {
    if let sqlx::Error::Database(db) = &e
        && db.is_foreign_key_violation()
    {
        return SessionStoreError::VersionNotFound;
    }
    aerr(err(e))
}

fn aerr(e: StoreError) -> SessionStoreError {
    match e {
        StoreError::Unavailable(m) => SessionStoreError::Unavailable(m),
        StoreError::Conflict(_) => SessionStoreError::Conflict,
        other => SessionStoreError::Other(other.to_string()),
    }
}

const COLUMNS: &str = "id, principal, issuer, server, version, digest, mode, cache_policy, \
     upstream_url, upstream_sealed, created_at, expires_at";

fn session_from_row(r: &SqliteRow) -> Result<SessionRow, SessionStoreError> {
    let mode: String = r.try_get("mode").map_err(serr)?;
    let cache: String = r.try_get("cache_policy").map_err(serr)?;
    Ok(SessionRow {
        id: r.try_get("id").map_err(serr)?,
        principal: r.try_get("principal").map_err(serr)?,
        issuer: r.try_get("issuer").map_err(serr)?,
        server: r.try_get("server").map_err(serr)?,
        version: r.try_get("version").map_err(serr)?,
        digest: r.try_get("digest").map_err(serr)?,
        mode: mode
            .parse()
            .map_err(|_| SessionStoreError::Other(format!("stored mode {mode}")))?,
        cache_policy: CachePolicy::parse(&cache)
            .ok_or_else(|| SessionStoreError::Other(format!("stored cache policy {cache}")))?,
        upstream_url: r.try_get("upstream_url").map_err(serr)?,
        upstream_sealed: r.try_get("upstream_sealed").map_err(serr)?,
        created_at: Timestamp::from_millis(r.try_get("created_at").map_err(serr)?),
        expires_at: Timestamp::from_millis(r.try_get("expires_at").map_err(serr)?),
    })
}

fn audit_event(a: &AuditNote) -> NewAuditEvent {
    NewAuditEvent {
        at: a.at,
        actor: a.actor.clone(),
        kind: a.kind.to_owned(),
        server: a.server.clone(),
        version: a.version.clone(),
        data: a.data.clone(),
    }
}

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
        insert_audit(&mut tx, tenant, &audit_event(audit))
            .await
            .map_err(aerr)?;
        tx.commit().await.map_err(serr)
    }

    async fn session(
        &self,
        tenant: &TenantId,
        id: &str,
    ) -> Result<Option<SessionRow>, SessionStoreError> {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM resolve_sessions WHERE tenant_id = ? AND id = ?"
        )))
        .bind(tenant.as_str())
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(serr)?
        .as_ref()
        .map(session_from_row)
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
        insert_audit(&mut tx, tenant, &audit_event(audit))
            .await
            .map_err(aerr)?;
        tx.commit().await.map_err(serr)?;
        Ok(true)
    }

    async fn sessions(
        &self,
        tenant: &TenantId,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<SessionRow>, SessionStoreError> {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM resolve_sessions
             WHERE tenant_id = ? AND id > ? ORDER BY id LIMIT ?"
        )))
        .bind(tenant.as_str())
        .bind(after.unwrap_or(""))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(serr)?
        .iter()
        .map(session_from_row)
        .collect()
    }

    async fn record(&self, tenant: &TenantId, audit: &AuditNote) -> Result<(), SessionStoreError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(serr)?;
        insert_audit(&mut tx, tenant, &audit_event(audit))
            .await
            .map_err(aerr)?;
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
