//! The planner against a brute-force oracle on random hierarchies
//! (≤ 12 scopes, ≤ 6 calls, ≤ 3 alternatives per call, random grants).

use std::collections::BTreeSet;

use pinfold_core::card::SecurityScheme;
use pinfold_core::scope::{
    Hierarchy, HierarchySpec, Plan, PlanCall, PlanOptions, Strategy as PlanStrategy, plan,
    plan_with,
};
use proptest::prelude::*;

/// A random acyclic hierarchy over `s0..s{n-1}`: an edge may only go from a
/// lower to a higher number, so no cycle can form.
fn hierarchy(n: usize, edges: &[bool]) -> Hierarchy {
    let mut spec = HierarchySpec::new();
    let mut e = edges.iter();
    for i in 0..n {
        spec.add_covers(format!("s{i}"), Vec::<String>::new());
        for j in i + 1..n {
            if *e.next().unwrap_or(&false) {
                spec.add_covers(format!("s{i}"), [format!("s{j}")]);
            }
        }
    }
    spec.build().unwrap()
}

#[derive(Debug, Clone)]
enum AltGen {
    Noauth,
    Oauth(Vec<usize>),
}

fn alt_strategy() -> impl Strategy<Value = AltGen> {
    prop_oneof![
        1 => Just(AltGen::Noauth),
        8 => prop::collection::vec(0usize..12, 0..=3).prop_map(AltGen::Oauth),
    ]
}

fn to_schemes(n: usize, alts: &[AltGen]) -> Vec<SecurityScheme> {
    alts.iter()
        .map(|a| match a {
            AltGen::Noauth => SecurityScheme::Noauth,
            AltGen::Oauth(v) => {
                let set: BTreeSet<String> = v.iter().map(|i| format!("s{}", i % n)).collect();
                SecurityScheme::Oauth2 {
                    scopes: set.into_iter().collect(),
                }
            }
        })
        .collect()
}

fn scopes_of(s: &SecurityScheme) -> Vec<&str> {
    match s {
        SecurityScheme::Oauth2 { scopes } => scopes.iter().map(String::as_str).collect(),
        _ => Vec::new(),
    }
}

/// The least privilege over every assignment: |closure(chosen ∪ granted)|.
fn oracle(h: &Hierarchy, calls: &[Vec<SecurityScheme>], granted: &[String]) -> usize {
    let mut best = usize::MAX;
    let mut idx = vec![0usize; calls.len()];
    loop {
        let mut all: Vec<&str> = granted.iter().map(String::as_str).collect();
        for (c, &k) in calls.iter().zip(&idx) {
            all.extend(scopes_of(&c[k]));
        }
        best = best.min(h.closure(all).len());
        let mut i = 0;
        loop {
            if i == calls.len() {
                return best;
            }
            idx[i] += 1;
            if idx[i] < calls[i].len() {
                break;
            }
            idx[i] = 0;
            i += 1;
        }
    }
}

/// Properties every plan has, exact or not.
fn check_plan(
    h: &Hierarchy,
    calls: &[Vec<SecurityScheme>],
    granted: &[String],
    p: &Plan,
) -> Result<(), TestCaseError> {
    let holds: Vec<&str> = p
        .request
        .iter()
        .chain(granted)
        .map(String::as_str)
        .collect();
    // Every call is satisfied by its chosen alternative.
    for (c, cp) in calls.iter().zip(&p.calls) {
        let k = cp
            .alternative
            .expect("declared schemes are never defaulted");
        prop_assert!(k < c.len());
        prop_assert_eq!(cp.noauth, c[k] == SecurityScheme::Noauth);
        prop_assert_eq!(&cp.scopes, &scopes_of(&c[k]));
        for s in scopes_of(&c[k]) {
            prop_assert!(
                holds.iter().any(|g| h.covers(g, s)),
                "{s} not covered by {holds:?}"
            );
        }
    }
    // No requested scope is covered by another requested or a granted one.
    for r in &p.request {
        for o in &p.request {
            prop_assert!(o == r || !h.covers(o, r), "{o} covers {r}");
        }
        for g in granted {
            prop_assert!(!h.covers(g, r), "granted {g} covers {r}");
        }
    }
    // Sorted, de-duplicated; request ⊆ required, and required is an antichain.
    for v in [&p.request, &p.required] {
        prop_assert!(v.windows(2).all(|w| w[0] < w[1]), "{v:?}");
    }
    prop_assert!(p.request.iter().all(|r| p.required.contains(r)));
    prop_assert_eq!(
        h.antichain(p.required.iter().map(String::as_str)),
        p.required.clone()
    );
    // The reported privilege is the closure of request ∪ granted.
    prop_assert_eq!(h.closure(holds.iter().copied()).len(), p.privilege);
    // A challenge exists exactly when something is missing.
    prop_assert_eq!(p.www_authenticate(None).is_some(), !p.request.is_empty());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn exact_plans_match_the_oracle(
        n in 1usize..=12,
        edges in prop::collection::vec(prop::bool::weighted(0.2), 66),
        calls in prop::collection::vec(prop::collection::vec(alt_strategy(), 1..=3), 1..=6),
        granted in prop::collection::vec(0usize..12, 0..=3),
    ) {
        let h = hierarchy(n, &edges);
        let calls: Vec<Vec<SecurityScheme>> = calls.iter().map(|c| to_schemes(n, c)).collect();
        let granted: Vec<String> = granted.iter().map(|i| format!("s{}", i % n)).collect();
        let pc: Vec<PlanCall<'_>> = calls
            .iter()
            .map(|c| PlanCall { name: "t", schemes: Some(c) })
            .collect();
        let p = plan(&h, &[], &granted, &pc).unwrap();
        check_plan(&h, &calls, &granted, &p)?;
        prop_assert_eq!(p.strategy, PlanStrategy::Exact);
        prop_assert_eq!(p.privilege, oracle(&h, &calls, &granted));
        // Deterministic.
        prop_assert_eq!(&plan(&h, &[], &granted, &pc).unwrap(), &p);

        // A starved search is bounded, never wrong, never better than exact.
        let b = plan_with(&h, &[], &granted, &pc, PlanOptions { node_budget: 2 }).unwrap();
        check_plan(&h, &calls, &granted, &b)?;
        prop_assert!(b.privilege >= p.privilege);
        if b.strategy == PlanStrategy::Exact {
            prop_assert_eq!(b.privilege, p.privilege);
        }
    }
}
