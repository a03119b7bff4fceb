//! Rate limits: token buckets per tenant and per principal, per route class.
//!
//! Every request admitted to a tenant (by [`crate::TenantScope`], by the
//! review console once a session is admitted, or by the guard's MCP
//! endpoint once its caller is admitted) is charged one token from
//! two buckets of its route's [`RouteClass`]: the tenant's and the caller's
//! (issuer and subject together, so two issuers' `sub`s never share a
//! bucket). Either empty → `429 rate_limited` with
//! `Retry-After` in whole seconds, rounded up.
//!
//! A bucket is one number, its *theoretical arrival time* (the generic cell
//! rate algorithm, the token bucket written as a schedule): each request
//! pushes it one emission interval (`1 / rate`) later, and a request is
//! refused when that would put it more than `burst` intervals ahead of now.
//! A bucket whose time is not ahead of now is full, exactly as if it did not
//! exist, so it can be dropped without changing any answer.
//!
//! Memory is bounded: buckets live in [`SHARDS`] maps under their own
//! locks, at most `max_buckets` in all. A shard at its share first drops
//! its full buckets; if none is full it drops the one idle longest (that
//! key starts again with a full burst: the only way the bound bends a
//! limit, and only when more keys are busy at once than the bound holds).
//!
//! Limits are per process: N replicas behind a load balancer admit up to N
//! times the configured rate in all.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::http::{HeaderValue, StatusCode, header};

use crate::auth::Principal;
use crate::problem::ApiError;
use pinfold_core::ids::TenantId;

/// Number of independently locked maps.
pub const SHARDS: usize = 64;

/// Number of route classes ([`RouteClass::ALL`]).
pub const CLASSES: usize = 7;

/// What a route does, for rate limiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RouteClass {
    /// Publishing or importing a version (CPU-heavy validation, writes).
    Publish,
    /// Resolve sessions and resolutions (may call an upstream).
    Resolve,
    /// Scope planning.
    Plan,
    /// OAuth grants: creating one, exchanging a code, provider profiles.
    Grants,
    /// Everything else: reads, reviews, status changes, policy.
    Reads,
    /// The review console's pages and forms (`/console/t/{tenant}/...`,
    /// charged once the session is admitted to its tenant): buckets of
    /// their own, so a reviewer's browsing never spends the API's tokens,
    /// nor the API's clients a reviewer's.
    Console,
    /// Messages to the guard's MCP endpoint (`/t/{tenant}/mcp/{server}`,
    /// charged once the caller is admitted to the tenant): each may reach
    /// the route's upstream, so a client token cannot drive its tenant's
    /// upstream faster than this, nor spend the API's tokens.
    Guard,
}

impl RouteClass {
    /// Every class.
    pub const ALL: [RouteClass; CLASSES] = [
        RouteClass::Publish,
        RouteClass::Resolve,
        RouteClass::Plan,
        RouteClass::Grants,
        RouteClass::Reads,
        RouteClass::Console,
        RouteClass::Guard,
    ];

