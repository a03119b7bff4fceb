//! The engine against the reference upstream over real HTTP (loopback).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use pinfold_core::Mode;
use pinfold_core::card::Limits;
use pinfold_core::ids::TenantId;
use pinfold_example_upstream::{Running, Shape, Switches};
use pinfold_resolve::{
    CachePolicy, Engine, EngineConfig, Invalidation, PreparedSignature, Resolution, ResolveError,
    ResolveEvent, SessionCtx, Source, UpstreamTarget,
};
use serde_json::{Value, json};

fn card() -> Value {
    let text = include_str!("../../../examples/manage-files-1.0.0.json");
    serde_json::from_str(text).unwrap()
}

fn signature() -> Arc<PreparedSignature> {
    Arc::new(PreparedSignature::new(&card(), &Limits::default()).unwrap())
}

async fn upstream(switches: Switches) -> Arc<Running> {
    Running::start("127.0.0.1:0".parse().unwrap(), switches)
        .await
        .unwrap()
}

fn ctx(up: &Running, session: &str, mode: Mode, cache: CachePolicy) -> SessionCtx {
    SessionCtx {
        tenant: TenantId::parse("acme").unwrap(),
        session: session.to_owned(),
        expires_at: SystemTime::now() + Duration::from_secs(3600),
        signature: signature(),
        mode,
        cache,
        upstream: UpstreamTarget {
            url: up.url(),
            headers: vec![("x-upstream-key".into(), "k".into())],
            // The upstream runs on loopback, which only the operator allows.
            rules: pinfold_egress::Rules::new(pinfold_egress::AllowList::default(), true),
        },
    }
}

fn engine() -> Engine {
    Engine::new(EngineConfig {
        upstream_timeout: Duration::from_secs(3),
        ..EngineConfig::default()
    })
}

/// An upstream answering after `delay_ms`, an engine and a session on it.
async fn slow_session(delay_ms: u64) -> (Arc<Running>, Arc<Engine>, Arc<SessionCtx>) {
    let up = upstream(Switches {
        delay: Duration::from_millis(delay_ms),
        ..Switches::default()
    })
    .await;
    let c = Arc::new(ctx(&up, "s1", Mode::Permissive, CachePolicy::Session));
    (up, Arc::new(engine()), c)
}

/// Resolves `manage_files` reading in a task of its own.
fn spawn_read(
    e: &Arc<Engine>,
    c: &Arc<SessionCtx>,
) -> tokio::task::JoinHandle<Result<Resolution, ResolveError>> {
    let (e, c) = (e.clone(), c.clone());
    tokio::spawn(async move { e.resolve(&c, "manage_files", &args("read")).await })
}

/// Waits until `cond` holds, failing after 10 s: for work a task finishes
/// in its own time after its caller left.
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn args(action: &str) -> Value {
    json!({"path": "/home/user/notes.txt", "action": action})
}

#[tokio::test]
async fn read_is_read_only_and_delete_destructive() {
    let up = upstream(Switches::default()).await;
    let e = engine();
    let c = ctx(&up, "s1", Mode::Permissive, CachePolicy::Session);
    let r = e.resolve(&c, "manage_files", &args("read")).await.unwrap();
    assert_eq!(r.source, Source::Upstream, "{r:?}");
    assert!(r.conformant, "{r:?}");
    assert_eq!(r.tool["annotations"]["readOnlyHint"], json!(true));
    assert_eq!(r.tool["name"], json!("manage_files"));
    assert!(r.tool["inputSchema"].is_object());
    let d = e
        .resolve(&c, "manage_files", &args("delete"))
        .await
        .unwrap();
    assert_eq!(d.tool["annotations"]["destructiveHint"], json!(true));
    assert_eq!(d.tool["annotations"]["readOnlyHint"], json!(false));
    assert_eq!(up.calls(), 2);
    // The serialised answer has the documented shape.
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["source"], json!("upstream"));
    assert!(v.get("events").is_none() && v.get("reason").is_none());
    assert_eq!(v["violations"], json!([]));
}

