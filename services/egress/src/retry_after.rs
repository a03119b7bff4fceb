//! The `Retry-After` header (RFC 9110 §10.2.3): delay-seconds or an HTTP
//! date, as the time left to wait.

use std::time::{Duration, SystemTime};

/// The longest value read (longer ones are ignored).
const MAX_LEN: usize = 128;

/// Parses a `Retry-After` value: delay-seconds or an HTTP date (dates are
/// parsed by `httpdate`, which refuses what it cannot represent instead of
/// overflowing).
pub fn parse_retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    if v.len() > MAX_LEN {
        return None;
    }
    if let Ok(s) = v.parse::<u64>() {
        return Some(Duration::from_secs(s));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// The `Retry-After` of a response's headers, if any and readable.
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_retry_after)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_values() {
        assert_eq!(parse_retry_after("120"), Some(Duration::from_secs(120)));
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO)
        );
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3600));
        let d = parse_retry_after(&later).unwrap();
        assert!(
            d > Duration::from_secs(3500) && d <= Duration::from_secs(3600),
            "{d:?}"
        );
        assert_eq!(parse_retry_after("soon"), None);
        assert_eq!(parse_retry_after(&"9".repeat(200)), None);
    }

    #[test]
    fn huge_years_do_not_panic() {
        for v in [
            "Sun, 06 Nov 99999999999 08:49:37 GMT",
            "Sun, 06 Nov 9999 08:49:37 GMT",
            "Sun, 06 Nov 1800 08:49:37 GMT",
            "Sun, 32 Nov 2020 08:49:37 GMT",
            "Sun, 06 Nov 2020 99:49:37 GMT",
        ] {
            let _ = parse_retry_after(v);
        }
    }
}
