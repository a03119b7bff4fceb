//! Resolve engine benchmarks (targets in the resolve issue: a 1 KiB
//! argument key ≤ 2 µs; a cache hit leaves room for HTTP, auth and
//! tenancy; Pinfold's added latency on a miss ≤ 0.3 ms mean).
//!
//! - `key_1kib_arguments`: building the cache key of a 1 KiB argument
//!   object (length-prefixed tuple + RFC 8785 bytes).
//! - `resolve_hit`: `Engine::resolve` served from the cache (validation,
//!   key, moka get, cloning the answer).
//! - `resolve_miss` vs `direct_call`: `Engine::resolve` with
//!   `CachePolicy::None` against the reference upstream on loopback, beside
//!   the same `tools/resolve` sent straight to it over one rmcp client. The
//!   difference is the engine's own cost on a miss (checking, coalescing,
//!   fingerprints), without the HTTP front.
//! - `resolve_hit_after_10k_invalidations`: `resolve_hit` again after
//!   another tenant's 10,000 sessions were each given a state and ended
//!   (10,000 invalidations); it should not differ from `resolve_hit`.

#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use criterion::{Criterion, criterion_group, criterion_main};
use pinfold_core::Mode;
use pinfold_core::card::Limits;
use pinfold_core::ids::TenantId;
use pinfold_example_upstream::{Running, Switches};
use pinfold_resolve::key::CacheKey;
use pinfold_resolve::{
    CachePolicy, Engine, EngineConfig, PreparedSignature, SessionCtx, Source, UpstreamTarget,
};
use rmcp::ServiceExt;
use rmcp::model::{ClientRequest, CustomRequest};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};

fn args_1kib() -> Value {
    let mut m = serde_json::Map::new();
    let mut i = 0;
    while serde_json::to_vec(&Value::Object(m.clone())).unwrap().len() < 1000 {
        m.insert(
            format!("field_{i:02}"),
            json!(format!("value number {i} with some text")),
        );
        m.insert(format!("n_{i:02}"), json!(i * 37));
        i += 1;
    }
    m.insert(
        "nested".into(),
        json!({"b": [1, 2.5, true, null], "a": "x"}),
    );
    Value::Object(m)
}

fn benches(c: &mut Criterion) {
    let args = args_1kib();
    c.bench_function("serde_json_to_vec_1kib_arguments_baseline", |b| {
        b.iter(|| serde_json::to_vec(black_box(&args)).unwrap())
    });
    c.bench_function("key_1kib_arguments", |b| {
        b.iter(|| {
            CacheKey::new(
                black_box("acme"),
                black_box("0b6f3a52-5d0e-4a77-9d5b-1f9c2b0c7e11"),
                black_box("manage_files"),
                black_box(&args),
            )
        })
    });

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let up = rt
        .block_on(Running::start(
            "127.0.0.1:0".parse().unwrap(),
            Switches::default(),
        ))
        .unwrap();
    let card: Value =
        serde_json::from_str(include_str!("../../../examples/manage-files-1.0.0.json")).unwrap();
    let signature = Arc::new(PreparedSignature::new(&card, &Limits::default()).unwrap());
    let ctx = |cache| SessionCtx {
        tenant: TenantId::parse("acme").unwrap(),
        session: "0b6f3a52-5d0e-4a77-9d5b-1f9c2b0c7e11".into(),
        expires_at: SystemTime::now() + Duration::from_secs(3600),
        signature: signature.clone(),
        mode: Mode::Permissive,
        cache,
        upstream: UpstreamTarget {
            url: up.url(),
            headers: vec![],
            // The upstream runs on loopback, which only the operator allows.
            rules: pinfold_egress::Rules::new(pinfold_egress::AllowList::default(), true),
        },
    };
    let engine = Engine::new(EngineConfig::default());
    let hit_ctx = ctx(CachePolicy::Session);
    let read = json!({"path": "/home/user/notes.txt", "action": "read"});
    let first = rt
        .block_on(engine.resolve(&hit_ctx, "manage_files", &read))
        .unwrap();
    assert_eq!(first.source, Source::Upstream);
    c.bench_function("resolve_hit", |b| {
        b.iter(|| {
            let r = rt
                .block_on(engine.resolve(&hit_ctx, "manage_files", black_box(&read)))
                .unwrap();
            assert_eq!(r.source, Source::Cache);
            r
        })
    });

    // The same hit after another tenant's 10,000 invalidations: each of
    // its sessions resolved once (a state, against an upstream that
    // refuses connections) and then ended. Invalidation by generation
    // queues nothing for later lookups, so the figure should match
    // `resolve_hit`.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}/mcp", closed.local_addr().unwrap());
    drop(closed);
    rt.block_on(async {
        for i in 0..10_000 {
            let mut c = ctx(CachePolicy::Session);
            c.tenant = TenantId::parse("flood").unwrap();
            c.session = format!("flood-{i}");
            c.upstream.url = dead.clone();
            let r = engine.resolve(&c, "manage_files", &read).await.unwrap();
            assert_eq!(r.source, Source::Fallback);
            engine.end_session(&c.tenant, &c.session);
        }
    });
    engine.run_pending_tasks();
    assert_eq!(engine.stats().session_states, 1);
    c.bench_function("resolve_hit_after_10k_invalidations", |b| {
        b.iter(|| {
            let r = rt
                .block_on(engine.resolve(&hit_ctx, "manage_files", black_box(&read)))
                .unwrap();
            assert_eq!(r.source, Source::Cache);
            r
        })
    });

    let miss_ctx = ctx(CachePolicy::None);
    c.bench_function("resolve_miss", |b| {
        b.iter(|| {
            let r = rt
                .block_on(engine.resolve(&miss_ctx, "manage_files", black_box(&read)))
                .unwrap();
            assert_eq!(r.source, Source::Upstream);
            r
        })
    });

    let url = up.url();
    let client = rt
        .block_on(async move { ().serve(StreamableHttpClientTransport::from_uri(url)).await })
        .unwrap();
    c.bench_function("direct_call", |b| {
        b.iter(|| {
            let req = ClientRequest::CustomRequest(CustomRequest::new(
                "tools/resolve",
                Some(json!({"name": "manage_files", "arguments": read})),
            ));
            rt.block_on(client.peer().send_request(req)).unwrap()
        })
    });
}

criterion_group!(benches_group, benches);
criterion_main!(benches_group);
