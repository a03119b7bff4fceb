//! `[rate_limits]`: the token buckets charged when a request is admitted to
//! a tenant, per route class, for the tenant and for each caller; their
//! defaults, their checks, and the limiter they describe.

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// Rate limits of one route class: a sustained rate (requests per second)
/// and a burst, for the tenant as a whole and for each caller in it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassLimits {
    /// Requests per second one tenant may sustain.
    pub tenant_rate: f64,
    /// Requests one tenant may make at once after a quiet period.
    pub tenant_burst: u32,
    /// Requests per second one caller (issuer and subject) may sustain.
    pub principal_rate: f64,
    /// Requests one caller may make at once after a quiet period.
    pub principal_burst: u32,
}

impl ClassLimits {
    const fn new(
        tenant_rate: f64,
        tenant_burst: u32,
        principal_rate: f64,
        principal_burst: u32,
    ) -> Self {
        ClassLimits {
            tenant_rate,
            tenant_burst,
            principal_rate,
            principal_burst,
        }
    }
}

/// `[rate_limits]`: token buckets charged when a request is admitted to a
/// tenant (see `pinfold_http::ratelimit`); over either → `429 rate_limited`
/// with `Retry-After`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitSettings {
    /// Whether requests are limited at all.
    pub enabled: bool,
    /// Most buckets this process keeps (each is a few dozen bytes); idle
    /// full buckets are dropped first.
    pub max_buckets: usize,
    /// `PUT .../versions/{version}`, `POST .../import/server-json`.
    pub publish: ClassLimits,
    /// Every `/sessions` route (opening, resolving, closing, listing).
    pub resolve: ClassLimits,
    /// `POST .../scopes/plan`.
    pub plan: ClassLimits,
    /// Grants, their code exchange, provider profiles.
    pub grants: ClassLimits,
    /// Every other tenant route.
    pub reads: ClassLimits,
    /// The review console's pages and forms of a signed-in session
    /// (`/console/t/{tenant}/...`; sign-in itself is not charged).
    pub console: ClassLimits,
    /// Messages to the guard's MCP endpoint (`/t/{tenant}/mcp/{server}`:
    /// `POST`, and the `GET` and `DELETE` of a session), each of which may
    /// reach the route's upstream.
    pub guard: ClassLimits,
}

impl Default for RateLimitSettings {
    fn default() -> Self {
        RateLimitSettings {
            enabled: true,
            max_buckets: 100_000,
            publish: ClassLimits::new(5.0, 50, 2.0, 20),
            resolve: ClassLimits::new(500.0, 1000, 200.0, 400),
            plan: ClassLimits::new(50.0, 100, 20.0, 50),
            grants: ClassLimits::new(20.0, 50, 5.0, 20),
            reads: ClassLimits::new(1000.0, 2000, 500.0, 1000),
            console: ClassLimits::new(50.0, 200, 5.0, 60),
            guard: ClassLimits::new(500.0, 1000, 200.0, 400),
        }
    }
}

impl RateLimitSettings {
    /// Each class with its limits, in [`pinfold_http::ratelimit::RouteClass::ALL`] order.
    pub fn classes(
        &self,
    ) -> [(pinfold_http::ratelimit::RouteClass, ClassLimits); pinfold_http::ratelimit::CLASSES]
    {
        use pinfold_http::ratelimit::RouteClass as C;
        [
            (C::Publish, self.publish),
            (C::Resolve, self.resolve),
            (C::Plan, self.plan),
            (C::Grants, self.grants),
            (C::Reads, self.reads),
            (C::Console, self.console),
            (C::Guard, self.guard),
        ]
    }

    /// The limiter these settings describe (`None` when disabled).
    pub fn limiter(
        &self,
        clock: pinfold_http::ratelimit::Clock,
    ) -> Option<std::sync::Arc<pinfold_http::ratelimit::RateLimiter>> {
        use pinfold_http::ratelimit::{Limits, Rate, RateLimiter};
        if !self.enabled {
            return None;
        }
        let classes = self.classes();
        let tenant = classes.map(|(_, l)| Rate {
            per_second: l.tenant_rate,
            burst: l.tenant_burst,
        });
        let principal = classes.map(|(_, l)| Rate {
            per_second: l.principal_rate,
            burst: l.principal_burst,
        });
        Some(std::sync::Arc::new(RateLimiter::new(
            Limits {
                tenant,
                principal,
                max_buckets: self.max_buckets,
            },
            clock,
        )))
    }

    pub(super) fn validate(&self) -> anyhow::Result<()> {
        if self.max_buckets < 1024 {
            bail!("rate_limits.max_buckets must be at least 1024");
        }
        for (class, l) in self.classes() {
            let at = format!("rate_limits.{}", class.name());
            for (name, rate) in [
                ("tenant_rate", l.tenant_rate),
                ("principal_rate", l.principal_rate),
            ] {
                if !(rate.is_finite() && rate > 0.0) {
                    bail!("{at}.{name} must be a number greater than 0");
                }
            }
            for (name, burst) in [
                ("tenant_burst", l.tenant_burst),
                ("principal_burst", l.principal_burst),
            ] {
                if burst == 0 {
                    bail!("{at}.{name} must be at least 1");
                }
            }
        }
        Ok(())
    }
}
