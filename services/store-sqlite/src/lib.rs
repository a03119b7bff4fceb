//! signet-store-sqlite: the embedded SQLite backend.
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
use serde_json::Value;
use signet_core::ids::{TenantId, Timestamp};
use signet_tenancy::model::{
    AuditEvent, AuditFilter, NewAuditEvent, Policy, PolicyOverrides, PolicyRecord, TenantRecord,
};
use signet_tenancy::{StoreError, TenantStore};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqlitePool};

mod registry;

/// The embedded migrations (`migrations/sqlite`).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite");

/// A SQLite-backed store.
#[derive(Clone, Debug)]
pub struct SqliteStore {
    pool: SqlitePool,
}

pub(crate) fn err(e: sqlx::Error) -> StoreError {
    match &e {
        sqlx::Error::Database(db) if db.is_unique_violation() => {
            StoreError::Conflict(db.message().to_owned())
        }
        sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed => {
            StoreError::Unavailable(e.to_string())
        }
        _ => StoreError::Other(e.to_string()),
    }
}

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

fn policy_from_row(row: &sqlx::sqlite::SqliteRow) -> Result<PolicyRecord, StoreError> {
    let mode: String = row.try_get("enforcement_mode").map_err(err)?;
    let overrides: String = row.try_get("overrides").map_err(err)?;
    let overrides: PolicyOverrides = serde_json::from_str(&overrides)
        .map_err(|e| StoreError::Other(format!("stored overrides: {e}")))?;
    Ok(PolicyRecord {
        policy: Policy {
            enforcement_mode: mode
                .parse::<signet_tenancy::Mode>()
                .ok()
                .ok_or_else(|| StoreError::Other(format!("stored mode {mode}")))?,
            approval_required: row.try_get::<i64, _>("approval_required").map_err(err)? != 0,
            overrides,
        },
        revision: row.try_get("revision").map_err(err)?,
        updated_at: Timestamp::from_millis(row.try_get("updated_at").map_err(err)?),
        updated_by: row.try_get("updated_by").map_err(err)?,
    })
}

fn overrides_json(p: &Policy) -> Result<String, StoreError> {
    serde_json::to_string(&p.overrides).map_err(|e| StoreError::Other(e.to_string()))
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
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await.map_err(err)?;
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
             (tenant_id, enforcement_mode, approval_required, overrides, revision, updated_at, updated_by)
             VALUES (?, ?, ?, ?, 1, ?, ?)",
        )
        .bind(tenant.as_str())
        .bind(policy.enforcement_mode.as_str())
        .bind(policy.approval_required as i64)
        .bind(overrides_json(policy)?)
        .bind(at.millis())
        .bind(actor)
        .execute(&mut *tx)
        .await
        .map_err(err)?;
        insert_audit(
            &mut tx,
            tenant,
            &NewAuditEvent {
                at,
                actor: actor.to_owned(),
                kind: "tenant.created".into(),
                server: None,
                version: None,
                data: serde_json::json!({ "name": name, "policy": policy }),
            },
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
        let row = sqlx::query("SELECT name, created_at, created_by FROM tenants WHERE id = ?")
            .bind(tenant.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(err)?;
        row.map(|r| {
            Ok(TenantRecord {
                id: tenant.clone(),
                name: r.try_get("name").map_err(err)?,
                created_at: Timestamp::from_millis(r.try_get("created_at").map_err(err)?),
                created_by: r.try_get("created_by").map_err(err)?,
            })
        })
        .transpose()
    }

    async fn policy(&self, tenant: &TenantId) -> Result<Option<PolicyRecord>, StoreError> {
        let row = sqlx::query(
            "SELECT enforcement_mode, approval_required, overrides, revision, updated_at, updated_by
             FROM tenant_policies WHERE tenant_id = ?",
        )
        .bind(tenant.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(err)?;
        row.as_ref().map(policy_from_row).transpose()
    }

    async fn put_policy(
        &self,
        tenant: &TenantId,
        policy: &Policy,
        expected_revision: Option<i64>,
        actor: &str,
        at: Timestamp,
    ) -> Result<PolicyRecord, StoreError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await.map_err(err)?;
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
        let row = sqlx::query(
            "UPDATE tenant_policies
             SET enforcement_mode = ?, approval_required = ?, overrides = ?,
                 revision = revision + 1, updated_at = ?, updated_by = ?
             WHERE tenant_id = ?
             RETURNING enforcement_mode, approval_required, overrides, revision, updated_at, updated_by",
        )
        .bind(policy.enforcement_mode.as_str())
        .bind(policy.approval_required as i64)
        .bind(overrides_json(policy)?)
        .bind(at.millis())
        .bind(actor)
        .bind(tenant.as_str())
        .fetch_one(&mut *tx)
        .await
        .map_err(err)?;
        let rec = policy_from_row(&row)?;
        insert_audit(
            &mut tx,
            tenant,
            &NewAuditEvent {
                at,
                actor: actor.to_owned(),
                kind: "policy.updated".into(),
                server: None,
                version: None,
                data: serde_json::json!({ "revision": rec.revision, "policy": policy }),
            },
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
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await.map_err(err)?;
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
        let rows = sqlx::query(
            "SELECT id, at, actor, kind, server, version, data FROM audit_events
             WHERE tenant_id = ? AND id > ?
               AND (? IS NULL OR server = ?) AND (? IS NULL OR kind = ?)
             ORDER BY id LIMIT ?",
        )
        .bind(tenant.as_str())
        .bind(after.unwrap_or(0))
        .bind(&filter.server)
        .bind(&filter.server)
        .bind(&filter.kind)
        .bind(&filter.kind)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(err)?;
        rows.iter()
            .map(|r| {
                let data: String = r.try_get("data").map_err(err)?;
                Ok(AuditEvent {
                    id: r.try_get("id").map_err(err)?,
                    at: Timestamp::from_millis(r.try_get("at").map_err(err)?),
                    actor: r.try_get("actor").map_err(err)?,
                    kind: r.try_get("kind").map_err(err)?,
                    server: r.try_get("server").map_err(err)?,
                    version: r.try_get("version").map_err(err)?,
                    data: serde_json::from_str::<Value>(&data)
                        .map_err(|e| StoreError::Other(format!("stored audit data: {e}")))?,
                })
            })
            .collect()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map_err(err)?;
        Ok(())
    }
}
