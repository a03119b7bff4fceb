//! CPU-heavy work off the async workers.
//!
//! Validating a large document, or checking an observation against one,
//! takes milliseconds of pure CPU. Run on a Tokio worker it would stall every
//! other request scheduled there, and a hostile document could pin all
//! workers at once. [`offload`] runs such work on the blocking pool instead,
//! admitting at most one job per available core at a time (further jobs wait
//! their turn), so CPU-heavy requests queue among themselves while cheap
//! requests keep flowing.
//!
//! The permit travels into the blocking job and is released when the job
//! ends, not when its caller stops waiting: a request cancelled while its
//! job runs (the client hung up, a timeout fired) does not free a slot for
//! another job while its own still occupies a core.

use std::sync::OnceLock;

use tokio::sync::Semaphore;

use crate::problem::ApiError;

/// Jobs [`offload`] runs at once: one per available core.
fn permit_count() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

fn permits() -> &'static Semaphore {
    static PERMITS: OnceLock<Semaphore> = OnceLock::new();
    PERMITS.get_or_init(|| Semaphore::new(permit_count()))
}

/// Runs `work` on the blocking pool, at most one job per core at a time.
/// A panic in `work` becomes a logged `500`.
pub async fn offload<T, F>(work: F) -> Result<T, ApiError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    offload_on(permits(), work).await
}

/// [`offload`] admitting at most as many jobs as `permits` holds.
async fn offload_on<T, F>(permits: &'static Semaphore, work: F) -> Result<T, ApiError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let permit = permits.acquire().await.map_err(|_| ApiError::internal())?;
    tokio::task::spawn_blocking(move || {
        // Held by the job itself: dropping the caller's future after this
        // point leaves the slot taken until the work is done.
        let _permit = permit;
        work()
    })
    .await
    .map_err(|e| {
        tracing::error!(error = %e, "CPU-bound task failed");
        ApiError::internal()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    #[tokio::test]
    async fn runs_off_the_worker() {
        let worker = std::thread::current().id();
        let ran_on = offload(|| std::thread::current().id()).await.unwrap();
        assert_ne!(ran_on, worker);
    }

    /// Under a load of many more jobs than permits, as many jobs run at
    /// once as there are permits, and never more: the first jobs wait (up
    /// to a deadline) until the permits have all been taken at once, and
    /// every job holds its own a little longer, so a bound that admitted
    /// more would show a higher peak and one that admitted fewer a lower
    /// one. On its own semaphore, so other tests' jobs on the shared one
    /// cannot take a permit.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn as_many_jobs_run_at_once_as_there_are_permits_and_no_more() {
        const PERMITS: usize = 3;
        let permits: &'static Semaphore = Box::leak(Box::new(Semaphore::new(PERMITS)));
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let jobs: Vec<_> = (0..8 * PERMITS)
            .map(|_| {
                let (running, peak) = (running.clone(), peak.clone());
                tokio::spawn(offload_on(permits, move || {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    let deadline = Instant::now() + Duration::from_secs(5);
                    while peak.load(Ordering::SeqCst) < PERMITS && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    // Overlap with whatever else was admitted meanwhile.
                    std::thread::sleep(Duration::from_millis(5));
                    peak.fetch_max(running.load(Ordering::SeqCst), Ordering::SeqCst);
                    running.fetch_sub(1, Ordering::SeqCst);
                }))
            })
            .collect();
        for j in jobs {
            j.await.unwrap().unwrap();
        }
        assert_eq!(peak.load(Ordering::SeqCst), PERMITS);
        assert_eq!(
            permits.available_permits(),
            PERMITS,
            "every permit returned"
        );
    }

    /// Callers that give up while their job runs (a timeout, a client that
    /// hung up) do not let more jobs run than there are permits: each
    /// blocking job keeps its permit until it ends. With the permit held
    /// by the caller's frame instead, every cancelled caller would admit
    /// one more job next to its own still running one, and the peak would
    /// exceed the bound.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancelled_callers_do_not_free_their_job_slots() {
        const PERMITS: usize = 2;
        let permits: &'static Semaphore = Box::leak(Box::new(Semaphore::new(PERMITS)));
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let finished = Arc::new(AtomicUsize::new(0));
        let job =
            |running: Arc<AtomicUsize>, peak: Arc<AtomicUsize>, finished: Arc<AtomicUsize>| {
                move || {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(40));
                    peak.fetch_max(running.load(Ordering::SeqCst), Ordering::SeqCst);
                    running.fetch_sub(1, Ordering::SeqCst);
                    finished.fetch_add(1, Ordering::SeqCst);
                }
            };
        // Every caller waits 5 ms, far less than its job takes, then gives
        // up: its future (and, before the fix, its permit) is dropped.
        let callers: Vec<_> = (0..6 * PERMITS)
            .map(|_| {
                let work = job(running.clone(), peak.clone(), finished.clone());
                tokio::spawn(async move {
                    let _ =
                        tokio::time::timeout(Duration::from_millis(5), offload_on(permits, work))
                            .await;
                })
            })
            .collect();
        for c in callers {
            c.await.unwrap();
        }
        // Then callers that wait for their result.
        let waiting: Vec<_> = (0..2 * PERMITS)
            .map(|_| {
                tokio::spawn(offload_on(
                    permits,
                    job(running.clone(), peak.clone(), finished.clone()),
                ))
            })
            .collect();
        for w in waiting {
            w.await.unwrap().unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while permits.available_permits() < PERMITS && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(
            peak.load(Ordering::SeqCst) <= PERMITS,
            "{} jobs ran at once with {PERMITS} permits",
            peak.load(Ordering::SeqCst)
        );
        assert!(finished.load(Ordering::SeqCst) >= 2 * PERMITS);
        assert_eq!(
            permits.available_permits(),
            PERMITS,
            "every permit returned"
        );
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
