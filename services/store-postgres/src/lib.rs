//! pinfold-store-postgres: the production PostgreSQL backend.
//!
//! One of the only two crates that contain SQL. It implements the store
//! traits of the service crates on PostgreSQL: a bounded pool with acquire,
//! connect and statement timeouts; uniqueness and immutability enforced by
//! constraints and triggers, so N stateless replicas can share one database.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pinfold_core::ids::{TenantId, Timestamp};
use pinfold_store_rows::{AuditRow, PolicyRow, TenantRow};
use pinfold_tenancy::model::{
    AuditEvent, AuditFilter, NewAuditEvent, Policy, PolicyRecord, TenantRecord,
    policy_updated_event, tenant_created_event,
};
use pinfold_tenancy::{StoreError, TenantStore};
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tokio::sync::watch;

pub mod nodelay;
pub mod registry;
mod resolve;
mod scope;

pub use registry::REGISTRY_CHANNEL;
pub use resolve::RESOLVE_CHANNEL;

/// The embedded migrations (`migrations/postgres`).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres");

/// Pool settings.
#[derive(Debug, Clone)]
pub struct PgSettings {
    /// Largest number of connections.
    pub max_connections: u32,
    /// How long a request waits for a free connection.
    pub acquire_timeout: Duration,
    /// Server-side `statement_timeout`.
    pub statement_timeout: Duration,
    /// Set `TCP_NODELAY` on each new TCP connection ([`nodelay`]). Always
    /// on in the server; off only to measure what it saves.
    pub tcp_nodelay: bool,
}

impl Default for PgSettings {
    fn default() -> Self {
        Self {
            max_connections: 16,
            acquire_timeout: Duration::from_secs(5),
            statement_timeout: Duration::from_secs(10),
            tcp_nodelay: true,
        }
    }
}

/// How long after its release check a pooled connection is trusted without
/// checking it again on acquire. A connection idle for longer is pinged
/// first (and replaced if that fails), as sqlx's `test_before_acquire` does.
const RECENTLY_CHECKED: Duration = Duration::from_secs(1);

/// A PostgreSQL-backed store.
#[derive(Clone, Debug)]
pub struct PgStore {
    pool: PgPool,
    listener: Arc<watch::Sender<ListenerStatus>>,
    notifier: registry::Notifier,
}

/// What the registry change listener of a [`PgStore`] has done so far, for
/// whoever must know that changes from other replicas are being received
/// (see [`PgStore::listener_status`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListenerStatus {
    /// `LISTEN` is in effect and the gap before it has been reported: every
    /// change committed from now on reaches `on_change`, or a later gap is
    /// reported.
    pub listening: bool,
    /// Notifications received so far, each handed to `on_change` before it
    /// is counted (from any tenant, and from any schema of the database,
    /// since channels are database-wide).
    pub delivered: u64,
    /// Gaps reported to `on_gap` so far: one when `LISTEN` first takes
    /// effect, and one each time it takes effect again after the
    /// connection was lost (never while it is lost).
    pub gaps: u64,
}

pub(crate) use pinfold_store_rows::store_error as err;

/// The `app.tenant_id` value of the background purge, the one binding that
/// spans tenants: migration 0005 lets it read and delete only rows whose
/// expiry has passed, in `resolve_sessions` and `scope_grant_states`. No
/// tenant id can equal it (tenant ids never contain `:`).
pub const PURGE_MARKER: &str = "maintenance:purge";

/// A transaction bound to one tenant (or to [`PURGE_MARKER`]).
pub(crate) type TenantTx = sqlx::Transaction<'static, sqlx::Postgres>;

/// `value` as an SQL string literal: quotes doubled; refuses NUL, which a
/// literal cannot hold. (With `standard_conforming_strings` on, the
/// default since PostgreSQL 9.1, a backslash is an ordinary character.)
fn sql_literal(value: &str) -> Result<String, sqlx::Error> {
    if value.contains('\0') {
        return Err(sqlx::Error::Protocol("NUL in a tenant binding".into()));
    }
    Ok(format!("'{}'", value.replace('\'', "''")))
}

/// The statement opening a transaction bound to `binding`: `BEGIN` and the
/// transaction-local `app.tenant_id` in one simple-query message, so one
/// round trip. `set_config(..., true)` ends with the transaction, so the
/// binding never outlives it on a pooled connection.
fn begin_bound(binding: &str) -> Result<String, sqlx::Error> {
    Ok(format!(
        "BEGIN; SELECT set_config('app.tenant_id', {}, true)",
        sql_literal(binding)?
    ))
}

