//! `/metrics`: who may scrape it ([`ScrapeAccess`]), and one rendering
//! shared by the scrapes that arrive while it runs ([`SingleFlight`]).
//!
//! Access (`[metrics]` in the configuration) is checked before anything is
//! rendered, in this order:
//!
//! 1. **Client address** (`allow_from`, CIDRs): a scrape from an address
//!    outside every range is `403 address_not_allowed`. It is checked first,
//!    so a client outside the list cannot even try tokens. The address is the
//!    TCP peer the accept loop accepted ([`ClientAddr`], handed to this route
//!    and to no other); `Forwarded` and `X-Forwarded-For` are not trusted. A
//!    request whose peer is unknown (one built in-process) is refused while
//!    an allow-list is set.
//! 2. **Bearer token** (`token` or `token_file`): the scraper sends
//!    `Authorization: Bearer <token>` (RFC 6750 §2.1). No token is `401
//!    unauthenticated`, another token `401 invalid_token`, both with a
//!    `WWW-Authenticate: Bearer realm="pinfold-metrics"` challenge (RFC 6750
//!    §3). Only the token's SHA-256 is kept; a presented token is hashed and
//!    the two digests compared in constant time, so the time an answer takes
//!    depends on neither the token's content nor its length. The token is
//!    never logged, and [`ScrapeAccess`]'s `Debug` does not show it.
//!
//! With neither configured, `/metrics` is served to any client (fine on a
//! loopback dev server; `serve` warns when it listens elsewhere).
//!
//! Rendering reads every request series, the rate limiter's refusals and
//! the resolve cache's statistics (which first settles the cache's pending
//! evictions, on the blocking pool). One scrape at a time does that work:
//! a scrape arriving while a rendering runs waits for it and answers its
//! bytes; the next scrape after it renders afresh. The rendering runs on
//! the blocking pool to its end even if every scrape waiting for it goes
//! away, and a new one never starts while one is running.

use std::fmt;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode, header};
use futures::FutureExt as _;
use futures::future::{BoxFuture, Shared};
use pinfold_http::bearer::{Credentials, split_authorization};
use pinfold_http::problem::ApiError;

/// The path of the scrape route.
pub const PATH: &str = "/metrics";

/// The realm of the scrape token's `WWW-Authenticate` challenge.
const REALM: &str = "pinfold-metrics";

/// The client's address, as the accept loop saw the TCP peer: inserted
/// into the request extensions of scrapes ([`PATH`]) only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub IpAddr);

/// One range of client addresses: `10.0.0.0/8`, `2001:db8::/32`, or a
/// single address (`127.0.0.1`, a `/32` or `/128`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Parses `address[/prefix]`; bits below the prefix are cleared
    /// (`10.1.2.3/8` is `10.0.0.0/8`).
    pub fn parse(text: &str) -> Result<Cidr, String> {
        let text = text.trim();
        let (addr, prefix) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let ip: IpAddr = addr
            .parse()
            .map_err(|_| format!("{text:?} is not an IP address or CIDR range"))?;
        let ip = ip.to_canonical();
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => match p.parse::<u8>() {
                Ok(n) if n <= max && !p.starts_with('+') => n,
                _ => return Err(format!("{text:?}: the prefix length must be 0 to {max}")),
            },
        };
        Ok(Cidr {
            network: mask(ip, prefix),
            prefix,
        })
    }

    /// Whether `ip` lies in the range (an IPv4-mapped IPv6 address counts
    /// as its IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        ip.is_ipv4() == self.network.is_ipv4() && mask(ip, self.prefix) == self.network
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// `ip` with every bit below the first `prefix` cleared.
fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4);
            let keep = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4((bits & keep).into())
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let keep = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6((bits & keep).into())
        }
    }
}

/// Whether `token` may be sent as a bearer token: RFC 6750 §2.1's
/// `b64token` (`A-Z a-z 0-9 - . _ ~ + /`, then `=` padding only).
pub fn is_b64token(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty()
        && body.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/')
        })
}

/// Who may scrape `/metrics` (module docs).
#[derive(Clone, Default)]
pub struct ScrapeAccess {
    /// SHA-256 of the token; `None`: no token needed.
    token: Option<[u8; 32]>,
    /// Allowed client ranges; empty: any address.
    allow_from: Vec<Cidr>,
}

impl fmt::Debug for ScrapeAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScrapeAccess")
            .field("token", &self.token.map(|_| "<redacted>"))
            .field("allow_from", &self.allow_from)
            .finish()
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

impl ScrapeAccess {
    /// No protection: any client, no token.
    pub fn open() -> ScrapeAccess {
        ScrapeAccess::default()
    }

