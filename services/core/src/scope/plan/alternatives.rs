//! Each call's alternatives as the planner sees them: the schemes an OAuth
//! grant can meet (`noauth`, `oauth2`), or the provider's default scopes
//! when a tool declares none, each with the scopes a hierarchy says must
//! be requested with it; every scope token checked with its pointer.

use super::model::{PlanCall, PlanError};
use crate::card::SecurityScheme;
use crate::scope::hierarchy::Hierarchy;
use crate::scope::token::check_scope;

/// One usable alternative of a call.
pub(super) struct Alt<'a> {
    pub(super) index: Option<usize>,
    pub(super) noauth: bool,
    /// Declared scopes plus co-requested ones, sorted, de-duplicated.
    pub(super) scopes: Vec<&'a str>,
    /// How many co-requested scopes were added.
    pub(super) added: usize,
}

/// The usable alternatives of one call, and what was set aside: why the
/// provider's defaults stand in (`defaulted`), and how many alternatives
/// of other types were skipped (`ignored`).
pub(super) struct CallAlts<'a> {
    pub(super) alts: Vec<Alt<'a>>,
    pub(super) defaulted: Option<&'static str>,
    pub(super) ignored: usize,
}

/// Checks that `scope` is a scope token; the error names `pointer()`.
pub(super) fn check(pointer: impl FnOnce() -> String, scope: &str) -> Result<(), PlanError> {
    check_scope(scope).map_err(|problem| PlanError::InvalidScope {
        pointer: pointer(),
        scope: scope.to_owned(),
        problem,
    })
}

/// Adds the co-requested scopes of `scopes` (sorted, de-duplicated).
fn with_required<'a>(h: &'a Hierarchy, mut scopes: Vec<&'a str>) -> (Vec<&'a str>, usize) {
    let before = {
        scopes.sort_unstable();
        scopes.dedup();
        scopes.len()
    };
    let mut extra = Vec::new();
    for s in &scopes {
        if let Some(id) = h.id(s) {
            extra.extend(h.requires_ids(id).iter().map(|&r| h.name(r)));
        }
    }
    if extra.is_empty() {
        return (scopes, 0);
    }
    scopes.extend(extra);
    scopes.sort_unstable();
    scopes.dedup();
    let added = scopes.len() - before;
    (scopes, added)
}

/// The usable alternatives of every call, in order: the provider's
/// defaults for a call that declares no scheme, each `noauth` and `oauth2`
/// scheme otherwise (scope tokens checked, co-requested scopes added).
pub(super) fn collect_alternatives<'a>(
    h: &'a Hierarchy,
    defaults: &'a [String],
    calls: &[PlanCall<'a>],
) -> Result<Vec<CallAlts<'a>>, PlanError> {
    let mut out = Vec::with_capacity(calls.len());
    for (i, call) in calls.iter().enumerate() {
        let defaulted = match call.schemes {
            None => Some("no securitySchemes declared"),
            Some([]) => Some("securitySchemes is empty"),
            Some(_) => None,
        };
        let mut alts = Vec::new();
        let mut ignored = 0;
        if defaulted.is_some() {
            let (scopes, added) = with_required(h, defaults.iter().map(String::as_str).collect());
            alts.push(Alt {
                index: None,
                noauth: false,
                scopes,
                added,
            });
        } else {
            for (j, s) in call.schemes.unwrap_or_default().iter().enumerate() {
                match s {
                    SecurityScheme::Noauth => alts.push(Alt {
                        index: Some(j),
                        noauth: true,
                        scopes: Vec::new(),
                        added: 0,
                    }),
                    SecurityScheme::Oauth2 { scopes } => {
                        for (k, sc) in scopes.iter().enumerate() {
                            check(|| format!("/calls/{i}/securitySchemes/{j}/scopes/{k}"), sc)?;
                        }
                        let (scopes, added) =
                            with_required(h, scopes.iter().map(String::as_str).collect());
                        alts.push(Alt {
                            index: Some(j),
                            noauth: false,
                            scopes,
                            added,
                        });
                    }
                    SecurityScheme::Other(_) => ignored += 1,
                }
            }
            if alts.is_empty() {
                return Err(PlanError::Unsatisfiable {
                    call: i,
                    name: call.name.to_owned(),
                });
            }
        }
        out.push(CallAlts {
            alts,
            defaulted,
            ignored,
        });
    }
    Ok(out)
}
