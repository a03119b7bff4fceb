//! What the resolve cache weighs is what it holds. This binary counts
//! every allocation (`stats_alloc` as its global allocator) and compares
//! what a cache entry keeps alive with the weight the cache gives it, then
//! fills a tenant's share with answers of a tool whose description is
//! 1 MiB and checks that the share holds in memory, not only in the
//! cache's own bookkeeping.
//!
//! One test function: the counters are process-wide, and a second test
//! running beside it would be counted too.

use std::alloc::System;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use pinfold_core::Mode;
use pinfold_core::card::Limits;
use pinfold_core::ids::TenantId;
use pinfold_example_upstream::{Running, Shape, Switches};
use pinfold_resolve::cache::{ENTRY_OVERHEAD, sample_entry};
use pinfold_resolve::{
    CachePolicy, Engine, EngineConfig, PreparedSignature, SessionCtx, Source, UpstreamTarget,
};
use serde_json::{Value, json};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Bytes allocated and not yet freed, process-wide.
fn live() -> i64 {
    let s = GLOBAL.stats();
    // A reallocation is already in these two (its growth as allocated, its
    // shrinking as deallocated); `bytes_reallocated` is the same change
    // again, and is not added.
    s.bytes_allocated as i64 - s.bytes_deallocated as i64
}

fn card(description_bytes: usize) -> Value {
    let mut card: Value =
        serde_json::from_str(include_str!("../../../examples/manage-files-1.0.0.json")).unwrap();
    if description_bytes > 0 {
        for t in card["signature"]["tools"].as_array_mut().unwrap() {
            if t["name"] == "manage_files" {
                t["description"] = json!("d".repeat(description_bytes));
            }
        }
    }
    card
}

fn prepared(description_bytes: usize) -> Arc<PreparedSignature> {
    let limits = Limits {
        max_document_bytes: 8 << 20,
        ..Limits::default()
    };
    Arc::new(PreparedSignature::new(&card(description_bytes), &limits).unwrap())
}

/// Answers of every shape the engine caches: the seed's whole tool
/// (conformant, and one with violations, whose findings the entry keeps),
/// the extension's annotations-only result with and without `_meta`.
fn answers() -> Vec<(&'static str, Value)> {
    let declared = card(0)["signature"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "manage_files")
        .unwrap()
        .clone();
    let mut seed = declared.clone();
    seed["annotations"] = json!({"readOnlyHint": true, "openWorldHint": false});
    seed.as_object_mut().unwrap().remove("resolve");
    let mut bad = seed.clone();
    bad["annotations"] =
        json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": true});
    bad["description"] = json!("something else entirely");
    vec![
        ("seed", json!({"tool": seed})),
        ("seed with violations", json!({"tool": bad})),
        (
            "annotations only",
            json!({"resultType": "complete", "name": "manage_files",
                "annotations": {"readOnlyHint": true, "openWorldHint": false}}),
        ),
        (
            "annotations and _meta",
            json!({"resultType": "complete", "name": "manage_files",
                "annotations": {"readOnlyHint": true, "openWorldHint": false},
                "_meta": {"io.example/trace": {"id": "x".repeat(200)}}}),
        ),
    ]
}

/// An entry's weight equals what it holds within 10 %: for each answer
/// shape, on a small declared tool and on one with a 1 MiB description
/// (which the hit body carries, and the served tool shares).
fn entry_weights() {
    let arguments = json!({"path": "/home/user/notes.txt", "action": "read"});
    for description in [0, 1 << 20] {
        let sig = prepared(description);
        // Once each, unmeasured: what the first call of a thread or process
        // sets up for good (the key's thread-local buffer, lazily built
        // statics) is not held by any one entry.
        for (_, answer) in answers() {
            drop(sample_entry(&sig, "manage_files", answer, &arguments));
        }
        for (what, answer) in answers() {
            let before = live();
            let (weight, parts) = sample_entry(&sig, "manage_files", answer.clone(), &arguments)
                .unwrap_or_else(|| panic!("{what}: the answer checks"));
            let held = live() - before;
            drop(parts);
            let diff = (weight as i64 - held).abs() as f64 / held as f64;
            println!(
                "entry ({what}, description {description} B): weight {weight} B (+{ENTRY_OVERHEAD} fixed), held {held} B, {:.1} % apart",
                diff * 100.0
            );
            assert!(
                diff <= 0.10,
                "{what}, description {description} B: weight {weight} B, held {held} B"
            );
        }
    }
}

fn ctx(up: &Running, sig: &Arc<PreparedSignature>) -> SessionCtx {
    SessionCtx {
        tenant: TenantId::parse("hostile").unwrap(),
        session: "s1".into(),
        expires_at: SystemTime::now() + Duration::from_secs(3600),
        signature: sig.clone(),
        mode: Mode::Permissive,
        cache: CachePolicy::Session,
        upstream: UpstreamTarget {
            url: up.url(),
            headers: vec![("x-upstream-key".into(), "k".into())],
            rules: pinfold_egress::Rules::new(pinfold_egress::AllowList::default(), true),
        },
    }
}

/// A tenant whose tool has a 1 MiB description resolves 1,000 distinct
/// keys: the cache counts at most its share for it, and the process holds
/// about that much more memory, not a mebibyte per key.
fn a_hostile_tenant_stays_inside_its_share() {
    const SHARE: u64 = 16 << 20;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let up = Running::start(
            "127.0.0.1:0".parse().unwrap(),
            Switches {
                shape: Shape::Extension,
                ..Switches::default()
            },
        )
        .await
        .unwrap();
        let sig = prepared(1 << 20);
        let e = Engine::new(EngineConfig {
            capacity_bytes: 4 * SHARE,
            tenant_share_bytes: SHARE,
            ..EngineConfig::default()
        });
        let c = ctx(&up, &sig);
        // Warm: the connection, the runtime's buffers.
        let r = e
            .resolve(&c, "manage_files", &json!({"path": "/w", "action": "read"}))
            .await
            .unwrap();
        assert_eq!(r.source, Source::Upstream);
        drop(r);
        let before = live();
        for i in 0..1_000 {
            let r = e
                .resolve(
                    &c,
                    "manage_files",
                    &json!({"path": format!("/f/{i}"), "action": "read"}),
                )
                .await
                .unwrap();
            assert_eq!(r.source, Source::Upstream);
        }
        e.run_pending_tasks();
        let grown = live() - before;
        let counted = e.tenant_cache_bytes(&c.tenant);
        let stats = e.stats();
        println!(
            "1,000 keys of a 1 MiB tool: the tenant counts {counted} B of its {SHARE} B share, \
             {} entries cached, {} refused at the share; the heap grew {grown} B",
            stats.cache_entries, stats.share_refusals
        );
        assert!(counted <= SHARE);
        assert!(stats.share_refusals > 900, "{stats:?}");
        assert!(
            grown <= (SHARE as f64 * 1.10) as i64 + (2 << 20),
            "the heap grew {grown} B for a {SHARE} B share"
        );
    });
}

#[test]
fn what_the_cache_weighs_is_what_it_holds() {
    entry_weights();
    a_hostile_tenant_stays_inside_its_share();
}
