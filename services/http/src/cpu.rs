//! CPU-heavy work off the async workers.
//!
//! Validating a large document, or checking an observation against one,
//! takes milliseconds of pure CPU. Run on a Tokio worker it would stall every
//! other request scheduled there, and a hostile document could pin all
//! workers at once. [`offload`] runs such work on the blocking pool instead,
//! admitting at most one job per available core at a time (further jobs wait
//! their turn), so CPU-heavy requests queue among themselves while cheap
//! requests keep flowing.

use std::sync::OnceLock;

use tokio::sync::Semaphore;

use crate::problem::ApiError;

fn permits() -> &'static Semaphore {
    static PERMITS: OnceLock<Semaphore> = OnceLock::new();
    PERMITS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Semaphore::new(cores)
    })
}

/// Runs `work` on the blocking pool, at most one job per core at a time.
/// A panic in `work` becomes a logged `500`.
pub async fn offload<T, F>(work: F) -> Result<T, ApiError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let _permit = permits()
        .acquire()
        .await
        .map_err(|_| ApiError::internal())?;
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        tracing::error!(error = %e, "CPU-bound task failed");
        ApiError::internal()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn runs_off_the_worker_and_bounds_concurrency() {
        let worker = std::thread::current().id();
        let ran_on = offload(|| std::thread::current().id()).await.unwrap();
        assert_ne!(ran_on, worker);

        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let jobs: Vec<_> = (0..32)
            .map(|_| {
                let (running, peak) = (running.clone(), peak.clone());
                tokio::spawn(offload(move || {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    running.fetch_sub(1, Ordering::SeqCst);
                }))
            })
            .collect();
        for j in jobs {
            j.await.unwrap().unwrap();
        }
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        assert!(peak.load(Ordering::SeqCst) <= cores);
        assert!(peak.load(Ordering::SeqCst) >= 1);
    }

    #[tokio::test]
    async fn a_panic_is_a_500() {
        let r: Result<(), ApiError> = offload(|| panic!("boom")).await;
        assert_eq!(
            r.unwrap_err().status,
            axum::http::StatusCode::INTERNAL_SERVER_ERROR
        );
    }
}