impl PgStore {
    /// Connects to `url` (`postgres://...`). Fails when the server cannot be
    /// reached within the acquire timeout.
    pub async fn connect(url: &str, settings: &PgSettings) -> Result<Self, StoreError> {
        let opts = PgConnectOptions::from_str(url).map_err(err)?.options([(
            "statement_timeout",
            format!("{}ms", settings.statement_timeout.as_millis()),
        )]);
        let mut pool = PgPoolOptions::new()
            .max_connections(settings.max_connections)
            .acquire_timeout(settings.acquire_timeout)
            .idle_timeout(Duration::from_secs(300))
            // sqlx checks every connection as it goes back to the pool; a
            // connection that passed that check less than RECENTLY_CHECKED
            // ago is handed out without a second check, which saves a round
            // trip on every request under load (see bench/README.md).
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for >= RECENTLY_CHECKED {
                        sqlx::Connection::ping(conn).await?;
                    }
                    Ok(true)
                })
            });
        if settings.tcp_nodelay {
            // Once per new connection, never per query (see `nodelay`).
            pool = pool.after_connect(|conn, _| {
                Box::pin(async move {
                    nodelay::enable(conn).await;
                    Ok(())
                })
            });
        }
        let pool = pool.connect_with(opts).await.map_err(err)?;
        Ok(Self {
            notifier: registry::Notifier::start(pool.clone()),
            pool,
            listener: Arc::new(watch::Sender::new(ListenerStatus::default())),
        })
    }

    /// The pool (for tests that check database-level guarantees). Its
    /// connections are bound to no tenant: under row-level security a
    /// runtime role sees no tenant row through it.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// A transaction bound to `tenant`: every statement in it sees and
    /// writes only that tenant's rows (row-level security, migration
    /// 0005). One round trip opens it. A read-only caller may drop it
    /// instead of committing: sqlx then queues the `ROLLBACK`, which goes
    /// out with the connection's release check, off the request's path.
    pub(crate) async fn tenant_tx(&self, tenant: &TenantId) -> Result<TenantTx, sqlx::Error> {
        self.bound_tx(tenant.as_str()).await
    }

    /// A transaction bound to `binding` (a tenant id or [`PURGE_MARKER`]).
    pub(crate) async fn bound_tx(&self, binding: &str) -> Result<TenantTx, sqlx::Error> {
        self.pool
            .begin_with(sqlx::AssertSqlSafe(begin_bound(binding)?))
            .await
    }

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

    /// Closes the pool, waiting for connections to be returned.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

pub(crate) async fn insert_audit(
    tx: &mut sqlx::PgConnection,
    tenant: &TenantId,
    e: &NewAuditEvent,
) -> Result<i64, StoreError> {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO audit_events (tenant_id, at, actor, kind, server, version, data)
         VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb) RETURNING id",
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

const POLICY_COLUMNS: &str = "enforcement_mode, approval_required, overrides::text AS overrides, revision, updated_at, updated_by";

#[async_trait]
impl TenantStore for PgStore {
    async fn create_tenant(
        &self,
        tenant: &TenantId,
        name: &str,
        policy: &Policy,
        actor: &str,
        at: Timestamp,
    ) -> Result<TenantRecord, StoreError> {
        // Bound to the new tenant: its own row is the only one it may write.
        let mut tx = self.tenant_tx(tenant).await.map_err(err)?;
        sqlx::query(
            "INSERT INTO tenants (id, name, created_at, created_by) VALUES ($1, $2, $3, $4)",
        )
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
             VALUES ($1, $2, $3, $4::jsonb, 1, $5, $6)",
        )
        .bind(tenant.as_str())
        .bind(policy.enforcement_mode.as_str())
        .bind(policy.approval_required)
        .bind(overrides_json(policy)?)
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
            "SELECT id, name, created_at, created_by FROM tenants WHERE id = $1",
        )
        .bind(tenant.as_str())
        .fetch_optional(&mut *self.tenant_tx(tenant).await.map_err(err)?)
        .await
        .map_err(err)?;
        row.map(TenantRecord::try_from).transpose()
    }

    async fn policy(&self, tenant: &TenantId) -> Result<Option<PolicyRecord>, StoreError> {
        let row = sqlx::query_as::<_, PolicyRow>(sqlx::AssertSqlSafe(format!(
            "SELECT {POLICY_COLUMNS} FROM tenant_policies WHERE tenant_id = $1"
        )))
        .bind(tenant.as_str())
        .fetch_optional(&mut *self.tenant_tx(tenant).await.map_err(err)?)
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
        let mut tx = self.tenant_tx(tenant).await.map_err(err)?;
        // The row lock taken by UPDATE makes a concurrent writer wait and
        // then re-check the revision predicate against the committed row.
        let row = sqlx::query_as::<_, PolicyRow>(sqlx::AssertSqlSafe(format!(
            "UPDATE tenant_policies
             SET enforcement_mode = $1, approval_required = $2, overrides = $3::jsonb,
                 revision = revision + 1, updated_at = $4, updated_by = $5
             WHERE tenant_id = $6 AND ($7::bigint IS NULL OR revision = $7)
             RETURNING {POLICY_COLUMNS}"
        )))
        .bind(policy.enforcement_mode.as_str())
        .bind(policy.approval_required)
        .bind(overrides_json(policy)?)
        .bind(at.millis())
        .bind(actor)
        .bind(tenant.as_str())
        .bind(expected_revision)
        .fetch_optional(&mut *tx)
        .await
        .map_err(err)?;
        let Some(row) = row else {
            let current: Option<i64> =
                sqlx::query_scalar("SELECT revision FROM tenant_policies WHERE tenant_id = $1")
                    .bind(tenant.as_str())
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(err)?;
            return Err(match current {
                Some(current) => StoreError::PreconditionFailed { current },
                None => StoreError::NotFound,
            });
        };
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
        let mut tx = self.tenant_tx(tenant).await.map_err(err)?;
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
            "SELECT id, at, actor, kind, server, version, data::text AS data FROM audit_events
             WHERE tenant_id = $1 AND id > $2
               AND ($3::text IS NULL OR server = $3) AND ($4::text IS NULL OR kind = $4)
             ORDER BY id LIMIT $5",
        )
        .bind(tenant.as_str())
        .bind(after.unwrap_or(0))
        .bind(&filter.server)
        .bind(&filter.kind)
        .bind(i64::from(limit))
        .fetch_all(&mut *self.tenant_tx(tenant).await.map_err(err)?)
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

