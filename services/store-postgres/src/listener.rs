//! The registry and resolve change listener: one task that `LISTEN`s on
//! both channels, hands each notification on, reports every gap in which
//! notifications may have been missed, and publishes what it has done as a
//! [`ListenerStatus`].

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::watch;

use crate::notify::{REGISTRY_CHANNEL, RESOLVE_CHANNEL};

/// What the registry change listener of a [`PgStore`] has done so far, for
/// whoever must know that changes from other replicas are being received
/// (see [`PgStore::listener_status`](crate::PgStore::listener_status)).
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

/// Starts the listener of [`PgStore::spawn_change_listener`](crate::PgStore::spawn_change_listener)
/// on `pool`, publishing its progress on `status`. Runs until the pool
/// closes.
pub(crate) fn spawn(
    pool: PgPool,
    status: Arc<watch::Sender<ListenerStatus>>,
    on_change: impl Fn(&str, &str, &str) + Send + Sync + 'static,
    on_gap: impl Fn() + Send + Sync + 'static,
) -> tokio::task::JoinHandle<()> {
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
                .listen_all([REGISTRY_CHANNEL, RESOLVE_CHANNEL])
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