#[tokio::test]
async fn reordered_arguments_hit_the_cache() {
    let up = upstream(Switches::default()).await;
    let e = engine();
    let c = ctx(&up, "s1", Mode::Permissive, CachePolicy::Session);
    let a: Value =
        serde_json::from_str(r#"{"path": "/a", "action": "append", "content": "x"}"#).unwrap();
    let b: Value =
        serde_json::from_str(r#"{"content": "x", "action": "append", "path": "/a"}"#).unwrap();
    assert_eq!(
        e.resolve(&c, "manage_files", &a).await.unwrap().source,
        Source::Upstream
    );
    let r = e.resolve(&c, "manage_files", &b).await.unwrap();
    assert_eq!(r.source, Source::Cache);
    assert_eq!(r.tool["annotations"]["destructiveHint"], json!(false));
    assert_eq!(up.calls(), 1);
    let s = e.stats();
    assert_eq!((s.hits, s.misses, s.upstream_calls), (1, 1, 1));
    assert_eq!(s.cache_entries, 1);
    assert!(s.cache_bytes > 0);
    // Another session does not see this session's entry.
    let c2 = ctx(&up, "s2", Mode::Permissive, CachePolicy::Session);
    assert_eq!(
        e.resolve(&c2, "manage_files", &b).await.unwrap().source,
        Source::Upstream
    );
    assert_eq!(up.calls(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_identical_misses_make_one_call() {
    let (up, e, c) = slow_session(200).await;
    let mut tasks = Vec::new();
    for _ in 0..100 {
        tasks.push(spawn_read(&e, &c));
    }
    for t in tasks {
        let r = t.await.unwrap().unwrap();
        assert!(
            matches!(r.source, Source::Upstream | Source::Cache),
            "{r:?}"
        );
        assert_eq!(r.tool["annotations"]["readOnlyHint"], json!(true));
    }
    assert_eq!(up.calls(), 1);
    let s = e.stats();
    assert_eq!(s.upstream_calls, 1);
    assert_eq!(s.hits + s.misses, 100);
    assert_eq!(s.misses, s.coalesced_waits + 1);
}

#[tokio::test]
async fn a_call_outlives_its_leader_while_another_caller_waits() {
    let (up, e, c) = slow_session(300).await;
    // The leader starts the call and goes away (its client hung up) while
    // a second caller of the same key waits on it.
    let leader = spawn_read(&e, &c);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let waiter = spawn_read(&e, &c);
    tokio::time::sleep(Duration::from_millis(50)).await;
    leader.abort();
    let r = waiter.await.unwrap().unwrap();
    assert_eq!(r.source, Source::Upstream, "{r:?}");
    assert_eq!(r.tool["annotations"]["readOnlyHint"], json!(true));
    assert_eq!(up.calls(), 1);
    assert_eq!(e.stats().coalesced_waits, 1);
    // The answer was cached as usual.
    let again = e.resolve(&c, "manage_files", &args("read")).await.unwrap();
    assert_eq!(again.source, Source::Cache);
}

#[tokio::test]
async fn a_call_whose_caller_left_still_ends_in_the_cache() {
    let (up, e, c) = slow_session(300).await;
    let gone = tokio::time::timeout(
        Duration::from_millis(100),
        e.resolve(&c, "manage_files", &args("read")),
    )
    .await;
    assert!(gone.is_err(), "the caller left before the answer");
    // The call goes on without its caller: it reaches the upstream, and
    // once the upstream answers, the answer lands in the cache (how soon
    // depends on the machine's load, so wait for each, within a bound).
    eventually("the upstream is called", || up.calls() == 1).await;
    eventually("the answer is cached", || e.stats().cache_bytes > 0).await;
    // A retry is a cache hit, not a second call.
    let r = e.resolve(&c, "manage_files", &args("read")).await.unwrap();
    assert_eq!(r.source, Source::Cache, "{r:?}");
    assert_eq!(up.calls(), 1);
    // A caller that leaves after another has joined changes nothing either.
    let d = Arc::new(ctx(&up, "s2", Mode::Permissive, CachePolicy::Session));
    let gone = tokio::time::timeout(
        Duration::from_millis(100),
        e.resolve(&d, "manage_files", &args("delete")),
    )
    .await;
    assert!(gone.is_err());
    let r = e
        .resolve(&d, "manage_files", &args("delete"))
        .await
        .unwrap();
    assert_eq!(
        r.source,
        Source::Upstream,
        "joined the call in flight: {r:?}"
    );
    assert_eq!(up.calls(), 2);
}

#[tokio::test]
async fn undeclared_tool_and_invalid_arguments() {
    let up = upstream(Switches::default()).await;
    let e = engine();
    let c = ctx(&up, "s1", Mode::Permissive, CachePolicy::Session);
    assert_eq!(
        e.resolve(&c, "nope", &json!({})).await.unwrap_err(),
        ResolveError::ToolNotDeclared("nope".into())
    );
    let err = e
        .resolve(&c, "manage_files", &json!({"path": 1, "action": "read"}))
        .await
        .unwrap_err();
    let ResolveError::InvalidArguments(v) = err else {
        panic!("{err:?}")
    };
    assert_eq!(v.errors[0].pointer, "/path");
    let err = e
        .resolve(
            &c,
            "manage_files",
            &json!({"path": "/a", "action": "chmod"}),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, ResolveError::InvalidArguments(ref v) if v.errors[0].pointer == "/action")
    );
    assert_eq!(up.calls(), 0);
}

#[tokio::test]
async fn static_tools_never_go_upstream() {
    let up = upstream(Switches::default()).await;
    let e = engine();
    let c = ctx(&up, "s1", Mode::Strict, CachePolicy::Session);
    let r = e
        .resolve(&c, "list_files", &json!({"dir": "/"}))
        .await
        .unwrap();
    assert_eq!(r.source, Source::Static);
    assert_eq!(r.tool["annotations"]["readOnlyHint"], json!(true));
    assert_eq!(up.calls(), 0);
}

#[tokio::test]
async fn strict_refuses_and_permissive_flags_an_undeclared_annotation() {
    let up = upstream(Switches {
        undeclared: true,
        ..Switches::default()
    })
    .await;
    let e = engine();
    let p = ctx(&up, "perm", Mode::Permissive, CachePolicy::Session);
    let r = e.resolve(&p, "manage_files", &args("read")).await.unwrap();
    assert_eq!(r.source, Source::Upstream);
    assert!(!r.conformant);
    assert_eq!(r.tool["annotations"]["openWorldHint"], json!(true));
    assert!(r.violations.iter().any(|v| v.less_safe));
    assert!(r.events.is_empty());

    let s = ctx(&up, "strict", Mode::Strict, CachePolicy::Session);
    let r = e.resolve(&s, "manage_files", &args("read")).await.unwrap();
    assert_eq!(r.source, Source::Fallback);
    assert_eq!(r.reason.as_deref(), Some("refused_strict"));
    assert!(!r.conformant && !r.violations.is_empty());
    // The worst case is served.
    assert_eq!(r.tool["annotations"]["destructiveHint"], json!(true));
    assert_eq!(r.tool["annotations"]["openWorldHint"], json!(false));
    assert!(
        matches!(&r.events[..], [ResolveEvent::StrictRefusal { tool, .. }] if tool == "manage_files")
    );
    // A cached refusal is refused again, without a second audit event.
    let again = e.resolve(&s, "manage_files", &args("read")).await.unwrap();
    assert_eq!(again.source, Source::Fallback);
    assert!(again.events.is_empty());
    assert_eq!(up.calls(), 2);
    let stats = e.stats();
    assert!(
        stats
            .violations
            .iter()
            .any(|(k, n)| *k == "annotation_not_declared" && *n == 2)
    );
    assert!(
        stats
            .fallbacks
            .iter()
            .any(|(k, n)| *k == "refused_strict" && *n == 2)
    );
}

#[tokio::test]
async fn upstream_stopped_falls_back_then_recovers() {
    let up = upstream(Switches::default()).await;
    let e = engine();
    let c = ctx(&up, "s1", Mode::Permissive, CachePolicy::Session);
    assert_eq!(
        e.resolve(&c, "manage_files", &args("read"))
            .await
            .unwrap()
            .source,
        Source::Upstream
    );
    up.stop().await;
    let r = e
        .resolve(&c, "manage_files", &args("delete"))
        .await
        .unwrap();
    assert_eq!(r.source, Source::Fallback, "{r:?}");
    assert_eq!(r.reason.as_deref(), Some("upstream_error"));
    assert_eq!(r.tool["annotations"]["destructiveHint"], json!(true));
    // Errors are not cached: once the upstream is back, the call succeeds.
    up.restart().await.unwrap();
    let r = e
        .resolve(&c, "manage_files", &args("delete"))
        .await
        .unwrap();
    assert_eq!(r.source, Source::Upstream, "{r:?}");
    assert!(r.conformant);
    // The cached answer survived the outage.
    assert_eq!(
        e.resolve(&c, "manage_files", &args("read"))
            .await
            .unwrap()
            .source,
        Source::Cache
    );
}

#[tokio::test]
async fn rpc_errors_and_timeouts_fall_back() {
    let up = upstream(Switches {
        error: true,
        ..Switches::default()
    })
    .await;
    let e = Engine::new(EngineConfig {
        upstream_timeout: Duration::from_millis(500),
        ..EngineConfig::default()
    });
    let c = ctx(&up, "s1", Mode::Permissive, CachePolicy::Session);
    let r = e.resolve(&c, "manage_files", &args("read")).await.unwrap();
    assert_eq!(
        (r.source, r.reason.as_deref()),
        (Source::Fallback, Some("rpc_error"))
    );
    // An upstream without the resolve method says so: not an error of the
    // call, the method is not implemented.
    up.set(Switches {
        no_resolve: true,
        ..Switches::default()
    });
    let r = e.resolve(&c, "manage_files", &args("read")).await.unwrap();
    assert_eq!(
        (r.source, r.reason.as_deref()),
        (Source::Fallback, Some("not_implemented"))
    );
    up.set(Switches {
        delay: Duration::from_secs(2),
        ..Switches::default()
    });
    let r = e.resolve(&c, "manage_files", &args("read")).await.unwrap();
    assert_eq!(
        (r.source, r.reason.as_deref()),
        (Source::Fallback, Some("timeout"))
    );
    up.set(Switches {
        shape: Shape::Malformed,
        ..Switches::default()
    });
    let r = e.resolve(&c, "manage_files", &args("read")).await.unwrap();
    assert_eq!(
        (r.source, r.reason.as_deref()),
        (Source::Fallback, Some("malformed"))
    );
    up.set(Switches::default());
    let r = e.resolve(&c, "manage_files", &args("read")).await.unwrap();
    assert_eq!(r.source, Source::Upstream);
    let s = e.stats();
    for reason in ["rpc_error", "not_implemented", "timeout", "malformed"] {
        assert!(s.fallbacks.contains(&(reason, 1)), "{s:?}");
    }
    assert_eq!(s.cache_entries, 1);
}

#[tokio::test]
async fn nondeterministic_upstream_is_a_violation() {
    let up = upstream(Switches {
        nondeterministic: true,
        ..Switches::default()
    })
    .await;
    let e = engine();
    // Without a cache every call goes upstream, so the second answer differs.
    let c = ctx(&up, "s1", Mode::Permissive, CachePolicy::None);
    let first = e.resolve(&c, "manage_files", &args("read")).await.unwrap();
    assert!(first.events.is_empty());
    let second = e.resolve(&c, "manage_files", &args("read")).await.unwrap();
    assert!(
        matches!(&second.events[..], [ResolveEvent::DeterminismViolation { previous, current, .. }] if previous != current),
        "{second:?}"
    );
    assert!(
        e.stats()
            .violations
            .iter()
            .any(|(k, n)| *k == "determinism" && *n == 1)
    );
}

#[tokio::test]
async fn sampled_rechecks_catch_nondeterminism_behind_the_cache() {
    let up = upstream(Switches {
        nondeterministic: true,
        ..Switches::default()
    })
    .await;
    let e = Engine::new(EngineConfig {
        recheck_rate: 1.0,
        ..EngineConfig::default()
    });
    let c = ctx(&up, "s1", Mode::Permissive, CachePolicy::Session);
    e.resolve(&c, "manage_files", &args("read")).await.unwrap();
    let r = e.resolve(&c, "manage_files", &args("read")).await.unwrap();
    assert_eq!(r.source, Source::Upstream);
    assert!(matches!(
        &r.events[..],
        [ResolveEvent::DeterminismViolation { .. }]
    ));
    assert_eq!(up.calls(), 2);
}

#[tokio::test]
async fn no_cache_policy_goes_upstream_every_time() {
    let up = upstream(Switches::default()).await;
    let e = engine();
    let c = ctx(&up, "s1", Mode::Permissive, CachePolicy::None);
    for _ in 0..3 {
        let r = e.resolve(&c, "manage_files", &args("read")).await.unwrap();
        assert_eq!(r.source, Source::Upstream);
        assert!(r.events.is_empty());
    }
    assert_eq!(up.calls(), 3);
    assert_eq!(e.stats().cache_entries, 0);
}

#[tokio::test]
async fn ending_a_session_drops_its_entries() {
    let up = upstream(Switches::default()).await;
    let e = engine();
    let c = ctx(&up, "s1", Mode::Permissive, CachePolicy::Session);
    let other = ctx(&up, "s2", Mode::Permissive, CachePolicy::Session);
    e.resolve(&c, "manage_files", &args("read")).await.unwrap();
    e.resolve(&c, "manage_files", &args("delete"))
        .await
        .unwrap();
    e.resolve(&other, "manage_files", &args("read"))
        .await
        .unwrap();
    assert_eq!(e.stats().cache_entries, 3);
    e.end_session(&c.tenant, "s1");
    e.run_pending_tasks();
    assert_eq!(e.stats().cache_entries, 1);
    assert_eq!(
        e.resolve(&other, "manage_files", &args("read"))
            .await
            .unwrap()
            .source,
        Source::Cache
    );
    // A session of the same id made again starts empty.
    assert_eq!(
        e.resolve(&c, "manage_files", &args("read"))
            .await
            .unwrap()
            .source,
        Source::Upstream
    );
}

/// Resolves, has the upstream announce a tool list change, and checks the
/// session's entries are gone.
async fn list_changed_invalidates(up: Arc<Running>) {
    let e = engine();
    let c = ctx(&up, "s1", Mode::Permissive, CachePolicy::Session);
    e.resolve(&c, "manage_files", &args("read")).await.unwrap();
    assert_eq!(
        e.resolve(&c, "manage_files", &args("read"))
            .await
            .unwrap()
            .source,
        Source::Cache
    );
    // The notification travels over a stream the client opens after
    // connecting: send until the engine has handled one (each try waits
    // for that signal, bounded).
    let mut handled = e.list_changed_events();
    let mut delivered = false;
    for _ in 0..50 {
        up.notify_list_changed().await;
        if tokio::time::timeout(Duration::from_millis(100), handled.changed())
            .await
            .is_ok()
        {
            delivered = true;
            break;
        }
    }
    assert!(delivered, "no list_changed reached the engine");
    let source = e
        .resolve(&c, "manage_files", &args("read"))
        .await
        .unwrap()
        .source;
    assert_eq!(source, Source::Upstream);
    assert_eq!(up.calls(), 2);
    assert_eq!(e.stats().list_changed, 1);
    // The entry of the old generation was met, and dropped.
    assert_eq!(e.stats().stale_dropped, 1);
    assert_eq!(e.stats().invalidations, 1);
}

#[tokio::test]
async fn list_changed_invalidates_the_session_sessionless() {
    let up = upstream(Switches::default()).await;
    list_changed_invalidates(up.clone()).await;
    // The upstream offers 2026-07-28: no protocol session, and the client
    // repeats its version and capabilities (with the tool-resolution
    // extension) in every request.
    let meta = up.last_request_meta().unwrap();
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        json!("2026-07-28"),
        "{meta}"
    );
    assert!(
        meta["io.modelcontextprotocol/clientCapabilities"]["extensions"]
            .get("io.modelcontextprotocol/tool-resolution")
            .is_some(),
        "{meta}"
    );
}

#[tokio::test]
async fn list_changed_invalidates_the_session_with_a_protocol_session() {
    let up = upstream(Switches {
        legacy_only: true,
        ..Switches::default()
    })
    .await;
    list_changed_invalidates(up.clone()).await;
    let meta = up.last_request_meta().unwrap();
    assert!(
        meta.get("io.modelcontextprotocol/protocolVersion")
            .is_none(),
        "{meta}"
    );
}

#[tokio::test]
async fn extension_shape_and_dynamic_annotations() {
    let up = upstream(Switches {
        shape: Shape::Extension,
        ..Switches::default()
    })
    .await;
    let e = engine();
    let c = ctx(&up, "s1", Mode::Strict, CachePolicy::Session);
    let r = e.resolve(&c, "manage_files", &args("read")).await.unwrap();
    assert_eq!(r.source, Source::Upstream, "{r:?}");
    assert!(r.conformant, "{r:?}");
    assert_eq!(r.tool["annotations"]["readOnlyHint"], json!(true));
    assert!(r.tool["inputSchema"].is_object());
    assert_eq!(r.tool["name"], json!("manage_files"));
    let d = e
        .resolve(&c, "manage_files_dynamic", &args("append"))
        .await
        .unwrap();
    assert_eq!(d.source, Source::Upstream, "{d:?}");
    assert!(d.conformant, "{d:?}");
    assert_eq!(d.tool["annotations"]["destructiveHint"], json!(false));
    assert_eq!(d.tool["name"], json!("manage_files_dynamic"));
    assert_eq!(d.tool["dynamicAnnotations"], json!(true));
}

#[tokio::test]
async fn batch_in_order() {
    let up = upstream(Switches::default()).await;
    let e = engine();
    let c = ctx(&up, "s1", Mode::Permissive, CachePolicy::Session);
    let calls = vec![
        ("manage_files".to_owned(), args("read")),
        ("nope".to_owned(), json!({})),
        ("manage_files".to_owned(), args("delete")),
        ("list_files".to_owned(), json!({"dir": "/"})),
        ("manage_files".to_owned(), args("read")),
    ];
    let out = e.resolve_batch(&c, &calls).await;
    assert_eq!(out.len(), 5);
    assert_eq!(
        out[0].as_ref().unwrap().tool["annotations"]["readOnlyHint"],
        json!(true)
    );
    assert!(out[1].is_err());
    assert_eq!(
        out[2].as_ref().unwrap().tool["annotations"]["destructiveHint"],
        json!(true)
    );
    assert_eq!(out[3].as_ref().unwrap().source, Source::Static);
    assert_eq!(
        out[4].as_ref().unwrap().tool["annotations"]["readOnlyHint"],
        json!(true)
    );
    assert_eq!(up.calls(), 2);
}

#[tokio::test]
async fn retry_after_is_honoured_without_waiting() {
    let up = upstream(Switches {
        overloaded: Some(120),
        ..Switches::default()
    })
    .await;
    let e = engine();
    let c = ctx(&up, "s1", Mode::Permissive, CachePolicy::Session);
    let r = e.resolve(&c, "manage_files", &args("read")).await.unwrap();
    assert_eq!(
        (r.source, r.reason.as_deref()),
        (Source::Fallback, Some("upstream_error"))
    );
    let turned_away = up.rejected();
    assert!(turned_away >= 1);
    // Within the Retry-After window the upstream is not asked again.
    let r = e
        .resolve(&c, "manage_files", &args("delete"))
        .await
        .unwrap();
    assert_eq!(
        (r.source, r.reason.as_deref()),
        (Source::Fallback, Some("retry_after"))
    );
    assert_eq!(r.tool["annotations"]["destructiveHint"], json!(true));
    assert_eq!(up.rejected(), turned_away);
    // Another session is not held back by this one's window.
    up.update(|s| s.overloaded = None);
    let other = ctx(&up, "s2", Mode::Permissive, CachePolicy::Session);
    assert_eq!(
        e.resolve(&other, "manage_files", &args("read"))
            .await
            .unwrap()
            .source,
        Source::Upstream
    );
}

#[tokio::test]
async fn a_tenant_cannot_take_more_than_its_share() {
    let up = upstream(Switches::default()).await;
    // Room for a few answers per tenant (an entry of this tool, with the
    // body its hits send, weighs about 7 KiB).
    let e = Engine::new(EngineConfig {
        capacity_bytes: 1 << 20,
        tenant_share_bytes: 40_000,
        ..EngineConfig::default()
    });
    let a = ctx(&up, "a1", Mode::Permissive, CachePolicy::Session);
    for i in 0..12 {
        let r = e
            .resolve(
                &a,
                "manage_files",
                &json!({"path": format!("/f{i}"), "action": "read"}),
            )
            .await
            .unwrap();
        assert_eq!(r.source, Source::Upstream);
    }
    let s = e.stats();
    assert!(s.share_refusals >= 3, "{s:?}");
    assert!(e.tenant_cache_bytes(&a.tenant) <= 40_000);
    // Another tenant still gets its own share.
    let mut b = ctx(&up, "b1", Mode::Permissive, CachePolicy::Session);
    b.tenant = TenantId::parse("globex").unwrap();
    e.resolve(&b, "manage_files", &args("read")).await.unwrap();
    assert_eq!(
        e.resolve(&b, "manage_files", &args("read"))
            .await
            .unwrap()
            .source,
        Source::Cache
    );
    assert!(e.tenant_cache_bytes(&b.tenant) > 0);
}

#[tokio::test]
async fn determinism_is_checked_after_eviction() {
    let up = upstream(Switches {
        nondeterministic: true,
        ..Switches::default()
    })
    .await;
    // A cache too small to keep any answer: every call is a miss, as after
    // an eviction; the session's fingerprints still remember.
    let e = Engine::new(EngineConfig {
        capacity_bytes: 100,
        ..EngineConfig::default()
    });
    let c = ctx(&up, "s1", Mode::Permissive, CachePolicy::Session);
    assert!(
        e.resolve(&c, "manage_files", &args("read"))
            .await
            .unwrap()
            .events
            .is_empty()
    );
    e.run_pending_tasks();
    let r = e.resolve(&c, "manage_files", &args("read")).await.unwrap();
    assert_eq!(r.source, Source::Upstream);
    assert!(
        matches!(&r.events[..], [ResolveEvent::DeterminismViolation { .. }]),
        "{r:?}"
    );
}

#[tokio::test]
async fn entries_never_outlive_their_session() {
    let up = upstream(Switches::default()).await;
    let e = engine();
    let mut c = ctx(&up, "s1", Mode::Permissive, CachePolicy::Session);
    c.expires_at = SystemTime::now() - Duration::from_secs(1);
    e.resolve(&c, "manage_files", &args("read")).await.unwrap();
    assert_eq!(
        e.resolve(&c, "manage_files", &args("read"))
            .await
            .unwrap()
            .source,
        Source::Upstream
    );
    assert_eq!(up.calls(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_refusal_event_per_upstream_answer() {
    let up = upstream(Switches {
        undeclared: true,
        delay: Duration::from_millis(100),
        ..Switches::default()
    })
    .await;
    let e = Arc::new(engine());
    let c = Arc::new(ctx(&up, "s1", Mode::Strict, CachePolicy::Session));
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let (e, c) = (e.clone(), c.clone());
        tasks.push(tokio::spawn(async move {
            e.resolve(&c, "manage_files", &args("read")).await.unwrap()
        }));
    }
    let mut events = 0;
    for t in tasks {
        let r = t.await.unwrap();
        assert_eq!(r.source, Source::Fallback);
        events += r.events.len();
    }
    assert_eq!(up.calls(), 1);
    assert_eq!(events, 1);
}

#[tokio::test]
async fn futures_are_send_for_http_handlers() {
    fn assert_send<T: Send>(t: T) -> T {
        t
    }
    fn assert_sync<T: Send + Sync>(_: &T) {}
    let up = upstream(Switches::default()).await;
    let e = engine();
    assert_sync(&e);
    let c = ctx(&up, "s1", Mode::Permissive, CachePolicy::Session);
    let a = args("read");
    let r = assert_send(e.resolve(&c, "manage_files", &a))
        .await
        .unwrap();
    assert_eq!(r.source, Source::Upstream);
    let calls = vec![("manage_files".to_owned(), a)];
    let out = assert_send(e.resolve_batch(&c, &calls)).await;
    assert_eq!(out[0].as_ref().unwrap().source, Source::Cache);
}

/// An answer that was in flight when the upstream announced a list change
/// is served to its caller but not cached: the next call asks again.
#[tokio::test]
async fn an_answer_in_flight_during_list_changed_is_not_cached() {
    let up = upstream(Switches::default()).await;
    let e = Arc::new(engine());
    let c = ctx(&up, "s-inflight", Mode::Permissive, CachePolicy::Session);
    // Connect first (a warm-up on another key), so that the notification
    // stream is open.
    e.resolve(&c, "manage_files", &args("delete"))
        .await
        .unwrap();
    up.update(|s| s.delay = Duration::from_millis(600));
    let slow = {
        let (e, c) = (e.clone(), c.clone());
        tokio::spawn(async move { e.resolve(&c, "manage_files", &args("read")).await })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    let mut handled = e.list_changed_events();
    let mut delivered = false;
    for _ in 0..20 {
        up.notify_list_changed().await;
        if tokio::time::timeout(Duration::from_millis(100), handled.changed())
            .await
            .is_ok()
        {
            delivered = true;
            break;
        }
    }
    assert!(delivered, "no list_changed reached the engine");
    let first = slow.await.unwrap().unwrap();
    assert_eq!(first.source, Source::Upstream, "its caller is served");
    up.update(|s| s.delay = Duration::ZERO);
    let again = e.resolve(&c, "manage_files", &args("read")).await.unwrap();
    assert_eq!(
        again.source,
        Source::Upstream,
        "the stale answer was cached"
    );
    assert!(e.stats().stale_refusals >= 1, "{:?}", e.stats());
    // What is fetched now, under the new generation, is cached again.
    let third = e.resolve(&c, "manage_files", &args("read")).await.unwrap();
    assert_eq!(third.source, Source::Cache);
}

/// Ending sessions costs a counter each: ten thousand of one tenant's
/// sessions ended leave another tenant's entries served from the cache,
/// and the ended session's entries are misses (dropped when met).
#[tokio::test]
async fn a_flood_of_invalidations_leaves_other_sessions_alone() {
    let up = upstream(Switches::default()).await;
    let e = engine();
    let mine = ctx(&up, "s-flood", Mode::Permissive, CachePolicy::Session);
    let mut other = ctx(&up, "s-other", Mode::Permissive, CachePolicy::Session);
    other.tenant = TenantId::parse("beta").unwrap();
    e.resolve(&mine, "manage_files", &args("read"))
        .await
        .unwrap();
    e.resolve(&other, "manage_files", &args("read"))
        .await
        .unwrap();
    let acme = TenantId::parse("acme").unwrap();
    for i in 0..10_000 {
        e.end_session(&acme, &format!("gone-{i}"));
    }
    e.end_session(&acme, "s-flood");
    e.end_session(&acme, "s-flood");
    let hit = e
        .resolve(&other, "manage_files", &args("read"))
        .await
        .unwrap();
    assert_eq!(hit.source, Source::Cache);
    // Only the session that existed counts as an invalidation.
    assert_eq!(e.stats().invalidations, 1, "{:?}", e.stats());
    // Its entry is gone at once (its bytes back in its tenant's share).
    e.run_pending_tasks();
    assert_eq!(e.stats().cache_entries, 1, "{:?}", e.stats());
    let calls = up.calls();
    let r = e
        .resolve(&mine, "manage_files", &args("read"))
        .await
        .unwrap();
    assert_eq!(
        r.source,
        Source::Upstream,
        "an ended session's entry was served"
    );
    assert_eq!(up.calls(), calls + 1);
}

/// An upstream that cannot announce a tool list change (no
/// `tools.listChanged` on 2025-11-25, `subscriptions/listen` refused on
/// 2026-07-28) has its answers cached for at most `unwatched_entry_ttl`;
/// one that can keeps them for the session. The engine says which applies.
#[tokio::test]
async fn answers_of_an_upstream_without_a_list_changed_channel_expire_at_the_bound() {
    for legacy in [true, false] {
        let watched = upstream(Switches {
            legacy_only: legacy,
            ..Switches::default()
        })
        .await;
        let unwatched = upstream(Switches {
            legacy_only: legacy,
            no_list_changed: true,
            ..Switches::default()
        })
        .await;
        let e = Engine::new(EngineConfig {
            upstream_timeout: Duration::from_secs(3),
            unwatched_entry_ttl: Duration::from_secs(2),
            ..EngineConfig::default()
        });
        let cw = ctx(&watched, "watched", Mode::Permissive, CachePolicy::Session);
        let cu = ctx(
            &unwatched,
            "unwatched",
            Mode::Permissive,
            CachePolicy::Session,
        );
        let tenant = TenantId::parse("acme").unwrap();
        for c in [&cw, &cu] {
            let r = e.resolve(c, "manage_files", &args("read")).await.unwrap();
            assert_eq!(r.source, Source::Upstream, "legacy {legacy}");
        }
        assert_eq!(
            e.invalidation(&tenant, "unwatched"),
            Some(Invalidation::EntryTtl(Duration::from_secs(2))),
            "legacy {legacy}"
        );
        // A subscription is acknowledged in the background: the watched
        // session says so once its stream is open.
        eventually("the watched upstream's channel is known", || {
            e.invalidation(&tenant, "watched") == Some(Invalidation::ListChanged) || legacy
        })
        .await;
        if legacy {
            assert_eq!(
                e.invalidation(&tenant, "watched"),
                Some(Invalidation::ListChanged)
            );
        }
        // Past the bound, the unwatched answer is fetched again; the
        // watched one (cached under a known channel) is still a hit.
        let r = e
            .resolve(&cw, "manage_files", &args("delete"))
            .await
            .unwrap();
        assert_eq!(r.source, Source::Upstream);
        tokio::time::sleep(Duration::from_millis(2600)).await;
        let calls = unwatched.calls();
        let r = e.resolve(&cu, "manage_files", &args("read")).await.unwrap();
        assert_eq!(r.source, Source::Upstream, "expired: legacy {legacy}");
        assert_eq!(unwatched.calls(), calls + 1);
        let r = e
            .resolve(&cw, "manage_files", &args("delete"))
            .await
            .unwrap();
        assert_eq!(r.source, Source::Cache, "legacy {legacy}");
    }
}

/// The bounded state cache drops the least recently used state to admit a
/// new one, and never closes a state a call is running on: a call in
/// flight on a state that is dropped meanwhile finishes on its own
/// connection with the upstream's answer, and the session goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_on_a_dropped_state_finishes_on_its_connection() {
    let up = upstream(Switches {
        delay: Duration::from_millis(400),
        ..Switches::default()
    })
    .await;
    let e = Arc::new(Engine::new(EngineConfig {
        upstream_timeout: Duration::from_secs(5),
        max_sessions: 2,
        ..EngineConfig::default()
    }));
    let first = Arc::new(ctx(&up, "first", Mode::Permissive, CachePolicy::Session));
    let in_flight = spawn_read(&e, &first);
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Four other sessions take the state cache's two places.
    let others: Vec<_> = (0..4)
        .map(|i| {
            let c = Arc::new(ctx(
                &up,
                &format!("other-{i}"),
                Mode::Permissive,
                CachePolicy::Session,
            ));
            spawn_read(&e, &c)
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    e.run_pending_tasks();
    assert!(e.stats().states_evicted >= 3, "{:?}", e.stats());
    let r = in_flight.await.unwrap().unwrap();
    assert_eq!(
        r.source,
        Source::Upstream,
        "finished on its connection: {r:?}"
    );
    assert_eq!(r.tool["annotations"]["readOnlyHint"], json!(true));
    for o in others {
        assert_eq!(o.await.unwrap().unwrap().source, Source::Upstream);
    }
    // The session goes on under a new state.
    let r = e
        .resolve(&first, "manage_files", &args("read"))
        .await
        .unwrap();
    assert!(
        matches!(r.source, Source::Upstream | Source::Cache),
        "{r:?}"
    );
}

/// 10,000 invalidations of one tenant's sessions (each session resolved
/// once, so it has a state, then ended) leave another tenant's cached
/// answer a hit and no state behind: ending a session is one counter
/// operation and the removal of its own entries, with nothing queued for
/// other tenants' lookups to evaluate. (The latency side is measured by
/// the `resolve` bench, `hit_after_invalidation_flood`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_invalidations_leave_other_tenants_alone_and_no_state_behind() {
    let up = upstream(Switches::default()).await;
    let e = Arc::new(engine());
    let mut other = ctx(&up, "other-tenant", Mode::Permissive, CachePolicy::Session);
    other.tenant = TenantId::parse("globex").unwrap();
    e.resolve(&other, "manage_files", &args("read"))
        .await
        .unwrap();
    let hit = e
        .resolve(&other, "manage_files", &args("read"))
        .await
        .unwrap();
    assert_eq!(hit.source, Source::Cache);
    // The flooding tenant's upstream refuses connections at once: each
    // session gets a state (and a fallback) without a live connection.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}/mcp", closed.local_addr().unwrap());
    drop(closed);
    let acme = TenantId::parse("acme").unwrap();
    let before = e.stats().invalidations;
    for chunk in 0..100 {
        let calls = (0..100).map(|i| {
            let e = e.clone();
            let mut c = ctx(
                &up,
                &format!("flood-{chunk}-{i}"),
                Mode::Permissive,
                CachePolicy::Session,
            );
            c.upstream.url = dead.clone();
            async move {
                let r = e.resolve(&c, "manage_files", &args("read")).await.unwrap();
                assert_eq!(r.source, Source::Fallback);
                e.end_session(&c.tenant, &c.session);
            }
        });
        futures::future::join_all(calls).await;
    }
    e.run_pending_tasks();
    let s = e.stats();
    assert_eq!(s.invalidations - before, 10_000);
    assert_eq!(s.session_states, 1, "only the other tenant's state is left");
    assert_eq!(e.tenant_cache_bytes(&acme), 0);
    let hit = e
        .resolve(&other, "manage_files", &args("read"))
        .await
        .unwrap();
    assert_eq!(
        hit.source,
        Source::Cache,
        "the other tenant's answer survived"
    );
}