impl PgStore {
    /// Listens for changes committed by any replica — registry writes on
    /// [`REGISTRY_CHANNEL`] (`tenant<TAB>server`) and closed resolve
    /// sessions on [`RESOLVE_CHANNEL`] (`tenant<TAB>session id`) — and calls
    /// `on_change(channel, tenant, key)` for each; calls `on_gap()` whenever
    /// notifications may have been missed, so the caller can drop everything
    /// it cached. A gap is reported once `LISTEN` is in effect again, not
    /// when the connection drops: while the database is down nothing can
    /// change in it, so what was cached keeps being served (until its own
    /// expiry) and is dropped only when changes could have been missed and
    /// can be read again. Runs until the pool closes.
    /// A store runs one listener; [`PgStore::listener_status`] follows it.
    pub fn spawn_change_listener(
        &self,
        on_change: impl Fn(&str, &str, &str) + Send + Sync + 'static,
        on_gap: impl Fn() + Send + Sync + 'static,
    ) -> tokio::task::JoinHandle<()> {
        let pool = self.pool.clone();
        let status = self.listener.clone();
        tokio::spawn(async move {
            loop {
                if pool.is_closed() {
                    return;
                }
                let mut listener = match sqlx::postgres::PgListener::connect_with(&pool).await {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::warn!(error = %e, "registry change listener cannot connect; retrying");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        continue;
                    }
                };
                if let Err(e) = listener
                    .listen_all([registry::REGISTRY_CHANNEL, resolve::RESOLVE_CHANNEL])
                    .await
                {
                    tracing::warn!(error = %e, "LISTEN failed; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
                // Anything cached before LISTEN took effect may be stale.
                on_gap();
                status.send_modify(|s| {
                    s.listening = true;
                    s.gaps += 1;
                });
                loop {
                    match listener.try_recv().await {
                        Ok(Some(n)) => {
                            if let Some((tenant, key)) = n.payload().split_once('\t') {
                                on_change(n.channel(), tenant, key);
                            }
                            status.send_modify(|s| s.delivered += 1);
                        }
                        Ok(None) => {
                            // The connection was lost. Reconnect and LISTEN
                            // afresh above, which reports the gap once it is
                            // over (`PgListener` would reconnect by itself,
                            // but only tells us when a notification comes).
                            status.send_modify(|s| s.listening = false);
                            tracing::warn!(
                                "registry change listener lost its connection; reconnecting"
                            );
                            break;
                        }
                        Err(e) => {
                            status.send_modify(|s| s.listening = false);
                            if pool.is_closed() {
                                return;
                            }
                            tracing::warn!(error = %e, "registry change listener failed; reconnecting");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                            break;
                        }
                    }
                }
            }
        })
    }

    /// Follows the change listener: a receiver that sees
    /// [`ListenerStatus::listening`] turn true once `LISTEN` is in effect
    /// (and the caches were cleared for the gap before it), and each
    /// delivered notification. Readiness checks and tests wait on it instead
    /// of guessing how long subscribing takes.
    pub fn listener_status(&self) -> watch::Receiver<ListenerStatus> {
        self.listener.subscribe()
    }
}
