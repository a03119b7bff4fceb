//! The least-privilege scope planner (`pinfold_core::scope::plan`).
//!
//! The input bytes drive a small instance: a hierarchy over a fixed
//! alphabet of scope tokens (covers and co-request edges), provider
//! defaults, granted scopes and calls, each with `noauth`, `oauth2` or
//! other alternatives (a JSON `securitySchemes` list may also be given as
//! the input's tail, read by the same parser the service uses).
//!
//! Properties: planning is deterministic; every call gets one of its own
//! usable alternatives (or the defaults when it declares none) and the
//! grant plus the request satisfies it; `request` and `required` are
//! sorted antichains, no requested scope is covered by a granted one; the
//! privilege is the closure's size; and an `exact` plan's privilege equals
//! the minimum found by brute force over every combination.
#![no_main]

use std::collections::BTreeSet;

use libfuzzer_sys::fuzz_target;
use pinfold_core::card::SecurityScheme;
use pinfold_core::scope::{
    Hierarchy, HierarchySpec, PlanCall, PlanOptions, Strategy, declared_schemes, plan_with,
};

/// Scope tokens the bytes pick from (GitHub's, which cover one another;
/// `fuzz/seed.py` reads this list to encode real tools' requirements).
const ALPHABET: [&str; 15] = [
    "repo",
    "public_repo",
    "security_events",
    "repo:status",
    "read:org",
    "write:org",
    "admin:org",
    "project",
    "read:project",
    "gist",
    "notifications",
    "delete_repo",
    "user",
    "user:email",
    "offline_access",
];

struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn next(&mut self) -> Option<u8> {
        let (b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*b)
    }
    fn scope(&mut self) -> Option<String> {
        let b = self.next()?;
        Some(if b == 0xff {
            // Rarely, a scope that is not a token at all.
            "bad scope\"".to_owned()
        } else {
            ALPHABET[b as usize % ALPHABET.len()].to_owned()
        })
    }
    fn scopes(&mut self, max: u8) -> Option<Vec<String>> {
        let n = self.next()? % (max + 1);
        (0..n).map(|_| self.scope()).collect()
    }
}

fn closure(h: &Hierarchy, scopes: impl IntoIterator<Item = String>) -> BTreeSet<String> {
    let all: Vec<String> = scopes.into_iter().collect();
    h.closure(all.iter().map(String::as_str))
}

/// The scopes an alternative needs, co-requested ones added.
fn with_required(h: &Hierarchy, scopes: &[String]) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = scopes.iter().cloned().collect();
    for s in scopes {
        out.extend(h.required_with(s).map(str::to_owned));
    }
    out
}

