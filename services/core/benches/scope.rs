//! Scope planner benchmarks (target in bench/README.md: a plan for 10
//! calls × 3 alternatives over GitHub's hierarchy ≤ 50 µs).
//!
//! `scope_plan_github_10x3` is that case: ten calls whose alternatives
//! overlap through the hierarchy (repo ⊃ public_repo, admin:org ⊃
//! read:org, ...), nothing granted. `_granted` plans the same calls on a
//! token holding `repo`. `scope_plan_flat_10x3_disjoint` is the search's
//! hard case: a flat hierarchy where every alternative is a different
//! scope shared by a few calls, so pruning has the least to work with.

#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use pinfold_core::card::SecurityScheme;
use pinfold_core::scope::{Hierarchy, PlanCall, Preset, Strategy, plan};

fn oauth(scopes: &[&str]) -> SecurityScheme {
    let mut scopes: Vec<String> = scopes.iter().map(|s| (*s).to_owned()).collect();
    scopes.sort();
    SecurityScheme::Oauth2 { scopes }
}

fn github_calls() -> Vec<Vec<SecurityScheme>> {
    vec![
        vec![
            oauth(&["repo"]),
            oauth(&["public_repo"]),
            oauth(&["repo:status"]),
        ],
        vec![
            oauth(&["read:org"]),
            oauth(&["write:org"]),
            oauth(&["admin:org"]),
        ],
        vec![
            oauth(&["security_events"]),
            oauth(&["repo"]),
            oauth(&["read:org", "public_repo"]),
        ],
        vec![
            oauth(&["read:project"]),
            oauth(&["project"]),
            oauth(&["repo"]),
        ],
        vec![
            oauth(&["gist"]),
            oauth(&["user"]),
            oauth(&["read:user", "gist"]),
        ],
        vec![
            oauth(&["notifications"]),
            oauth(&["repo", "notifications"]),
            oauth(&["user:email"]),
        ],
        vec![
            oauth(&["delete_repo", "repo"]),
            oauth(&["delete_repo", "public_repo"]),
            oauth(&["admin:org"]),
        ],
        vec![
            oauth(&["workflow"]),
            oauth(&["repo", "workflow"]),
            oauth(&["write:packages"]),
        ],
        vec![
            oauth(&["read:packages"]),
            oauth(&["write:packages"]),
            oauth(&["delete:packages"]),
        ],
        vec![
            oauth(&["user:follow"]),
            oauth(&["user"]),
            oauth(&["read:user"]),
        ],
    ]
}

fn disjoint_calls() -> Vec<Vec<SecurityScheme>> {
    (0..10)
        .map(|i| {
            (0..3)
                .map(|k| oauth(&[format!("s{}", (i * 7 + k * 3) % 13).as_str()]))
                .collect()
        })
        .collect()
}

fn bench_plan(
    c: &mut Criterion,
    name: &str,
    h: &Hierarchy,
    calls: &[Vec<SecurityScheme>],
    granted: &[String],
) {
    let pc: Vec<PlanCall<'_>> = calls
        .iter()
        .map(|s| PlanCall {
            name: "tool",
            schemes: Some(s),
        })
        .collect();
    let p = plan(h, &[], granted, &pc).unwrap();
    assert_eq!(p.strategy, Strategy::Exact);
    eprintln!(
        "{name}: request {:?}, privilege {}, search nodes {}",
        p.request, p.privilege, p.nodes
    );
    c.bench_function(name, |b| {
        b.iter(|| plan(black_box(h), &[], black_box(granted), black_box(&pc)).unwrap())
    });
}

fn scope(c: &mut Criterion) {
    let github = Preset::Github.hierarchy();
    let calls = github_calls();
    bench_plan(c, "scope_plan_github_10x3", &github, &calls, &[]);
    bench_plan(
        c,
        "scope_plan_github_10x3_granted",
        &github,
        &calls,
        &["repo".to_owned()],
    );
    bench_plan(
        c,
        "scope_plan_flat_10x3_disjoint",
        &Hierarchy::flat(),
        &disjoint_calls(),
        &[],
    );
}

criterion_group!(benches, scope);
criterion_main!(benches);
