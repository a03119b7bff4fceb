//! Rate-limit cost per admitted request: one charge of a tenant bucket and
//! a caller bucket (two shard locks, two keyed hashes), on a hot key and
//! across 50,000 keys (every charge a map miss and insert, evictions at the
//! bound).

// criterion_group! generates undocumented functions.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use pinfold_core::ids::TenantId;
use pinfold_http::auth::{Principal, Role};
use pinfold_http::ratelimit::{Clock, Limits, Rate, RateLimiter, RouteClass};

fn limiter(max_buckets: usize) -> RateLimiter {
    let r = Rate {
        per_second: 1e9,
        burst: u32::MAX,
    };
    RateLimiter::new(
        Limits {
            tenant: [r; pinfold_http::ratelimit::CLASSES],
            principal: [r; pinfold_http::ratelimit::CLASSES],
            max_buckets,
        },
        Clock::system(),
    )
}

fn bench(c: &mut Criterion) {
    let tenant = TenantId::parse("acme").unwrap();
    let who = Principal::new("bench", "https://issuer.bench", None, &[Role::Reader], 0);
    let hot = limiter(100_000);
    c.bench_function("ratelimit_check_hot_key", |b| {
        b.iter(|| black_box(hot.check(&tenant, &who, RouteClass::Reads)).unwrap())
    });
    let many = limiter(10_000);
    let tenants: Vec<TenantId> = (0..50_000)
        .map(|i| TenantId::parse(&format!("tenant-{i}")).unwrap())
        .collect();
    let mut i = 0;
    c.bench_function("ratelimit_check_50k_keys_10k_bound", |b| {
        b.iter(|| {
            i = (i + 1) % tenants.len();
            black_box(many.check(&tenants[i], &who, RouteClass::Reads)).unwrap()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
