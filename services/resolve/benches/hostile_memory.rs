//! Process memory with the resolve cache filled by hostile entries.
//!
//! Eight tenants, each with a tool whose description is 1 MiB, resolve 100
//! distinct keys each against the reference upstream on loopback: every
//! answer's hit body carries the whole description, so each entry holds
//! about 1 MiB, and together they ask for far more than the cache's bound.
//! The resident set is read (`/proc/self/statm`) once the engine and the
//! upstream are warm (idle) and again after the fill; the target is
//! `after <= (bound + idle) * 1.25`. The allocator is the `pinfold`
//! binary's (mimalloc).
//!
//! `cargo bench -p pinfold-resolve --bench hostile_memory`
//! (`PINFOLD_BENCH_CACHE_MIB` sets the bound, default 64). Exits 1 when
//! over the target. Linux only.

#![allow(missing_docs)]

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use pinfold_core::Mode;
use pinfold_core::card::Limits;
use pinfold_core::ids::TenantId;
use pinfold_example_upstream::{Running, Shape, Switches};
use pinfold_resolve::{
    CachePolicy, Engine, EngineConfig, PreparedSignature, SessionCtx, UpstreamTarget,
};
use serde_json::{Value, json};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn rss() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").expect("Linux /proc");
    let pages: u64 = s.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    let bound: u64 = std::env::var("PINFOLD_BENCH_CACHE_MIB")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(64)
        << 20;
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
        let mut card: Value =
            serde_json::from_str(include_str!("../../../examples/manage-files-1.0.0.json"))
                .unwrap();
        for t in card["signature"]["tools"].as_array_mut().unwrap() {
            if t["name"] == "manage_files" {
                t["description"] = json!("d".repeat(1 << 20));
            }
        }
        let limits = Limits {
            max_document_bytes: 8 << 20,
            ..Limits::default()
        };
        let sig = Arc::new(PreparedSignature::new(&card, &limits).unwrap());
        let engine = Engine::new(EngineConfig {
            capacity_bytes: bound,
            tenant_share_bytes: bound / 4,
            ..EngineConfig::default()
        });
        let ctxs: Vec<SessionCtx> = (0..8)
            .map(|t| SessionCtx {
                tenant: TenantId::parse(&format!("hostile-{t}")).unwrap(),
                session: format!("session-{t}"),
                expires_at: SystemTime::now() + Duration::from_secs(3600),
                signature: sig.clone(),
                mode: Mode::Permissive,
                cache: CachePolicy::Session,
                upstream: UpstreamTarget {
                    url: up.url(),
                    headers: vec![("x-upstream-key".into(), "k".into())],
                    rules: pinfold_egress::Rules::new(pinfold_egress::AllowList::default(), true),
                },
            })
            .collect();
        // Warm every session (its connection) without filling the cache.
        for c in &ctxs {
            let _ = engine
                .resolve(c, "manage_files", &json!({"path": "/warm", "action": "read"}))
                .await
                .unwrap();
        }
        engine.run_pending_tasks();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let idle = rss();
        for i in 0..100 {
            for c in &ctxs {
                let _ = engine
                    .resolve(c, "manage_files", &json!({"path": format!("/f/{i}"), "action": "read"}))
                    .await
                    .unwrap();
            }
        }
        engine.run_pending_tasks();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let after = rss();
        let s = engine.stats();
        let target = ((bound + idle) as f64 * 1.25) as u64;
        println!(
            "hostile_memory: cache bound {:.0} MiB, idle RSS {:.1} MiB, RSS after 800 one-MiB answers {:.1} MiB \
             (target <= {:.1} MiB: (bound + idle) * 1.25); cache counts {:.1} MiB in {} entries, {} refused at a share",
            mib(bound),
            mib(idle),
            mib(after),
            mib(target),
            mib(s.cache_bytes),
            s.cache_entries,
            s.share_refusals
        );
        if after > target {
            eprintln!("hostile_memory: over the target");
            std::process::exit(1);
        }
    });
}
