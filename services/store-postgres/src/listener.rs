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
    /// The highest barrier of this store's
    /// [`PgStore::notification_barrier`](crate::PgStore::notification_barrier)
    /// received so far. Barriers are neither handed to `on_change` nor
    /// counted in `delivered`, and another store's barriers are skipped.
    pub barrier: u64,
}

/// The payload of barrier `n` of the store `store`: it holds no tab, so no
/// listener ever reads it as a change.
pub(crate) fn barrier_payload(store: u64, n: u64) -> String {
    format!("barrier {store:016x} {n}")
}

/// The number of a barrier payload of the store `store`, if it is one.
fn barrier_of(payload: &str, store: u64) -> Option<u64> {
    let rest = payload.strip_prefix("barrier ")?;
    let (id, n) = rest.split_once(' ')?;
    (u64::from_str_radix(id, 16).ok()? == store).then(|| n.parse().ok())?
}

/// Starts the listener of [`PgStore::spawn_change_listener`](crate::PgStore::spawn_change_listener)
/// on `pool`, publishing its progress on `status`. Runs until the pool
/// closes.
pub(crate) fn spawn(
    pool: PgPool,
    store: u64,
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
                        let payload = n.payload();
                        if let Some((tenant, key)) = payload.split_once('\t') {
                            on_change(n.channel(), tenant, key);
                        } else if payload.starts_with("barrier ") {
                            if let Some(b) = barrier_of(payload, store) {
                                status.send_modify(|s| s.barrier = s.barrier.max(b));
                            }
                            continue;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_barrier_is_read_back_only_by_its_own_store() {
        let p = barrier_payload(0xfeed, 7);
        assert!(!p.contains('\t'), "never read as a change");
        assert_eq!(barrier_of(&p, 0xfeed), Some(7));
        assert_eq!(barrier_of(&p, 0xbeef), None);
        assert_eq!(barrier_of("barrier zz 7", 0xfeed), None);
        assert_eq!(barrier_of("acme\tio.github.acme/x", 0xfeed), None);
    }
}
