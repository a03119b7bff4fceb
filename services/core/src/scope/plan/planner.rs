//! The planner itself: checks the input, interns the scopes, ranks each
//! call's alternatives and drops the dominated ones, searches the open
//! calls, and assembles the plan (the antichains, the challenge, a reason
//! per call).

use super::alternatives::{check, collect_alternatives};
use super::bits::{count, get, or_into, set, subset};
use super::challenge::OFFLINE_ACCESS;
use super::model::{CallPlan, MAX_PLAN_CALLS, Plan, PlanCall, PlanError, PlanOptions};
use super::reason::reason_for;
use super::search::search;
use super::universe::Universe;
use crate::scope::hierarchy::Hierarchy;

/// Plans `calls` with the default options.
pub fn plan(
    hierarchy: &Hierarchy,
    defaults: &[String],
    granted: &[String],
    calls: &[PlanCall<'_>],
) -> Result<Plan, PlanError> {
    plan_with(hierarchy, defaults, granted, calls, PlanOptions::default())
}

/// Plans `calls` under `hierarchy`, given the provider's `defaults` and the
/// `granted` scopes. See the module documentation for the rule.
pub fn plan_with(
    hierarchy: &Hierarchy,
    defaults: &[String],
    granted: &[String],
    calls: &[PlanCall<'_>],
    options: PlanOptions,
) -> Result<Plan, PlanError> {
    if calls.len() > MAX_PLAN_CALLS {
        return Err(PlanError::TooManyCalls);
    }
    for (i, g) in granted.iter().enumerate() {
        check(|| format!("/granted/{i}"), g)?;
    }
    for (i, d) in defaults.iter().enumerate() {
        check(|| format!("/default_scopes/{i}"), d)?;
    }
    let call_alts = collect_alternatives(hierarchy, defaults, calls)?;

    // Intern every scope touched, with its closure.
    let mut uni = Universe::new(hierarchy);
    let mut scratch = Vec::new();
    let mut granted_bits_list = Vec::new();
    for g in granted {
        scratch.clear();
        uni.closure(g, &mut scratch);
        granted_bits_list.extend_from_slice(&scratch);
    }
    let mut alt_bits_list: Vec<Vec<Vec<u32>>> = Vec::with_capacity(call_alts.len());
    for c in &call_alts {
        let mut per = Vec::with_capacity(c.alts.len());
        for a in &c.alts {
            let mut v = Vec::new();
            for s in &a.scopes {
                uni.closure(s, &mut v);
            }
            per.push(v);
        }
        alt_bits_list.push(per);
    }
    let w = (uni.len as usize).div_ceil(64).max(1);
    let mut g_bits = vec![0u64; w];
    for &b in &granted_bits_list {
        set(&mut g_bits, b);
    }
    // Marginal closure of each alternative (beyond the grant), flat.
    let mut marg: Vec<Vec<Vec<u64>>> = Vec::with_capacity(call_alts.len());
    for per in &alt_bits_list {
        marg.push(
            per.iter()
                .map(|v| {
                    let mut b = vec![0u64; w];
                    for &i in v {
                        if !get(&g_bits, i) {
                            set(&mut b, i);
                        }
                    }
                    b
                })
                .collect(),
        );
    }

    // Rank, then drop dominated alternatives.
    let mut kept: Vec<Vec<usize>> = Vec::with_capacity(call_alts.len());
    for (c, m) in call_alts.iter().zip(&marg) {
        let mut order: Vec<usize> = (0..c.alts.len()).collect();
        order.sort_by_key(|&k| (!c.alts[k].noauth, count(&m[k]), k));
        let mut keep: Vec<usize> = Vec::new();
        for k in order {
            if !keep.iter().any(|&e| subset(&m[e], &m[k])) {
                keep.push(k);
            }
        }
        kept.push(keep);
    }

    // Fixed calls join the base; identical open calls are searched once.
    let mut base = vec![0u64; w];
    let mut open: Vec<usize> = Vec::new(); // representative call per open group
    let mut group_of: Vec<usize> = vec![usize::MAX; calls.len()];
    for (i, keep) in kept.iter().enumerate() {
        if keep.len() == 1 {
            or_into(&mut base, &marg[i][keep[0]]);
            continue;
        }
        let same = open.iter().position(|&r| {
            kept[r].len() == keep.len()
                && kept[r]
                    .iter()
                    .zip(keep)
                    .all(|(&a, &b)| marg[r][a] == marg[i][b])
        });
        group_of[i] = match same {
            Some(g) => g,
            None => {
                open.push(i);
                open.len() - 1
            }
        };
    }
    let options_of: Vec<Vec<&[u64]>> = open
        .iter()
        .map(|&r| kept[r].iter().map(|&k| marg[r][k].as_slice()).collect())
        .collect();

    let (choice, strategy, nodes) = search(w, &base, &options_of, options.node_budget);

    // Assemble.
    let chosen: Vec<usize> = (0..calls.len())
        .map(|i| {
            if kept[i].len() == 1 {
                kept[i][0]
            } else {
                kept[i][choice[group_of[i]]]
            }
        })
        .collect();
    let mut union = base.clone();
    for (g, &c) in choice.iter().enumerate() {
        or_into(&mut union, options_of[g][c]);
    }
    let privilege = count(&union) + count(&g_bits);

    // The antichains, on bits: a scope drops out when another one of the
    // set strictly covers it (no cycles, so never both).
    let antichain = |heads: &[u64]| -> Vec<u64> {
        let mut covered = vec![0u64; w];
        for b in 0..uni.len {
            if get(heads, b) {
                uni.strict_into(b, &mut covered);
            }
        }
        heads.iter().zip(&covered).map(|(h, c)| h & !c).collect()
    };
    let mut heads = vec![0u64; w];
    for (i, &k) in chosen.iter().enumerate() {
        for s in &call_alts[i].alts[k].scopes {
            set(&mut heads, uni.bit_of(s));
        }
    }
    let required_bits = antichain(&heads);
    let request_bits: Vec<u64> = required_bits
        .iter()
        .zip(&g_bits)
        .map(|(r, g)| r & !g)
        .collect();
    let required = uni.names_of(&required_bits);
    let request = uni.names_of(&request_bits);
    let challenge = if request.is_empty() {
        Vec::new()
    } else {
        // Granted scopes still needed: those covering a required scope the
        // request does not cover.
        let mut request_closure = request_bits.clone();
        for b in 0..uni.len {
            if get(&request_bits, b) {
                uni.strict_into(b, &mut request_closure);
            }
        }
        let uncovered: Vec<u64> = required_bits
            .iter()
            .zip(&request_closure)
            .map(|(r, c)| r & !c)
            .collect();
        let mut granted_heads = vec![0u64; w];
        for g in granted {
            set(&mut granted_heads, uni.bit_of(g));
        }
        let mut wanted = request_bits.clone();
        let granted_anti = antichain(&granted_heads);
        for b in 0..uni.len {
            if get(&granted_anti, b) {
                let mut c = vec![0u64; w];
                set(&mut c, b);
                uni.strict_into(b, &mut c);
                if c.iter().zip(&uncovered).any(|(x, u)| x & u != 0) {
                    set(&mut wanted, b);
                }
            }
        }
        let mut out = uni.names_of(&antichain(&wanted));
        out.retain(|s| s != OFFLINE_ACCESS);
        out
    };

    let mut call_plans = Vec::with_capacity(calls.len());
    for (i, call) in calls.iter().enumerate() {
        let c = &call_alts[i];
        let k = chosen[i];
        let alt = &c.alts[k];
        // What the rest of the plan holds without this call.
        let mut others = g_bits.clone();
        or_into(&mut others, &base);
        for (j, &kj) in chosen.iter().enumerate() {
            if j != i {
                or_into(&mut others, &marg[j][kj]);
            }
        }
        let mut reason = reason_for(c, k, &marg[i][k], &others);
        if alt.added > 0 {
            reason.push_str("; scopes that must be requested with it were added");
        }
        if c.ignored > 0 {
            reason.push_str(&format!(
                "; {} alternative(s) of other types ignored",
                c.ignored
            ));
        }
        call_plans.push(CallPlan {
            name: call.name.to_owned(),
            alternative: alt.index,
            scopes: alt.scopes.iter().map(|s| (*s).to_owned()).collect(),
            noauth: alt.noauth,
            defaulted: c.defaulted.is_some(),
            reason,
        });
    }
    Ok(Plan {
        strategy,
        calls: call_plans,
        required,
        request,
        privilege: privilege as usize,
        challenge,
        nodes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::card::SecurityScheme;
    use crate::scope::plan::{Strategy, www_authenticate};
    use crate::scope::preset::Preset;

    fn oauth(scopes: &[&str]) -> SecurityScheme {
        SecurityScheme::Oauth2 {
            scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    fn run(h: &Hierarchy, granted: &[&str], calls: &[(&str, Option<Vec<SecurityScheme>>)]) -> Plan {
        let calls: Vec<PlanCall<'_>> = calls
            .iter()
            .map(|(n, s)| PlanCall {
                name: n,
                schemes: s.as_deref(),
            })
            .collect();
        plan(h, &strings(&["read:user"]), &strings(granted), &calls).unwrap()
    }

    #[test]
    fn noauth_is_free_and_any_of_takes_the_least() {
        let h = Preset::Github.hierarchy();
        let p = run(
            &h,
            &[],
            &[
                (
                    "get_repo_contents",
                    Some(vec![oauth(&["repo"]), SecurityScheme::Noauth]),
                ),
                ("ui_get", Some(vec![oauth(&["repo"]), oauth(&["read:org"])])),
            ],
        );
        assert_eq!(p.strategy, Strategy::Exact);
        assert_eq!(p.calls[0].alternative, Some(1));
        assert!(p.calls[0].noauth);
        assert!(
            p.calls[0].reason.contains("noauth"),
            "{}",
            p.calls[0].reason
        );
        assert_eq!(p.calls[1].alternative, Some(1));
        assert_eq!(p.calls[1].scopes, ["read:org"]);
        assert_eq!(p.required, ["read:org"]);
        assert_eq!(p.request, ["read:org"]);
        assert_eq!(p.privilege, 1);
    }

    #[test]
    fn a_scope_another_call_needs_is_free() {
        let h = Preset::Github.hierarchy();
        let p = run(
            &h,
            &[],
            &[
                (
                    "a",
                    Some(vec![oauth(&["read:org"]), oauth(&["public_repo"])]),
                ),
                ("b", Some(vec![oauth(&["repo"])])),
            ],
        );
        // repo covers public_repo: choosing it adds nothing; read:org would add one.
        assert_eq!(p.calls[0].alternative, Some(1));
        assert!(
            p.calls[0]
                .reason
                .contains("covered by the scopes other calls need"),
            "{}",
            p.calls[0].reason
        );
        assert_eq!(p.required, ["repo"]);
        assert_eq!(p.privilege, 6);
    }

    #[test]
    fn granted_scopes_are_free_and_step_up_challenges_name_them() {
        let h = Preset::Github.hierarchy();
        let p = run(&h, &["repo"], &[("t", Some(vec![oauth(&["public_repo"])]))]);
        assert_eq!(p.required, ["public_repo"]);
        assert!(p.request.is_empty());
        assert!(
            p.calls[0].reason.contains("granted"),
            "{}",
            p.calls[0].reason
        );
        assert_eq!(
            p.www_authenticate(Some("https://x/.well-known/oauth-protected-resource")),
            None
        );

        let p = run(
            &h,
            &["read:org", "user", "offline_access"],
            &[
                ("teams", Some(vec![oauth(&["read:org"])])),
                ("gist", Some(vec![oauth(&["gist", "offline_access"])])),
            ],
        );
        assert_eq!(p.request, ["gist"]);
        // The step-up names what is missing and the granted scope still
        // needed; `user` is not needed, offline_access never appears.
        assert_eq!(p.challenge, ["gist", "read:org"]);
        assert_eq!(
            p.www_authenticate(Some(
                "https://s.example/.well-known/oauth-protected-resource/t/a"
            ))
            .unwrap(),
            "Bearer error=\"insufficient_scope\", scope=\"gist read:org\", resource_metadata=\"https://s.example/.well-known/oauth-protected-resource/t/a\""
        );
        // A needed scope covered only by a broader granted one: the granted one is named.
        let p = run(
            &h,
            &["admin:org"],
            &[("t", Some(vec![oauth(&["write:org", "notifications"])]))],
        );
        assert_eq!(p.request, ["notifications"]);
        assert_eq!(p.challenge, ["admin:org", "notifications"]);
    }

    #[test]
    fn offline_access_is_requested_but_never_challenged() {
        let h = Hierarchy::flat();
        let p = run(
            &h,
            &[],
            &[("t", Some(vec![oauth(&["offline_access", "x"])]))],
        );
        assert_eq!(p.request, ["offline_access", "x"]);
        assert_eq!(p.challenge, ["x"]);
        assert_eq!(
            www_authenticate(&strings(&["offline_access"]), None),
            "Bearer error=\"insufficient_scope\", scope=\"\""
        );
        assert_eq!(
            www_authenticate(&strings(&["a"]), Some("https://x/\"q\\")),
            "Bearer error=\"insufficient_scope\", scope=\"a\", resource_metadata=\"https://x/\\\"q\\\\\""
        );
    }

    #[test]
    fn defaults_apply_without_schemes_and_say_so() {
        let h = Preset::Github.hierarchy();
        let p = run(&h, &[], &[("plain", None), ("empty", Some(vec![]))]);
        for c in &p.calls {
            assert!(c.defaulted);
            assert_eq!(c.alternative, None);
            assert_eq!(c.scopes, ["read:user"]);
            assert!(c.reason.contains("default scopes"), "{}", c.reason);
        }
        assert!(p.calls[1].reason.starts_with("securitySchemes is empty"));
        assert_eq!(p.request, ["read:user"]);
        let none: [PlanCall<'_>; 1] = [PlanCall {
            name: "plain",
            schemes: None,
        }];
        let p = plan(&h, &[], &[], &none).unwrap();
        assert!(p.request.is_empty());
        assert!(p.calls[0].reason.contains("no default scopes"));
    }

    #[test]
    fn other_scheme_types_are_skipped_or_unsatisfiable() {
        let h = Hierarchy::flat();
        let api_key = SecurityScheme::Other(serde_json::json!({"type": "apiKey"}));
        let p = run(
            &h,
            &[],
            &[("t", Some(vec![api_key.clone(), oauth(&["a"])]))],
        );
        assert_eq!(p.calls[0].alternative, Some(1));
        assert!(
            p.calls[0]
                .reason
                .contains("1 alternative(s) of other types ignored")
        );
        let calls = [
            PlanCall {
                name: "ok",
                schemes: None,
            },
            PlanCall {
                name: "keyed",
                schemes: Some(std::slice::from_ref(&api_key)),
            },
        ];
        let e = plan(&h, &[], &[], &calls).unwrap_err();
        assert_eq!(
            e,
            PlanError::Unsatisfiable {
                call: 1,
                name: "keyed".into()
            }
        );
        assert_eq!(e.code(), "scope_unsatisfiable");
    }

    #[test]
    fn scope_tokens_are_checked_with_pointers() {
        let h = Hierarchy::flat();
        let bad = [oauth(&["ok", "not ok"])];
        let calls = [PlanCall {
            name: "t",
            schemes: Some(&bad),
        }];
        let e = plan(&h, &[], &[], &calls).unwrap_err();
        assert_eq!(e.code(), "invalid_scope");
        assert!(
            e.to_string()
                .starts_with("/calls/0/securitySchemes/0/scopes/1: \"not ok\""),
            "{e}"
        );
        let e = plan(&h, &[], &strings(&["a\"b"]), &[]).unwrap_err();
        assert!(e.to_string().starts_with("/granted/0"), "{e}");
        let e = plan(&h, &strings(&[""]), &[], &[]).unwrap_err();
        assert!(e.to_string().starts_with("/default_scopes/0"), "{e}");
        let many = vec![
            PlanCall {
                name: "t",
                schemes: None
            };
            MAX_PLAN_CALLS + 1
        ];
        assert_eq!(
            plan(&h, &[], &[], &many).unwrap_err(),
            PlanError::TooManyCalls
        );
    }

    #[test]
    fn slack_email_brings_users_read() {
        let h = Preset::Slack.hierarchy();
        let p = run(
            &h,
            &[],
            &[("lookup", Some(vec![oauth(&["users:read.email"])]))],
        );
        assert_eq!(p.calls[0].scopes, ["users:read", "users:read.email"]);
        assert_eq!(p.request, ["users:read", "users:read.email"]);
        assert!(p.calls[0].reason.contains("must be requested with it"));
        let p = run(
            &h,
            &["users:read"],
            &[("lookup", Some(vec![oauth(&["users:read.email"])]))],
        );
        assert_eq!(p.request, ["users:read.email"]);
    }

    #[test]
    fn ties_go_to_the_earlier_alternative_and_calls_in_order() {
        let h = Hierarchy::flat();
        let p = run(&h, &[], &[("t", Some(vec![oauth(&["b"]), oauth(&["a"])]))]);
        assert_eq!(p.calls[0].alternative, Some(0));
        // Either x or y serves both calls; the first call's first choice wins.
        let p = run(
            &h,
            &[],
            &[
                ("t1", Some(vec![oauth(&["y"]), oauth(&["x"])])),
                ("t2", Some(vec![oauth(&["x"]), oauth(&["y"])])),
            ],
        );
        assert_eq!(p.request, ["y"]);
        assert_eq!(p.calls[1].alternative, Some(1));
        // oauth2 without scopes ties with noauth: noauth is preferred.
        let p = run(
            &h,
            &[],
            &[("t", Some(vec![oauth(&[]), SecurityScheme::Noauth]))],
        );
        assert!(p.calls[0].noauth);
    }

    #[test]
    fn budget_exhaustion_is_bounded_and_still_serves_every_call() {
        let h = Hierarchy::flat();
        let alts: Vec<Vec<SecurityScheme>> = (0..8)
            .map(|i| {
                vec![
                    oauth(&[&format!("s{i}"), "common"]),
                    oauth(&[&format!("t{}", i % 3)]),
                    oauth(&[&format!("u{}", i % 2), "v"]),
                ]
            })
            .collect();
        let calls: Vec<PlanCall<'_>> = alts
            .iter()
            .map(|a| PlanCall {
                name: "t",
                schemes: Some(a),
            })
            .collect();
        let exact = plan(&h, &[], &[], &calls).unwrap();
        assert_eq!(exact.strategy, Strategy::Exact);
        let bounded = plan_with(&h, &[], &[], &calls, PlanOptions { node_budget: 1 }).unwrap();
        assert_eq!(bounded.strategy, Strategy::Bounded);
        assert!(bounded.privilege >= exact.privilege);
        for c in &bounded.calls {
            assert!(c.scopes.iter().all(|s| bounded.request.contains(s)));
        }
        // t0/t1/t2 plus u0+v... the exact optimum takes t0, t1, t2 for all.
        assert_eq!(exact.request, ["t0", "t1", "t2"]);
        assert_eq!(exact.privilege, 3);
    }
}