    /// Its name in configuration, metrics and problem bodies.
    pub fn name(self) -> &'static str {
        match self {
            RouteClass::Publish => "publish",
            RouteClass::Resolve => "resolve",
            RouteClass::Plan => "plan",
            RouteClass::Grants => "grants",
            RouteClass::Reads => "reads",
            RouteClass::Console => "console",
            RouteClass::Guard => "guard",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Whose bucket ran empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitScope {
    /// The tenant's (all its callers together).
    Tenant,
    /// The caller's (issuer and subject).
    Principal,
}

impl LimitScope {
    /// Both scopes.
    pub const ALL: [LimitScope; 2] = [LimitScope::Tenant, LimitScope::Principal];

    /// Its name in metrics and problem bodies.
    pub fn name(self) -> &'static str {
        match self {
            LimitScope::Tenant => "tenant",
            LimitScope::Principal => "principal",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A sustained rate and a burst.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Tokens added per second (> 0).
    pub per_second: f64,
    /// Bucket size: requests admitted at once after a quiet period (≥ 1).
    pub burst: u32,
}

impl Rate {
    /// Nanoseconds between two tokens (at least 1).
    fn interval_nanos(self) -> u64 {
        let n = 1e9 / self.per_second;
        if n.is_finite() && n >= 1.0 {
            // Bounded above: a rate so small that one token takes longer
            // than ~292 years saturates.
            n.min(u64::MAX as f64 / 2.0) as u64
        } else {
            1
        }
    }
}

/// The limits of every class for both scopes.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Per tenant, indexed like [`RouteClass::ALL`].
    pub tenant: [Rate; CLASSES],
    /// Per principal, indexed like [`RouteClass::ALL`].
    pub principal: [Rate; CLASSES],
    /// Most buckets kept at once (all shards together).
    pub max_buckets: usize,
}

/// Where the limiter's time comes from: the monotonic clock, or a manual
/// one that only moves when told (tests advance it instead of sleeping).
#[derive(Debug, Clone)]
pub enum Clock {
    /// Nanoseconds since this instant.
    System(Instant),
    /// Nanoseconds set by [`Clock::advance`].
    Manual(Arc<AtomicU64>),
}

impl Clock {
    /// The monotonic clock.
    pub fn system() -> Clock {
        Clock::System(Instant::now())
    }

    /// A clock at zero that moves only by [`Clock::advance`].
    pub fn manual() -> Clock {
        Clock::Manual(Arc::new(AtomicU64::new(0)))
    }

    /// Moves a manual clock forward (no effect on the system clock).
    pub fn advance(&self, by: Duration) {
        if let Clock::Manual(n) = self {
            let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
            n.fetch_add(by, Ordering::SeqCst);
        }
    }

    fn now(&self) -> u64 {
        match self {
            Clock::System(start) => u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX),
            Clock::Manual(n) => n.load(Ordering::SeqCst),
        }
        // Offset so that `now - burst window` never underflows at start.
        .saturating_add(1 << 62)
    }
}

/// One bucket: its theoretical arrival time and when it was last charged.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tat: u64,
    last: u64,
}

type Shard = Mutex<HashMap<u64, Bucket>>;

/// What the edge hands [`crate::TenantScope`]: the limiter and the class of
/// the matched route. Taken out of the request when charged, so a request
/// is charged once.
#[derive(Debug, Clone)]
pub struct Charge {
    /// The process's limiter.
    pub limiter: Arc<RateLimiter>,
    /// The class of the route.
    pub class: RouteClass,
}

/// The limiter one process shares between all requests.
pub struct RateLimiter {
    limits: Limits,
    clock: Clock,
    hasher: std::hash::RandomState,
    shards: Box<[Shard]>,
    per_shard: usize,
    refused: [[AtomicU64; 2]; CLASSES],
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// A refused request: which bucket, and how long until it holds a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    /// The route class.
    pub class: RouteClass,
    /// Whose bucket.
    pub scope: LimitScope,
    /// Time until one request of this key would be admitted.
    pub retry_after: Duration,
}

impl Limited {
    /// `Retry-After` in whole seconds, rounded up (at least 1).
    pub fn retry_after_secs(&self) -> u64 {
        let d = self.retry_after;
        let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
        secs.max(1)
    }

    /// The `429 rate_limited` problem, with `Retry-After`.
    pub fn into_error(self) -> ApiError {
        let secs = self.retry_after_secs();
        ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            "Too many requests",
        )
        .detail(format!(
            "the {} rate limit of {} requests is reached; retry after {secs} s",
            self.scope.name(),
            self.class.name()
        ))
        .with("class", self.class.name())
        .with("scope", self.scope.name())
        .with("retry_after", secs)
        .header(header::RETRY_AFTER, HeaderValue::from(secs))
    }
}

impl RateLimiter {
    /// A limiter enforcing `limits`, timed by `clock`.
    pub fn new(limits: Limits, clock: Clock) -> RateLimiter {
        let per_shard = limits.max_buckets.div_ceil(SHARDS).max(1);
        RateLimiter {
            limits,
            clock,
            hasher: std::hash::RandomState::new(),
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            per_shard,
            refused: Default::default(),
        }
    }

    /// The clock (tests advance a manual one).
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Charges one request of `class` by `principal` in `tenant`: `Ok` when
    /// both buckets had a token (both are charged), else which one is empty
    /// (neither is charged).
    pub fn check(
        &self,
        tenant: &TenantId,
        principal: &Principal,
        class: RouteClass,
    ) -> Result<(), Limited> {
        let now = self.clock.now();
        let tenant_key = self.key(&(0u8, tenant.as_str(), class.index()));
        let principal_key = self.key(&(
            1u8,
            principal.issuer.as_str(),
            principal.sub.as_str(),
            class.index(),
        ));
        let principal_rate = self.limits.principal[class.index()];
        let tenant_rate = self.limits.tenant[class.index()];
        if let Err(wait) = self.take(principal_key, principal_rate, now) {
            return Err(self.refuse(class, LimitScope::Principal, wait));
        }
        if let Err(wait) = self.take(tenant_key, tenant_rate, now) {
            self.give_back(principal_key, principal_rate);
            return Err(self.refuse(class, LimitScope::Tenant, wait));
        }
        Ok(())
    }

