//! pinfold-store-sqlite: the embedded SQLite backend.
//!
//! One of the only two crates that contain SQL. It implements the store
//! traits of the service crates on a single SQLite file: WAL journal,
//! `synchronous=NORMAL`, a busy timeout, foreign keys on, and every write in
//! a `BEGIN IMMEDIATE` transaction so concurrent writers queue on the lock
//! instead of failing with "database is locked" halfway through.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use pinfold_core::ids::{TenantId, Timestamp};
use pinfold_store_rows::{AuditRow, PolicyRow, TenantRow};
use pinfold_tenancy::model::{
    AuditEvent, AuditFilter, NewAuditEvent, Policy, PolicyRecord, TenantRecord,
    policy_updated_event, tenant_created_event,
};
use pinfold_tenancy::{StoreError, TenantStore};
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

mod console;
mod guard;
mod registry;
mod resolve;
mod scope;
mod sealed;

/// The embedded migrations (`migrations/sqlite`).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite");

/// A SQLite-backed store.
#[derive(Clone, Debug)]
pub struct SqliteStore {
    pool: SqlitePool,
}

pub(crate) use pinfold_store_rows::store_error as err;

impl SqliteStore {
    /// Opens (creating if needed) the database at `url` (`sqlite://path` or
    /// `sqlite::memory:`).
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let opts = SqliteConnectOptions::from_str(url).map_err(err)?;
        Self::with_options(opts).await
    }

    /// Opens (creating if needed) the database file at `path`.
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        Self::with_options(SqliteConnectOptions::new().filename(path)).await
    }

    async fn with_options(opts: SqliteConnectOptions) -> Result<Self, StoreError> {
        let opts = opts
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(opts)
            .await
            .map_err(err)?;
        Ok(Self { pool })
    }

    /// The pool (for tests that check database-level guarantees).
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Applies pending migrations; a no-op when none are pending.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        MIGRATOR
            .run(&self.pool)
            .await
            .map_err(|e| StoreError::Other(format!("migration failed: {e}")))
    }

    /// Versions of the embedded migrations not yet applied.
    pub async fn pending_migrations(&self) -> Result<Vec<i64>, StoreError> {
        let exists: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
        )
        .fetch_optional(&self.pool)
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

    /// A write transaction: `BEGIN IMMEDIATE` takes the write lock at once,
    /// so concurrent writers queue on the busy timeout instead of failing
    /// when a read lock cannot be upgraded.
    pub(crate) async fn write_tx(
        &self,
    ) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, sqlx::Error> {
        self.pool.begin_with("BEGIN IMMEDIATE").await
    }

    /// Closes the pool, waiting for connections to be returned.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

pub(crate) async fn insert_audit(
    tx: &mut sqlx::SqliteConnection,
    tenant: &TenantId,
    e: &NewAuditEvent,
) -> Result<i64, StoreError> {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO audit_events (tenant_id, at, actor, kind, server, version, data)
         VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
    )
    .bind(tenant.as_str())
    .bind(e.at.millis())
    .bind(&e.actor)
    .bind(&e.kind)
    .bind(&e.server)
    .bind(&e.version)
    .bind(e.data.to_string())
    .fetch_one(tx)
    .await
    .map_err(err)?;
    Ok(id)
}

fn overrides_json(p: &Policy) -> Result<String, StoreError> {
    serde_json::to_string(&p.overrides).map_err(|e| StoreError::Other(e.to_string()))
}

fn egress_json(p: &Policy) -> Result<String, StoreError> {
    serde_json::to_string(&p.egress_allow).map_err(|e| StoreError::Other(e.to_string()))
}

#[async_trait]
impl TenantStore for SqliteStore {
    async fn create_tenant(
        &self,
        tenant: &TenantId,
        name: &str,
        policy: &Policy,
        actor: &str,
        at: Timestamp,
    ) -> Result<TenantRecord, StoreError> {
        let mut tx = self.write_tx().await.map_err(err)?;
        sqlx::query("INSERT INTO tenants (id, name, created_at, created_by) VALUES (?, ?, ?, ?)")
            .bind(tenant.as_str())
            .bind(name)
            .bind(at.millis())
            .bind(actor)
            .execute(&mut *tx)
            .await
            .map_err(err)?;
        sqlx::query(
            "INSERT INTO tenant_policies
             (tenant_id, enforcement_mode, approval_required, overrides, egress_allow, revision, updated_at, updated_by)
             VALUES (?, ?, ?, ?, ?, 1, ?, ?)",
        )
        .bind(tenant.as_str())
        .bind(policy.enforcement_mode.as_str())
        .bind(policy.approval_required as i64)
        .bind(overrides_json(policy)?)
        .bind(egress_json(policy)?)
        .bind(at.millis())
        .bind(actor)
        .execute(&mut *tx)
        .await
        .map_err(err)?;
        insert_audit(
            &mut tx,
            tenant,
            &tenant_created_event(name, policy, actor, at),
        )
        .await?;
        tx.commit().await.map_err(err)?;
        Ok(TenantRecord {
            id: tenant.clone(),
            name: name.to_owned(),
            created_at: at,
            created_by: actor.to_owned(),
        })
    }