    /// Scrapes need `token` (when given) and an address in `allow_from`
    /// (when not empty).
    pub fn new(token: Option<&str>, allow_from: Vec<Cidr>) -> ScrapeAccess {
        ScrapeAccess {
            token: token.map(|t| sha256(t.as_bytes())),
            allow_from,
        }
    }

    /// Whether anyone may scrape.
    pub fn is_open(&self) -> bool {
        self.token.is_none() && self.allow_from.is_empty()
    }

    /// Whether a token is required.
    pub fn needs_token(&self) -> bool {
        self.token.is_some()
    }

    /// The allowed client ranges (empty: any).
    pub fn allow_from(&self) -> &[Cidr] {
        &self.allow_from
    }

    /// Admits a scrape from `client` carrying `authorization`, or the
    /// problem to answer (module docs: address first, then token).
    pub fn check(
        &self,
        client: Option<IpAddr>,
        authorization: Option<&HeaderValue>,
    ) -> Result<(), ApiError> {
        if !self.allow_from.is_empty()
            && !client.is_some_and(|ip| self.allow_from.iter().any(|c| c.contains(ip)))
        {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "address_not_allowed",
                "Address not allowed",
            )
            .detail("this client address may not read the metrics"));
        }
        let Some(expected) = &self.token else {
            return Ok(());
        };
        let presented = match authorization.map(|v| split_authorization(v.as_bytes())) {
            Some(Credentials::Bearer(t)) if !t.is_empty() => t,
            _ => {
                return Err(unauthorized(
                    "unauthenticated",
                    "Authentication required",
                    "the metrics need the scrape token as a bearer token",
                    format!("Bearer realm=\"{REALM}\""),
                ));
            }
        };
        let matches =
            aws_lc_rs::constant_time::verify_slices_are_equal(&sha256(presented), expected).is_ok();
        if matches {
            Ok(())
        } else {
            Err(unauthorized(
                "invalid_token",
                "Invalid bearer token",
                "this is not the scrape token",
                format!("Bearer realm=\"{REALM}\", error=\"invalid_token\""),
            ))
        }
    }
}

fn unauthorized(
    code: &'static str,
    title: &'static str,
    detail: &str,
    challenge: String,
) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, code, title)
        .detail(detail)
        .header(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_str(&challenge)
                .unwrap_or_else(|_| HeaderValue::from_static("Bearer")),
        )
}

/// One rendering at a time; scrapes arriving meanwhile share its bytes.
#[derive(Default)]
pub struct SingleFlight {
    /// The latest rendering and whether it has finished.
    current: Mutex<Option<Flight>>,
    /// Renderings started (for the metrics and the tests).
    started: AtomicU64,
}

struct Flight {
    /// Every waiter's handle on the rendering's outcome (`None`: it panicked).
    bytes: Shared<BoxFuture<'static, Option<Bytes>>>,
    /// Set by the rendering itself when it ends, so a rendering whose
    /// waiters all went away is never mistaken for one still running.
    done: Arc<AtomicBool>,
}

/// Sets its flag when dropped.
struct MarkDone(Arc<AtomicBool>);

impl Drop for MarkDone {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

impl SingleFlight {
    /// The bytes of the rendering running now, or of a new one of `work`
    /// (on the blocking pool) when none is. `None` when the rendering
    /// panicked (logged once).
    pub async fn run<F>(&self, work: F) -> Option<Bytes>
    where
        F: FnOnce() -> Bytes + Send + 'static,
    {
        let bytes = {
            let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
            match current.as_ref() {
                Some(f) if !f.done.load(Ordering::Acquire) => f.bytes.clone(),
                _ => {
                    self.started.fetch_add(1, Ordering::Relaxed);
                    let done = Arc::new(AtomicBool::new(false));
                    let finished = done.clone();
                    let task = tokio::task::spawn_blocking(move || {
                        // Marked done however `work` ends (a panic too).
                        let _done = MarkDone(finished);
                        work()
                    });
                    let bytes = async move {
                        task.await
                            .map_err(
                                |e| tracing::error!(error = %e, "rendering the metrics failed"),
                            )
                            .ok()
                    }
                    .boxed()
                    .shared();
                    *current = Some(Flight {
                        bytes: bytes.clone(),
                        done,
                    });
                    bytes
                }
            }
        };
        bytes.await
    }

    /// How many renderings have started.
    pub fn renders(&self) -> u64 {
        self.started.load(Ordering::Relaxed)
    }
}

/// What `/metrics` keeps: who may scrape, the shared rendering, and how
/// many scrapes were admitted.
#[derive(Debug, Default)]
pub struct Scrapes {
    /// Who may scrape.
    pub access: ScrapeAccess,
    /// The one rendering at a time.
    pub flight: SingleFlight,
    admitted: AtomicU64,
}

impl fmt::Debug for SingleFlight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SingleFlight")
            .field("renders", &self.renders())
            .finish()
    }
}

