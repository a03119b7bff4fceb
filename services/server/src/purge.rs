//! Background purges of rows whose time is over (ended resolve sessions,
//! expired grant states, expired console sessions): every replica runs them; each batch is one short
//! transaction, and deleting what another replica already deleted is a
//! no-op.

use std::future::Future;
use std::time::Duration;

/// Rows one batch deletes at most; a full batch is followed at once by
/// another.
pub const BATCH: u32 = 1000;

/// Runs `batch(BATCH)` every `every`, again at once while batches come back
/// full; `what` names the rows in the log line.
pub fn spawn<F, Fut, E>(
    what: &'static str,
    every: Duration,
    batch: F,
) -> tokio::task::JoinHandle<()>
where
    F: Fn(u32) -> Fut + Send + 'static,
    Fut: Future<Output = Result<u64, E>> + Send,
    E: std::fmt::Display,
{
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            loop {
                match batch(BATCH).await {
                    Ok(n) if n >= u64::from(BATCH) => continue,
                    Ok(n) => {
                        if n > 0 {
                            tracing::info!(rows = n, what, "purged");
                        }
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, what, "purge failed; retrying later");
                        break;
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    /// Full batches are followed at once by another; a short one (or an
    /// error) waits for the next tick.
    #[tokio::test]
    async fn full_batches_repeat_until_one_comes_back_short() {
        for (answers, calls) in [
            (vec![Ok(1000), Ok(1000), Ok(7)], 3),
            (vec![Ok(0)], 1),
            (vec![Ok(1000), Err("database is down")], 2),
        ] {
            let seen = Arc::new(AtomicU32::new(0));
            let s = seen.clone();
            let answers = Arc::new(answers);
            let task = spawn("test rows", Duration::from_secs(3600), move |limit| {
                assert_eq!(limit, BATCH);
                let i = s.fetch_add(1, Ordering::SeqCst) as usize;
                let answer = answers.get(i).cloned().unwrap_or(Ok(0));
                async move { answer }
            });
            tokio::time::sleep(Duration::from_millis(100)).await;
            task.abort();
            assert_eq!(seen.load(Ordering::SeqCst), calls);
        }
    }
}
