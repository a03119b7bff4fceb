//! How a replica tells the others what changed: the two `NOTIFY` channels
//! and the [`Notifier`] task that coalesces registry announcements into
//! batches.

use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};

/// Channel on which registry writes are announced to every replica.
pub const REGISTRY_CHANNEL: &str = "pinfold_registry";

/// Channel on which closed sessions are announced to every replica.
pub const RESOLVE_CHANNEL: &str = "pinfold_resolve";

/// Coalesces registry change announcements. Each write hands its payload to
/// one task and waits until it is sent; payloads that arrive while a batch
/// is in flight go out together in the next one, as one statement (one
/// transaction, one commit) instead of one transaction each, and each
/// distinct payload once.
#[derive(Debug, Clone)]
pub(crate) struct Notifier {
    tx: mpsc::UnboundedSender<(String, oneshot::Sender<()>)>,
}

impl Notifier {
    /// Starts the batching task on the current Tokio runtime.
    pub(crate) fn start(pool: PgPool) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<(String, oneshot::Sender<()>)>();
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut batch = vec![first];
                while batch.len() < 1000
                    && let Ok(next) = rx.try_recv()
                {
                    batch.push(next);
                }
                let mut payloads: Vec<String> = batch.iter().map(|(p, _)| p.clone()).collect();
                payloads.sort_unstable();
                payloads.dedup();
                send_notifications(&pool, payloads).await;
                for (_, done) in batch {
                    let _ = done.send(());
                }
            }
        });
        Self { tx }
    }

    /// Queues `payload` and waits until its batch is sent; gives it back
    /// when the task no longer runs.
    pub(crate) async fn send(&self, payload: String) -> Result<(), String> {
        let (done, sent) = oneshot::channel();
        if let Err(mpsc::error::SendError((payload, _))) = self.tx.send((payload, done)) {
            return Err(payload);
        }
        // A dropped sender means the task ended mid-batch; the batch was
        // attempted, and the TTL covers a loss.
        let _ = sent.await;
        Ok(())
    }
}

/// One `pg_notify` per payload on [`REGISTRY_CHANNEL`], in one statement.
pub(crate) async fn send_notifications(pool: &PgPool, payloads: Vec<String>) {
    let sent = sqlx::query("SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p")
        .bind(REGISTRY_CHANNEL)
        .bind(payloads)
        .execute(pool)
        .await;
    if let Err(e) = sent {
        tracing::warn!(error = %e, "registry change notification failed; other replicas catch up by TTL");
    }
}