    /// Requests refused so far, per class and scope.
    pub fn refused(&self, class: RouteClass, scope: LimitScope) -> u64 {
        self.refused[class.index()][scope.index()].load(Ordering::Relaxed)
    }

    /// Buckets held now (all shards).
    pub fn buckets(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len()).sum()
    }

    fn refuse(&self, class: RouteClass, scope: LimitScope, wait: u64) -> Limited {
        self.refused[class.index()][scope.index()].fetch_add(1, Ordering::Relaxed);
        Limited {
            class,
            scope,
            retry_after: Duration::from_nanos(wait),
        }
    }

    fn key(&self, parts: &impl Hash) -> u64 {
        self.hasher.hash_one(parts)
    }

    fn shard(&self, key: u64) -> &Shard {
        // The high bits pick the shard; the map hashes the whole key again.
        &self.shards[(key >> 58) as usize % SHARDS]
    }

    /// One token from `key`'s bucket at `now`, or the nanoseconds until
    /// there is one.
    fn take(&self, key: u64, rate: Rate, now: u64) -> Result<(), u64> {
        let interval = rate.interval_nanos();
        let window = interval.saturating_mul(u64::from(rate.burst.max(1)));
        let mut map = lock(self.shard(key));
        let tat = map.get(&key).map_or(now, |b| b.tat.max(now));
        let next = tat.saturating_add(interval);
        if next - now > window {
            return Err(next - now - window);
        }
        if !map.contains_key(&key) && map.len() >= self.per_shard {
            evict(&mut map, now);
        }
        map.insert(
            key,
            Bucket {
                tat: next,
                last: now,
            },
        );
        Ok(())
    }

    /// Returns the token [`RateLimiter::take`] took (the other bucket was
    /// empty, so the request was not admitted).
    fn give_back(&self, key: u64, rate: Rate) {
        let interval = rate.interval_nanos();
        if let Some(b) = lock(self.shard(key)).get_mut(&key) {
            b.tat = b.tat.saturating_sub(interval);
        }
    }
}

/// Makes room in a full shard: drops every full bucket (time not ahead of
/// now), or, when none is, the one charged longest ago.
fn evict(map: &mut HashMap<u64, Bucket>, now: u64) {
    let before = map.len();
    map.retain(|_, b| b.tat > now);
    if map.len() < before {
        return;
    }
    if let Some(oldest) = map.iter().min_by_key(|(_, b)| b.last).map(|(k, _)| *k) {
        map.remove(&oldest);
    }
}

