//! Bounded retries with backoff for requests that are safe to repeat.
//!
//! A request is retried when it did not reach the server (connect refused,
//! reset, timeout), when the server gave up on it (`408`, Pinfold's request
//! timeout) or asked to be left alone for a while: `429 Too Many Requests`,
//! `502`, `503` and `504`. A `Retry-After` header
//! (seconds, or an HTTP date) is honoured up to [`RetryPolicy::max_delay`];
//! otherwise the delay doubles from [`RetryPolicy::first_delay`]. Any other
//! answer, including other 5xx, is returned at once: retrying a `500` only
//! repeats a bug.
//!
//! Only idempotent requests go through here: a `PUT` of a version (the
//! registry answers `200` for the same content again) and `GET`s.

use std::future::Future;
use std::time::{Duration, SystemTime};

use reqwest::StatusCode;
use reqwest::header::RETRY_AFTER;

use crate::remote::{RemoteError, Reply};

/// How often and how patiently to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all (the first one included); at least 1.
    pub attempts: u32,
    /// Delay before the second attempt; doubled for each further one.
    pub first_delay: Duration,
    /// Longest delay between two attempts, whatever `Retry-After` asks.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    /// Four attempts, 0.5 s, 1 s, 2 s apart (or as `Retry-After` says, up
    /// to 30 s).
    fn default() -> Self {
        RetryPolicy {
            attempts: 4,
            first_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        }
    }
}

/// What the last attempt produced, and how many attempts were made.
#[derive(Debug)]
pub struct Outcome {
    /// The last answer or transport error.
    pub result: Result<Reply, RemoteError>,
    /// Attempts made (1 when the first one was final).
    pub attempts: u32,
}

/// Whether an answer asks to be retried later.
pub fn retryable_status(status: StatusCode) -> bool {
    matches!(
        status,
        StatusCode::REQUEST_TIMEOUT
            | StatusCode::TOO_MANY_REQUESTS
            | StatusCode::BAD_GATEWAY
            | StatusCode::SERVICE_UNAVAILABLE
            | StatusCode::GATEWAY_TIMEOUT
    )
}

/// The delay a `Retry-After` value asks for: delta-seconds, or an HTTP date
/// (in the past: no delay). `None` when absent or unreadable.
pub fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = time::OffsetDateTime::parse(v, &time::format_description::well_known::Rfc2822).ok()?;
    let at = SystemTime::from(at);
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Runs `attempt` until it gives a final answer or the attempts run out.
/// `on_retry(attempt_number, delay, why)` is told before each wait (for a
/// progress line).
pub async fn run<F, Fut>(
    policy: RetryPolicy,
    mut attempt: F,
    mut on_retry: impl FnMut(u32, Duration, &str),
) -> Outcome
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Reply, RemoteError>>,
{
    let attempts = policy.attempts.max(1);
    let mut backoff = policy.first_delay;
    let mut n = 0;
    loop {
        n += 1;
        let result = attempt().await;
        let (why, asked) = match &result {
            Ok(reply) if retryable_status(reply.status) => (
                format!("answered {}", reply.status),
                reply
                    .headers
                    .get(RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| retry_after(v, SystemTime::now())),
            ),
            Ok(_) => {
                return Outcome {
                    result,
                    attempts: n,
                };
            }
            Err(RemoteError::Unreachable { reason, .. }) => (reason.clone(), None),
            // Nothing else can change by trying again.
            Err(_) => {
                return Outcome {
                    result,
                    attempts: n,
                };
            }
        };
        if n >= attempts {
            return Outcome {
                result,
                attempts: n,
            };
        }
        let delay = asked.unwrap_or(backoff).min(policy.max_delay);
        on_retry(n, delay, &why);
        tokio::time::sleep(delay).await;
        backoff = (backoff * 2).min(policy.max_delay);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use bytes::Bytes;
    use reqwest::header::{HeaderMap, HeaderValue};

    use super::*;

    fn reply(status: u16, retry_after: Option<&str>) -> Reply {
        let mut headers = HeaderMap::new();
        if let Some(v) = retry_after {
            headers.insert(RETRY_AFTER, HeaderValue::from_str(v).unwrap());
        }
        Reply {
            status: StatusCode::from_u16(status).unwrap(),
            headers,
            body: Bytes::new(),
        }
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after("soon", now), None);
        assert_eq!(retry_after("-3", now), None);
    }

    #[test]
    fn only_overload_and_gateway_answers_are_retried() {
        for s in [408, 429, 502, 503, 504] {
            assert!(retryable_status(StatusCode::from_u16(s).unwrap()), "{s}");
        }
        for s in [200, 201, 400, 401, 403, 404, 409, 422, 500, 501] {
            assert!(!retryable_status(StatusCode::from_u16(s).unwrap()), "{s}");
        }
    }

    fn fast() -> RetryPolicy {
        RetryPolicy {
            attempts: 3,
            first_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(200),
        }
    }

    #[tokio::test]
    async fn retries_until_a_final_answer_honouring_retry_after() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let mut delays = Vec::new();
        let out = run(
            fast(),
            || {
                let n = c.fetch_add(1, Ordering::SeqCst);
                async move {
                    Ok(match n {
                        0 => reply(503, Some("0")),
                        1 => reply(429, None),
                        _ => reply(201, None),
                    })
                }
            },
            |_, d, _| delays.push(d),
        )
        .await;
        assert_eq!(out.attempts, 3);
        assert_eq!(out.result.unwrap().status, StatusCode::CREATED);
        // Retry-After: 0 is honoured; then the doubled backoff.
        assert_eq!(delays, vec![Duration::ZERO, Duration::from_millis(20)]);
    }

    #[tokio::test]
    async fn gives_up_after_the_last_attempt_and_caps_the_delay() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let mut delays = Vec::new();
        let out = run(
            fast(),
            || {
                c.fetch_add(1, Ordering::SeqCst);
                async { Ok(reply(503, Some("3600"))) }
            },
            |_, d, _| delays.push(d),
        )
        .await;
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(out.attempts, 3);
        assert_eq!(out.result.unwrap().status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(delays, vec![Duration::from_millis(200); 2]);
    }

    #[tokio::test]
    async fn final_answers_and_local_errors_are_not_retried() {
        for status in [500, 404, 409] {
            let calls = Arc::new(AtomicU32::new(0));
            let c = calls.clone();
            let out = run(
                fast(),
                || {
                    c.fetch_add(1, Ordering::SeqCst);
                    async move { Ok(reply(status, None)) }
                },
                |_, _, _| panic!("no retry for {status}"),
            )
            .await;
            assert_eq!(out.attempts, 1);
            assert_eq!(calls.load(Ordering::SeqCst), 1);
        }
        let out = run(
            fast(),
            || async { Err(RemoteError::NoToken("X".into())) },
            |_, _, _| panic!("no retry"),
        )
        .await;
        assert!(matches!(out.result, Err(RemoteError::NoToken(_))));
    }

    #[tokio::test]
    async fn transport_failures_are_retried() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let out = run(
            fast(),
            || {
                c.fetch_add(1, Ordering::SeqCst);
                async {
                    Err(RemoteError::Unreachable {
                        url: "http://127.0.0.1:1/".into(),
                        reason: "connection refused".into(),
                    })
                }
            },
            |_, _, why| assert_eq!(why, "connection refused"),
        )
        .await;
        assert_eq!(out.attempts, 3);
        assert!(matches!(out.result, Err(RemoteError::Unreachable { .. })));
    }
}
