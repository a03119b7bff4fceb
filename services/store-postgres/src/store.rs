//! [`PgStore`]: the bounded pool every store trait runs on, its settings,
//! how it connects (timeouts, the acquire check, `TCP_NODELAY`), and the
//! handles of its change notifier and change listener.

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use pinfold_store_rows::store_error as err;
use pinfold_tenancy::StoreError;
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tokio::sync::watch;

use crate::listener::{self, ListenerStatus};
use crate::nodelay;
use crate::notify::{Notifier, REGISTRY_CHANNEL};

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
    pub(crate) pool: PgPool,
    listener: Arc<watch::Sender<ListenerStatus>>,
    pub(crate) notifier: Notifier,
    /// A random id of this store, which names its notification barriers.
    id: u64,
    /// The last notification barrier this store sent.
    barriers: Arc<AtomicU64>,
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
            notifier: Notifier::start(pool.clone()),
            pool,
            listener: Arc::new(watch::Sender::new(ListenerStatus::default())),
            id: std::hash::BuildHasher::hash_one(&std::hash::RandomState::new(), 0u8),
            barriers: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The pool (for tests that check database-level guarantees). Its
    /// connections are bound to no tenant: under row-level security a
    /// runtime role sees no tenant row through it.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Closes the pool, waiting for connections to be returned.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Listens for changes committed by any replica — registry writes on
    /// [`REGISTRY_CHANNEL`](crate::REGISTRY_CHANNEL) (`tenant<TAB>server`) and closed resolve
    /// sessions on [`RESOLVE_CHANNEL`](crate::RESOLVE_CHANNEL) (`tenant<TAB>session id`) — and calls
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
        listener::spawn(
            self.pool.clone(),
            self.id,
            self.listener.clone(),
            on_change,
            on_gap,
        )
    }

    /// Waits, at most `within`, until every notification committed before
    /// this call has been handed to this store's listener (which must be
    /// listening). PostgreSQL delivers notifications in the order their
    /// transactions committed, and the listener handles them one at a time,
    /// so a notification of its own sent now ("barrier") arrives after all
    /// of them. For tests that must know a replica has seen its own writes
    /// announced, so that a later eviction cannot empty a cache under them.
    pub async fn notification_barrier(&self, within: Duration) -> Result<(), StoreError> {
        let n = self.barriers.fetch_add(1, Ordering::Relaxed) + 1;
        let mut status = self.listener.subscribe();
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(REGISTRY_CHANNEL)
            .bind(listener::barrier_payload(self.id, n))
            .execute(&self.pool)
            .await
            .map_err(err)?;
        match tokio::time::timeout(within, status.wait_for(|s| s.barrier >= n)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(StoreError::Other("the change listener has stopped".into())),
            Err(_) => Err(StoreError::Other(format!(
                "notification barrier {n} not received within {within:?}"
            ))),
        }
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