fn build(data: &[u8]) -> Option<()> {
    let (head, tail) = match data.iter().position(|b| *b == b'|') {
        Some(i) => (&data[..i], Some(&data[i + 1..])),
        None => (data, None),
    };
    let mut b = Bytes(head);
    let mut spec = HierarchySpec::new();
    for _ in 0..b.next()? % 8 {
        let k = b.scope()?;
        let v = b.scopes(3)?;
        spec.add_covers(k, v);
    }
    for _ in 0..b.next()? % 3 {
        let k = b.scope()?;
        let v = b.scopes(2)?;
        spec.add_requires(k, v);
    }
    let Ok(h) = spec.build() else {
        return None;
    };
    let defaults = b.scopes(2)?;
    let granted = b.scopes(3)?;
    let mut schemes: Vec<Option<Vec<SecurityScheme>>> = Vec::new();
    for _ in 0..1 + b.next()? % 5 {
        let n = b.next()? % 4;
        if n == 3 {
            schemes.push(None);
            continue;
        }
        let mut alts = Vec::new();
        for _ in 0..b.next()? % 4 {
            let kind = b.next()?;
            alts.push(match kind % 6 {
                0 => SecurityScheme::Noauth,
                1 => SecurityScheme::Other(serde_json::json!({"type": "apiKey"})),
                _ => {
                    let mut scopes = b.scopes(3)?;
                    scopes.sort();
                    scopes.dedup();
                    SecurityScheme::Oauth2 { scopes }
                }
            });
        }
        schemes.push(Some(alts));
    }
    // A tail in JSON: one more call's securitySchemes, read as the service does.
    if let Some(tail) = tail
        && let Ok(list) = serde_json::from_slice::<serde_json::Value>(tail)
    {
        let tool = serde_json::json!({"name": "t", "securitySchemes": list});
        if let Ok(d) = declared_schemes(&tool, "") {
            schemes.push(d.schemes);
        }
    }
    let names: Vec<String> = (0..schemes.len()).map(|i| format!("tool{i}")).collect();
    let calls: Vec<PlanCall<'_>> = schemes
        .iter()
        .zip(&names)
        .map(|(s, name)| PlanCall {
            name,
            schemes: s.as_deref(),
        })
        .collect();

    let options = PlanOptions { node_budget: 5_000 };
    let first = plan_with(&h, &defaults, &granted, &calls, options);
    let second = plan_with(&h, &defaults, &granted, &calls, options);
    assert_eq!(first, second, "the planner is not deterministic");
    let Ok(plan) = first else {
        return None;
    };

    let reach = closure(&h, plan.request.iter().chain(&granted).cloned());
    assert_eq!(
        plan.privilege,
        reach.len(),
        "privilege is not the closure's size"
    );
    for list in [&plan.request, &plan.required, &plan.challenge] {
        assert!(
            list.windows(2).all(|w| w[0] < w[1]),
            "not sorted and unique: {list:?}"
        );
        for a in list.iter() {
            for c in list.iter() {
                assert!(a == c || !h.covers(a, c), "{a} covers {c} in {list:?}");
            }
        }
    }
    assert!(!plan.challenge.iter().any(|s| s == "offline_access"));
    for r in &plan.request {
        assert!(
            !granted.iter().any(|g| h.covers(g, r)),
            "{r} requested though granted"
        );
    }

    // Every call is satisfied by one of its own alternatives.
    assert_eq!(plan.calls.len(), calls.len());
    let mut options_per_call: Vec<Vec<BTreeSet<String>>> = Vec::new();
    for (c, call) in plan.calls.iter().zip(&calls) {
        let declared = call.schemes.filter(|s| !s.is_empty());
        let usable: Vec<BTreeSet<String>> = match declared {
            None => vec![with_required(&h, &defaults)],
            Some(list) => list
                .iter()
                .filter_map(|s| match s {
                    SecurityScheme::Noauth => Some(BTreeSet::new()),
                    SecurityScheme::Oauth2 { scopes } => Some(with_required(&h, scopes)),
                    SecurityScheme::Other(_) => None,
                })
                .collect(),
        };
        match (declared, c.alternative) {
            (None, None) => assert!(c.defaulted && !c.noauth),
            (Some(list), Some(i)) => {
                assert!(!c.defaulted);
                match &list[i] {
                    SecurityScheme::Noauth => assert!(c.noauth && c.scopes.is_empty()),
                    SecurityScheme::Oauth2 { scopes } => {
                        assert!(!c.noauth);
                        let want: Vec<String> = with_required(&h, scopes).into_iter().collect();
                        assert_eq!(c.scopes, want);
                    }
                    SecurityScheme::Other(_) => panic!("an unusable alternative was chosen"),
                }
            }
            other => panic!("alternative {other:?} does not fit the declaration"),
        }
        for s in &c.scopes {
            assert!(
                reach.contains(s),
                "{s} of {} is not covered by the plan",
                c.name
            );
        }
        options_per_call.push(usable);
    }

    // Brute force over every combination when small enough.
    let combos: usize = options_per_call.iter().map(Vec::len).product();
    if plan.strategy == Strategy::Exact && combos <= 4096 {
        let mut best = usize::MAX;
        let mut idx = vec![0usize; options_per_call.len()];
        loop {
            let chosen = idx
                .iter()
                .zip(&options_per_call)
                .flat_map(|(&i, opts)| opts[i].iter().cloned());
            let size = closure(&h, granted.iter().cloned().chain(chosen)).len();
            best = best.min(size);
            let mut k = 0;
            while k < idx.len() {
                idx[k] += 1;
                if idx[k] < options_per_call[k].len() {
                    break;
                }
                idx[k] = 0;
                k += 1;
            }
            if k == idx.len() {
                break;
            }
        }
        assert_eq!(plan.privilege, best, "an exact plan is not least privilege");
    }
    Some(())
}

fuzz_target!(|data: &[u8]| {
    let _ = build(data);
});