fn lock(shard: &Shard) -> std::sync::MutexGuard<'_, HashMap<u64, Bucket>> {
    // A panic while holding a shard leaves only counters behind: keep going.
    shard
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Role;

    fn limits(rate: f64, burst: u32, max_buckets: usize) -> Limits {
        let r = Rate {
            per_second: rate,
            burst,
        };
        Limits {
            tenant: [r; CLASSES],
            principal: [Rate {
                per_second: rate * 100.0,
                burst: burst * 100,
            }; CLASSES],
            max_buckets,
        }
    }

    fn who(sub: &str) -> Principal {
        Principal::new(sub, "https://iss", None, &[Role::Reader], 0)
    }

    #[test]
    fn a_burst_is_admitted_then_refused_until_the_clock_moves() {
        let l = RateLimiter::new(limits(2.0, 3, 1000), Clock::manual());
        let t = TenantId::parse("acme").unwrap();
        for _ in 0..3 {
            l.check(&t, &who("a"), RouteClass::Reads).unwrap();
        }
        let e = l.check(&t, &who("a"), RouteClass::Reads).unwrap_err();
        assert_eq!(e.scope, LimitScope::Tenant);
        assert_eq!(e.retry_after, Duration::from_millis(500));
        assert_eq!(e.retry_after_secs(), 1);
        assert_eq!(l.refused(RouteClass::Reads, LimitScope::Tenant), 1);
        // Another class has its own bucket.
        l.check(&t, &who("a"), RouteClass::Publish).unwrap();
        l.clock().advance(Duration::from_millis(499));
        assert!(l.check(&t, &who("a"), RouteClass::Reads).is_err());
        l.clock().advance(Duration::from_millis(1));
        l.check(&t, &who("a"), RouteClass::Reads).unwrap();
    }

    #[test]
    fn the_console_class_has_buckets_of_its_own() {
        let mut lim = limits(1000.0, 1000, 1000);
        lim.tenant[RouteClass::Console.index()] = Rate {
            per_second: 1.0,
            burst: 2,
        };
        let l = RateLimiter::new(lim, Clock::manual());
        let t = TenantId::parse("acme").unwrap();
        for _ in 0..2 {
            l.check(&t, &who("a"), RouteClass::Console).unwrap();
        }
        let e = l.check(&t, &who("a"), RouteClass::Console).unwrap_err();
        assert_eq!(
            (e.class, e.scope),
            (RouteClass::Console, LimitScope::Tenant)
        );
        assert_eq!(e.into_error().code, "rate_limited");
        // The API's classes are untouched by the console's refusals.
        for _ in 0..100 {
            l.check(&t, &who("a"), RouteClass::Reads).unwrap();
        }
        assert_eq!(l.refused(RouteClass::Console, LimitScope::Tenant), 1);
        assert_eq!(l.refused(RouteClass::Reads, LimitScope::Tenant), 0);
        assert_eq!(
            RouteClass::ALL.map(RouteClass::index),
            [0, 1, 2, 3, 4, 5, 6]
        );
    }

    #[test]
    fn a_refusal_by_the_tenant_does_not_charge_the_principal() {
        let mut lim = limits(1.0, 1, 1000);
        lim.principal = [Rate {
            per_second: 1.0,
            burst: 2,
        }; CLASSES];
        let l = RateLimiter::new(lim, Clock::manual());
        let a = TenantId::parse("tenant-a").unwrap();
        let b = TenantId::parse("tenant-b").unwrap();
        l.check(&a, &who("p"), RouteClass::Reads).unwrap();
        for _ in 0..5 {
            assert_eq!(
                l.check(&a, &who("p"), RouteClass::Reads).unwrap_err().scope,
                LimitScope::Tenant
            );
        }
        // The principal still has its second token.
        l.check(&b, &who("p"), RouteClass::Reads).unwrap();
        assert_eq!(
            l.check(
                &TenantId::parse("tenant-c").unwrap(),
                &who("p"),
                RouteClass::Reads
            )
            .unwrap_err()
            .scope,
            LimitScope::Principal
        );
    }

    #[test]
    fn the_same_subject_of_two_issuers_are_two_principals() {
        let mut lim = limits(1000.0, 1000, 1000);
        lim.principal = [Rate {
            per_second: 1.0,
            burst: 1,
        }; CLASSES];
        let l = RateLimiter::new(lim, Clock::manual());
        let t = TenantId::parse("acme").unwrap();
        let other = Principal::new("a", "https://other", None, &[Role::Reader], 0);
        l.check(&t, &who("a"), RouteClass::Reads).unwrap();
        l.check(&t, &other, RouteClass::Reads).unwrap();
        assert!(l.check(&t, &who("a"), RouteClass::Reads).is_err());
    }

    #[test]
    fn buckets_are_bounded_and_full_ones_go_first() {
        let l = RateLimiter::new(limits(1.0, 1, 256), Clock::manual());
        for i in 0..1000 {
            let t = TenantId::parse(&format!("tenant-{i}")).unwrap();
            l.check(&t, &who(&format!("p{i}")), RouteClass::Reads)
                .unwrap();
        }
        assert!(l.buckets() <= 256, "{} buckets", l.buckets());
        // Once every bucket is full again, a new key drops them.
        l.clock().advance(Duration::from_secs(1));
        let t = TenantId::parse("fresh").unwrap();
        l.check(&t, &who("fresh"), RouteClass::Reads).unwrap();
        assert!(l.buckets() <= 254, "{} buckets", l.buckets());
    }

    #[test]
    fn retry_after_rounds_up() {
        let at = |ms| Limited {
            class: RouteClass::Reads,
            scope: LimitScope::Tenant,
            retry_after: Duration::from_millis(ms),
        };
        assert_eq!(at(1).retry_after_secs(), 1);
        assert_eq!(at(1000).retry_after_secs(), 1);
        assert_eq!(at(1001).retry_after_secs(), 2);
        let e = at(2500).into_error();
        assert_eq!(e.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(e.code, "rate_limited");
        assert_eq!(e.headers[0].1, "3");
    }
}