    async fn tenant(&self, tenant: &TenantId) -> Result<Option<TenantRecord>, StoreError> {
        let row = sqlx::query_as::<_, TenantRow>(
            "SELECT id, name, created_at, created_by FROM tenants WHERE id = ?",
        )
        .bind(tenant.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(err)?;
        row.map(TenantRecord::try_from).transpose()
    }

    async fn policy(&self, tenant: &TenantId) -> Result<Option<PolicyRecord>, StoreError> {
        let row = sqlx::query_as::<_, PolicyRow>(
            "SELECT enforcement_mode, approval_required, overrides, egress_allow, revision, updated_at, updated_by
             FROM tenant_policies WHERE tenant_id = ?",
        )
        .bind(tenant.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(err)?;
        row.map(PolicyRecord::try_from).transpose()
    }

    async fn put_policy(
        &self,
        tenant: &TenantId,
        policy: &Policy,
        expected_revision: Option<i64>,
        actor: &str,
        at: Timestamp,
    ) -> Result<PolicyRecord, StoreError> {
        let mut tx = self.write_tx().await.map_err(err)?;
        let current: Option<i64> =
            sqlx::query_scalar("SELECT revision FROM tenant_policies WHERE tenant_id = ?")
                .bind(tenant.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(err)?;
        let Some(current) = current else {
            return Err(StoreError::NotFound);
        };
        if expected_revision.is_some_and(|e| e != current) {
            return Err(StoreError::PreconditionFailed { current });
        }
        let row = sqlx::query_as::<_, PolicyRow>(
            "UPDATE tenant_policies
             SET enforcement_mode = ?, approval_required = ?, overrides = ?, egress_allow = ?,
                 revision = revision + 1, updated_at = ?, updated_by = ?
             WHERE tenant_id = ?
             RETURNING enforcement_mode, approval_required, overrides, egress_allow, revision, updated_at, updated_by",
        )
        .bind(policy.enforcement_mode.as_str())
        .bind(policy.approval_required as i64)
        .bind(overrides_json(policy)?)
        .bind(egress_json(policy)?)
        .bind(at.millis())
        .bind(actor)
        .bind(tenant.as_str())
        .fetch_one(&mut *tx)
        .await
        .map_err(err)?;
        let rec = PolicyRecord::try_from(row)?;
        insert_audit(
            &mut tx,
            tenant,
            &policy_updated_event(rec.revision, policy, actor, at),
        )
        .await?;
        tx.commit().await.map_err(err)?;
        Ok(rec)
    }

    async fn append_audit(
        &self,
        tenant: &TenantId,
        event: &NewAuditEvent,
    ) -> Result<i64, StoreError> {
        let mut tx = self.write_tx().await.map_err(err)?;
        let id = insert_audit(&mut tx, tenant, event).await?;
        tx.commit().await.map_err(err)?;
        Ok(id)
    }

    async fn audit(
        &self,
        tenant: &TenantId,
        filter: &AuditFilter,
        after: Option<i64>,
        limit: u32,
    ) -> Result<Vec<AuditEvent>, StoreError> {
        let rows = sqlx::query_as::<_, AuditRow>(
            "SELECT id, at, actor, kind, server, version, data FROM audit_events
             WHERE tenant_id = ? AND id > ?
               AND (? IS NULL OR server = ?) AND (? IS NULL OR kind = ?)
               AND (? IS NULL OR actor = ?) AND (? IS NULL OR at >= ?)
               AND (? IS NULL OR at < ?)
             ORDER BY id LIMIT ?",
        )
        .bind(tenant.as_str())
        .bind(after.unwrap_or(0))
        .bind(&filter.server)
        .bind(&filter.server)
        .bind(&filter.kind)
        .bind(&filter.kind)
        .bind(&filter.actor)
        .bind(&filter.actor)
        .bind(filter.since.map(|t| t.millis()))
        .bind(filter.since.map(|t| t.millis()))
        .bind(filter.until.map(|t| t.millis()))
        .bind(filter.until.map(|t| t.millis()))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(err)?;
        rows.into_iter().map(AuditEvent::try_from).collect()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map_err(err)?;
        Ok(())
    }
}