impl Scrapes {
    /// Scrapes admitted by `access`.
    pub fn new(access: ScrapeAccess) -> Scrapes {
        Scrapes {
            access,
            ..Scrapes::default()
        }
    }

    /// Checks a scrape (see [`ScrapeAccess::check`]) and counts it when
    /// admitted.
    pub fn admit(
        &self,
        client: Option<IpAddr>,
        authorization: Option<&HeaderValue>,
    ) -> Result<(), ApiError> {
        self.access.check(client, authorization)?;
        self.admitted.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Scrapes admitted so far.
    pub fn admitted(&self) -> u64 {
        self.admitted.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Condvar;
    use std::sync::atomic::AtomicUsize;

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn ranges_parse_mask_and_match() {
        let ten = Cidr::parse("10.1.2.3/8").unwrap();
        assert_eq!(ten.to_string(), "10.0.0.0/8");
        assert!(ten.contains(ip("10.255.0.1")));
        assert!(ten.contains(ip("::ffff:10.9.9.9")), "IPv4-mapped");
        assert!(!ten.contains(ip("11.0.0.1")));
        let one = Cidr::parse(" 127.0.0.1 ").unwrap();
        assert_eq!(one.to_string(), "127.0.0.1/32");
        assert!(one.contains(ip("127.0.0.1")) && !one.contains(ip("127.0.0.2")));
        let v6 = Cidr::parse("2001:db8::/32").unwrap();
        assert!(v6.contains(ip("2001:db8:1::7")));
        assert!(!v6.contains(ip("2001:db9::1")));
        assert!(!v6.contains(ip("10.0.0.1")));
        let all = Cidr::parse("0.0.0.0/0").unwrap();
        assert!(all.contains(ip("203.0.113.9")) && !all.contains(ip("::1")));
        assert!(Cidr::parse("::/0").unwrap().contains(ip("::1")));
        assert_eq!(Cidr::parse("::ffff:10.0.0.0/8").unwrap(), ten);
        for bad in [
            "",
            "10.0.0.0/33",
            "::/129",
            "10.0.0/8",
            "10.0.0.0/",
            "10.0.0.0/+8",
            "host",
        ] {
            assert!(Cidr::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn b64tokens_are_what_a_bearer_header_can_carry() {
        for good in ["abc", "A-Z.a_z~0+9/", "YWJj==", "x="] {
            assert!(is_b64token(good), "{good}");
        }
        for bad in ["", "=", "a b", "a\"b", "a,b", "=abc", "é"] {
            assert!(!is_b64token(bad), "{bad}");
        }
    }

    fn bearer(t: &str) -> HeaderValue {
        HeaderValue::from_str(&format!("Bearer {t}")).unwrap()
    }

    #[test]
    fn the_address_is_checked_before_the_token() {
        let access = ScrapeAccess::new(
            Some("s3cret-scrape-token"),
            vec![Cidr::parse("10.0.0.0/8").unwrap()],
        );
        assert!(!access.is_open());
        let good = bearer("s3cret-scrape-token");
        assert!(access.check(Some(ip("10.1.1.1")), Some(&good)).is_ok());
        for client in [Some(ip("192.0.2.1")), None] {
            let e = access.check(client, Some(&good)).unwrap_err();
            assert_eq!(
                (e.status, e.code),
                (StatusCode::FORBIDDEN, "address_not_allowed")
            );
            let e = access.check(client, None).unwrap_err();
            assert_eq!(
                e.status,
                StatusCode::FORBIDDEN,
                "no token probing from outside"
            );
        }
    }

    #[test]
    fn only_the_configured_token_is_admitted() {
        let access = ScrapeAccess::new(Some("s3cret-scrape-token"), Vec::new());
        let at = Some(ip("203.0.113.5"));
        assert!(
            access
                .check(at, Some(&bearer("s3cret-scrape-token")))
                .is_ok()
        );
        assert!(
            access
                .check(
                    at,
                    Some(&HeaderValue::from_static("bearer   s3cret-scrape-token "))
                )
                .is_ok(),
            "the scheme is case-insensitive (RFC 9110 §11.1)"
        );
        let missing = [
            None,
            Some(HeaderValue::from_static("Bearer")),
            Some(HeaderValue::from_static("Basic czNjcmV0")),
        ];
        for h in &missing {
            let e = access.check(at, h.as_ref()).unwrap_err();
            assert_eq!(
                (e.status, e.code),
                (StatusCode::UNAUTHORIZED, "unauthenticated")
            );
        }
        for wrong in [
            "s3cret-scrape-toke",
            "s3cret-scrape-token2",
            "S3CRET-SCRAPE-TOKEN",
        ] {
            let e = access.check(at, Some(&bearer(wrong))).unwrap_err();
            assert_eq!(
                (e.status, e.code),
                (StatusCode::UNAUTHORIZED, "invalid_token")
            );
            let r = e.into_response_with_id(None);
            let challenge = r.headers()[header::WWW_AUTHENTICATE].to_str().unwrap();
            assert!(
                challenge.starts_with("Bearer realm=\"pinfold-metrics\""),
                "{challenge}"
            );
        }
        let shown = format!("{access:?}");
        assert!(
            !shown.contains("s3cret") && shown.contains("<redacted>"),
            "{shown}"
        );
        // Open access admits anyone; an allow-list alone needs no token.
        assert!(ScrapeAccess::open().check(None, None).is_ok());
        let listed = ScrapeAccess::new(None, vec![Cidr::parse("::1").unwrap()]);
        assert!(listed.check(Some(ip("::1")), None).is_ok());
        assert!(!listed.needs_token());
    }

    /// A gate the rendering waits at until the test opens it.
    #[derive(Default)]
    struct Gate(Mutex<bool>, Condvar);

    impl Gate {
        fn wait(&self) {
            let mut open = self.0.lock().unwrap();
            while !*open {
                open = self.1.wait(open).unwrap();
            }
        }

        fn open(&self) {
            *self.0.lock().unwrap() = true;
            self.1.notify_all();
        }
    }

    /// Opens the gate when dropped, so a failing assertion unwinds past
    /// renderings blocked at it instead of leaving the runtime waiting
    /// for them.
    struct OpenOnDrop(Arc<Gate>);

    impl Drop for OpenOnDrop {
        fn drop(&mut self) {
            self.0.open();
        }
    }

    /// N scrapes that arrive while a rendering runs cause that one
    /// rendering, and all answer its bytes; the next scrape renders anew.
    #[tokio::test]
    async fn concurrent_scrapes_share_one_rendering() {
        const N: usize = 16;
        let flight = Arc::new(SingleFlight::default());
        let computed = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new(Gate::default());
        let _open = OpenOnDrop(gate.clone());
        let mut scrapes = Vec::new();
        for _ in 0..N {
            let (computed, gate) = (computed.clone(), gate.clone());
            let flight = flight.clone();
            scrapes.push(Box::pin(async move {
                flight
                    .run(move || {
                        gate.wait();
                        let n = computed.fetch_add(1, Ordering::SeqCst) + 1;
                        Bytes::from(format!("rendering {n}"))
                    })
                    .await
            }));
        }
        // Every scrape has arrived (been polled once) before the rendering
        // may finish.
        for s in &mut scrapes {
            assert!(futures::poll!(s.as_mut()).is_pending());
        }
        assert_eq!(flight.renders(), 1);
        gate.open();
        for s in scrapes {
            assert_eq!(s.await.as_deref(), Some(&b"rendering 1"[..]));
        }
        assert_eq!(
            computed.load(Ordering::SeqCst),
            1,
            "one computation for {N} scrapes"
        );
        assert_eq!(flight.renders(), 1);
        // A finished rendering is not reused.
        let again = flight.run(|| Bytes::from_static(b"fresh")).await;
        assert_eq!(again.as_deref(), Some(&b"fresh"[..]));
        assert_eq!(flight.renders(), 2);
    }

    /// A rendering whose scrapes all went away still finishes, and is not
    /// served to a later scrape as if it were still running.
    #[tokio::test]
    async fn an_abandoned_rendering_is_not_joined_later() {
        let flight = SingleFlight::default();
        let gate = Arc::new(Gate::default());
        let _open = OpenOnDrop(gate.clone());
        let (g, ran) = (gate.clone(), Arc::new(AtomicBool::new(false)));
        let r = ran.clone();
        let mut first = Box::pin(flight.run(move || {
            g.wait();
            r.store(true, Ordering::SeqCst);
            Bytes::from_static(b"old")
        }));
        assert!(futures::poll!(first.as_mut()).is_pending());
        drop(first);
        gate.open();
        // The abandoned rendering runs to its end on the blocking pool.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !ran.load(Ordering::SeqCst) {
            assert!(
                std::time::Instant::now() < deadline,
                "the rendering never ran"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        // Wait for its end flag too (set right after the work returns).
        loop {
            let done = flight
                .current
                .lock()
                .unwrap()
                .as_ref()
                .is_some_and(|f| f.done.load(Ordering::Acquire));
            if done {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "never marked done");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let next = flight.run(|| Bytes::from_static(b"new")).await;
        assert_eq!(next.as_deref(), Some(&b"new"[..]));
        assert_eq!(flight.renders(), 2);
    }

    #[tokio::test]
    async fn a_panicking_rendering_is_none_for_every_waiter() {
        let flight = SingleFlight::default();
        let out = flight.run(|| panic!("boom")).await;
        assert!(out.is_none());
        let out = flight.run(|| Bytes::from_static(b"ok")).await;
        assert_eq!(out.as_deref(), Some(&b"ok"[..]));
    }
}
