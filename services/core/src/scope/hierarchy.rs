//! Scope hierarchies: which scope covers which.
//!
//! A provider's scopes form a partial order: a grant of `repo` satisfies a
//! requirement for `public_repo` (GitHub), `org:admin` one for `org:read`
//! (Sentry). A [`HierarchySpec`] lists, per scope, the scopes it covers
//! directly; [`HierarchySpec::build`] validates it (every token an RFC 6749
//! NQCHAR token, no cycle — a cycle is reported with the scopes on it, in
//! order, first repeated last) and computes the transitive closure once, so
//! [`Hierarchy::covers`] is a lookup.
//!
//! A scope always covers itself; listing it among its own covered scopes
//! (as Sentry's table does) is accepted and ignored. A scope the hierarchy
//! does not name covers only itself.
//!
//! Besides coverage a spec may say that a scope *requires* others: they must
//! be requested together with it, though neither covers the other (Slack's
//! `users:read.email` can only be requested alongside `users:read`). The
//! planner adds the required scopes to any alternative naming the scope.
//! Requirements may be mutual; they are closed transitively too. They apply
//! to the scopes an alternative names, not to the scopes those cover.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::token::{TokenProblem, check_scope};

/// The most scopes one hierarchy may name.
pub const MAX_HIERARCHY_SCOPES: usize = 4096;
/// The most `covers` plus `requires` entries one hierarchy may hold.
pub const MAX_HIERARCHY_EDGES: usize = 32_768;

/// A hierarchy as written: scope → scopes it covers directly, and scope →
/// scopes that must be requested with it. The wire form of a provider
/// profile's `hierarchy` is `covers` alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HierarchySpec {
    /// Scope → scopes it covers (directly; the closure is computed).
    #[serde(default)]
    pub covers: BTreeMap<String, BTreeSet<String>>,
    /// Scope → scopes that must be requested together with it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requires: BTreeMap<String, BTreeSet<String>>,
}

impl HierarchySpec {
    /// An empty spec (a flat provider).
    pub fn new() -> Self {
        Self::default()
    }

    /// A spec with only coverage entries, as a provider profile's
    /// `hierarchy` is written.
    pub fn from_covers<I, K, V, S>(covers: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut spec = Self::new();
        for (k, v) in covers {
            spec.add_covers(k, v);
        }
        spec
    }

    /// Records that `scope` covers each of `covered` (merging with what is
    /// there). A scope with an empty list is still named by the hierarchy.
    pub fn add_covers<S: Into<String>>(
        &mut self,
        scope: impl Into<String>,
        covered: impl IntoIterator<Item = S>,
    ) {
        self.covers
            .entry(scope.into())
            .or_default()
            .extend(covered.into_iter().map(Into::into));
    }

    /// Records that `scope` must be requested together with each of `with`.
    pub fn add_requires<S: Into<String>>(
        &mut self,
        scope: impl Into<String>,
        with: impl IntoIterator<Item = S>,
    ) {
        self.requires
            .entry(scope.into())
            .or_default()
            .extend(with.into_iter().map(Into::into));
    }

    /// Adds every entry of `other` (a profile's own `hierarchy` extending
    /// its preset: entries only ever add coverage).
    pub fn extend(&mut self, other: &HierarchySpec) {
        for (k, v) in &other.covers {
            self.add_covers(k.clone(), v.iter().cloned());
        }
        for (k, v) in &other.requires {
            self.add_requires(k.clone(), v.iter().cloned());
        }
    }

    /// Validates the spec and computes its closure.
    pub fn build(&self) -> Result<Hierarchy, HierarchyError> {
        Hierarchy::from_spec(self)
    }
}

/// Why a hierarchy was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HierarchyError {
    /// A key or value is not an RFC 6749 scope token.
    #[error("{scope:?} is not a scope token: {}", problem.message())]
    InvalidScope {
        /// The offending string.
        scope: String,
        /// What is wrong with it.
        problem: TokenProblem,
    },
    /// Coverage goes round in a circle; `cycle` lists the scopes on it in
    /// order, the first repeated at the end (`["a", "b", "a"]`).
    #[error("the scope hierarchy has a cycle: {}", cycle.join(" covers "))]
    Cycle {
        /// The scopes on the cycle.
        cycle: Vec<String>,
    },
    /// More than [`MAX_HIERARCHY_SCOPES`] scopes or [`MAX_HIERARCHY_EDGES`]
    /// entries.
    #[error(
        "the scope hierarchy is too large (at most {MAX_HIERARCHY_SCOPES} scopes and {MAX_HIERARCHY_EDGES} entries)"
    )]
    TooLarge,
}

impl HierarchyError {
    /// The stable problem code for the HTTP layer.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidScope { .. } => "invalid_scope",
            Self::Cycle { .. } => "hierarchy_cycle",
            Self::TooLarge => "hierarchy_too_large",
        }
    }
}

/// A validated scope hierarchy with its transitive closure.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hierarchy {
    /// Every scope named, sorted (ids are positions).
    names: Vec<String>,
    /// Direct coverage, sorted ids, no self.
    direct: Vec<Vec<u32>>,
    /// Transitive coverage, sorted ids, no self.
    below: Vec<Vec<u32>>,
    /// Direct requirements, sorted ids, no self.
    requires_direct: Vec<Vec<u32>>,
    /// Transitive requirements, sorted ids, no self.
    requires: Vec<Vec<u32>>,
}

impl Hierarchy {
    /// The flat hierarchy: every scope covers only itself.
    pub fn flat() -> Self {
        Self::default()
    }

    fn from_spec(spec: &HierarchySpec) -> Result<Self, HierarchyError> {
        let mut all = BTreeSet::new();
        let mut edges = 0usize;
        for map in [&spec.covers, &spec.requires] {
            for (k, v) in map {
                all.insert(k.as_str());
                edges += v.len().max(1);
                all.extend(v.iter().map(String::as_str));
            }
        }
        if all.len() > MAX_HIERARCHY_SCOPES || edges > MAX_HIERARCHY_EDGES {
            return Err(HierarchyError::TooLarge);
        }
        for s in &all {
            check_scope(s).map_err(|problem| HierarchyError::InvalidScope {
                scope: (*s).to_owned(),
                problem,
            })?;
        }
        let names: Vec<String> = all.iter().map(|s| (*s).to_owned()).collect();
        let id = |s: &str| names.binary_search_by(|n| n.as_str().cmp(s)).unwrap() as u32;
        let n = names.len();
        let mut direct = vec![Vec::new(); n];
        let mut requires_direct = vec![Vec::new(); n];
        for (k, v) in &spec.covers {
            let a = id(k);
            direct[a as usize] = v.iter().map(|s| id(s)).filter(|&b| b != a).collect();
        }
        for (k, v) in &spec.requires {
            let a = id(k);
            requires_direct[a as usize] = v.iter().map(|s| id(s)).filter(|&b| b != a).collect();
        }
        let order = topological(&direct).map_err(|cycle| HierarchyError::Cycle {
            cycle: cycle
                .into_iter()
                .map(|i| names[i as usize].clone())
                .collect(),
        })?;
        let mut below: Vec<Vec<u32>> = vec![Vec::new(); n];
        for &u in &order {
            let mut set = BTreeSet::new();
            for &c in &direct[u as usize] {
                set.insert(c);
                set.extend(below[c as usize].iter().copied());
            }
            below[u as usize] = set.into_iter().collect();
        }
        let requires = (0..n as u32)
            .map(|u| reachable(&requires_direct, u))
            .collect();
        Ok(Self {
            names,
            direct,
            below,
            requires_direct,
            requires,
        })
    }

    /// Every scope the hierarchy names, sorted.
    pub fn scopes(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }

    /// Number of scopes named.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when the hierarchy names no scope.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// True when the hierarchy names `scope`.
    pub fn contains(&self, scope: &str) -> bool {
        self.id(scope).is_some()
    }

    /// True when a grant of `a` satisfies a requirement for `b` (`a == b`,
    /// or `b` is in the transitive closure of what `a` covers).
    pub fn covers(&self, a: &str, b: &str) -> bool {
        if a == b {
            return true;
        }
        match (self.id(a), self.id(b)) {
            (Some(x), Some(y)) => self.below[x as usize].binary_search(&y).is_ok(),
            _ => false,
        }
    }

    /// The scopes `scope` covers, transitively, without itself, sorted.
    pub fn covered_by(&self, scope: &str) -> impl Iterator<Item = &str> {
        self.id(scope)
            .map(|i| self.below[i as usize].as_slice())
            .unwrap_or_default()
            .iter()
            .map(|&j| self.names[j as usize].as_str())
    }

    /// The scopes that must be requested together with `scope`,
    /// transitively, without itself, sorted.
    pub fn required_with(&self, scope: &str) -> impl Iterator<Item = &str> {
        self.id(scope)
            .map(|i| self.requires[i as usize].as_slice())
            .unwrap_or_default()
            .iter()
            .map(|&j| self.names[j as usize].as_str())
    }

    /// The closure of `scopes`: each one and everything it covers, sorted.
    pub fn closure<'a>(&self, scopes: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for s in scopes {
            out.insert(s.to_owned());
            out.extend(self.covered_by(s).map(str::to_owned));
        }
        out
    }

    /// The maximal elements of `scopes`: each scope not covered by another
    /// one of them; sorted and de-duplicated.
    pub fn antichain<'a>(&self, scopes: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        let set: BTreeSet<&str> = scopes.into_iter().collect();
        set.iter()
            .filter(|s| !set.iter().any(|t| t != *s && self.covers(t, s)))
            .map(|s| (*s).to_owned())
            .collect()
    }

    /// The spec this hierarchy was built from, normalised (self-coverage
    /// dropped, every named scope a key of `covers`).
    pub fn spec(&self) -> HierarchySpec {
        let name = |v: &[u32]| -> BTreeSet<String> {
            v.iter().map(|&j| self.names[j as usize].clone()).collect()
        };
        let mut spec = HierarchySpec::new();
        for (i, n) in self.names.iter().enumerate() {
            spec.covers.insert(n.clone(), name(&self.direct[i]));
            if !self.requires_direct[i].is_empty() {
                spec.requires
                    .insert(n.clone(), name(&self.requires_direct[i]));
            }
        }
        spec
    }

    pub(crate) fn id(&self, scope: &str) -> Option<u32> {
        self.names
            .binary_search_by(|n| n.as_str().cmp(scope))
            .ok()
            .map(|i| i as u32)
    }

    pub(crate) fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    pub(crate) fn below_ids(&self, id: u32) -> &[u32] {
        &self.below[id as usize]
    }

    pub(crate) fn requires_ids(&self, id: u32) -> &[u32] {
        &self.requires[id as usize]
    }
}

/// Every node reachable from `start` (without `start` unless on a cycle
/// through it, which is then dropped), sorted.
fn reachable(edges: &[Vec<u32>], start: u32) -> Vec<u32> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![start];
    while let Some(u) = stack.pop() {
        for &v in &edges[u as usize] {
            if v != start && seen.insert(v) {
                stack.push(v);
            }
        }
    }
    seen.into_iter().collect()
}

/// A post-order of the graph (children before parents), or the first cycle
/// met when walking scopes and their entries in sorted order.
fn topological(edges: &[Vec<u32>]) -> Result<Vec<u32>, Vec<u32>> {
    const WHITE: u8 = 0;
    const GREY: u8 = 1;
    const BLACK: u8 = 2;
    let n = edges.len();
    let mut color = vec![WHITE; n];
    let mut order = Vec::with_capacity(n);
    // (node, index of the next child to visit)
    let mut stack: Vec<(u32, usize)> = Vec::new();
    for root in 0..n as u32 {
        if color[root as usize] != WHITE {
            continue;
        }
        color[root as usize] = GREY;
        stack.push((root, 0));
        while let Some(&mut (u, ref mut next)) = stack.last_mut() {
            if let Some(&v) = edges[u as usize].get(*next) {
                *next += 1;
                match color[v as usize] {
                    WHITE => {
                        color[v as usize] = GREY;
                        stack.push((v, 0));
                    }
                    GREY => {
                        let from = stack.iter().position(|&(w, _)| w == v).unwrap();
                        let mut cycle: Vec<u32> = stack[from..].iter().map(|&(w, _)| w).collect();
                        cycle.push(v);
                        return Err(cycle);
                    }
                    _ => {}
                }
            } else {
                color[u as usize] = BLACK;
                order.push(u);
                stack.pop();
            }
        }
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closure_and_antichain() {
        let h = HierarchySpec::from_covers([
            ("admin:org", vec!["write:org"]),
            ("write:org", vec!["read:org"]),
            ("repo", vec!["public_repo", "repo"]),
        ])
        .build()
        .unwrap();
        assert!(h.covers("admin:org", "read:org"));
        assert!(h.covers("repo", "repo"));
        assert!(h.covers("gist", "gist"), "an unknown scope covers itself");
        assert!(!h.covers("read:org", "admin:org"));
        assert!(!h.covers("repo", "read:org"));
        assert_eq!(
            h.covered_by("admin:org").collect::<Vec<_>>(),
            ["read:org", "write:org"]
        );
        assert_eq!(
            h.closure(["write:org", "gist"])
                .into_iter()
                .collect::<Vec<_>>(),
            ["gist", "read:org", "write:org"]
        );
        assert_eq!(
            h.antichain(["read:org", "admin:org", "public_repo", "gist", "gist"]),
            ["admin:org", "gist", "public_repo"]
        );
        // Self-coverage is dropped from the normalised spec.
        assert_eq!(
            h.spec().covers["repo"].iter().collect::<Vec<_>>(),
            ["public_repo"]
        );
        assert_eq!(h.spec().build().unwrap(), h);
    }

    #[test]
    fn cycles_are_reported_in_order() {
        let e = HierarchySpec::from_covers([
            ("a", vec!["b"]),
            ("b", vec!["c"]),
            ("c", vec!["a"]),
            ("x", vec!["a"]),
        ])
        .build()
        .unwrap_err();
        assert_eq!(
            e,
            HierarchyError::Cycle {
                cycle: vec!["a".into(), "b".into(), "c".into(), "a".into()]
            }
        );
        assert_eq!(e.code(), "hierarchy_cycle");
        assert!(
            e.to_string().contains("a covers b covers c covers a"),
            "{e}"
        );
        // A self-loop is not a cycle.
        assert!(
            HierarchySpec::from_covers([("a", vec!["a"])])
                .build()
                .is_ok()
        );
        // A two-cycle deeper down.
        let e = HierarchySpec::from_covers([("r", vec!["s"]), ("s", vec!["t"]), ("t", vec!["s"])])
            .build()
            .unwrap_err();
        assert_eq!(
            e,
            HierarchyError::Cycle {
                cycle: vec!["s".into(), "t".into(), "s".into()]
            }
        );
    }

    #[test]
    fn invalid_tokens_and_size() {
        let e = HierarchySpec::from_covers([("repo", vec!["bad scope"])])
            .build()
            .unwrap_err();
        assert_eq!(e.code(), "invalid_scope");
        assert!(e.to_string().contains("\"bad scope\""), "{e}");
        let e = HierarchySpec::from_covers([("", Vec::<String>::new())])
            .build()
            .unwrap_err();
        assert_eq!(
            e,
            HierarchyError::InvalidScope {
                scope: String::new(),
                problem: TokenProblem::Empty
            }
        );
        let big = HierarchySpec::from_covers(
            (0..=MAX_HIERARCHY_SCOPES).map(|i| (format!("s{i}"), Vec::<String>::new())),
        );
        assert_eq!(big.build().unwrap_err(), HierarchyError::TooLarge);
    }

    #[test]
    fn requires_is_transitive_and_may_be_mutual() {
        let mut spec = HierarchySpec::new();
        spec.add_requires("users:read.email", ["users:read"]);
        spec.add_requires("a", ["b"]);
        spec.add_requires("b", ["a", "c"]);
        let h = spec.build().unwrap();
        assert_eq!(
            h.required_with("users:read.email").collect::<Vec<_>>(),
            ["users:read"]
        );
        assert_eq!(h.required_with("a").collect::<Vec<_>>(), ["b", "c"]);
        assert_eq!(h.required_with("b").collect::<Vec<_>>(), ["a", "c"]);
        assert!(!h.covers("users:read.email", "users:read"));
        let mut ext = HierarchySpec::from_covers([("x", ["y"])]);
        ext.extend(&spec);
        assert_eq!(ext.build().unwrap().required_with("a").count(), 2);
    }

    #[test]
    fn wire_form() {
        let spec: HierarchySpec =
            serde_json::from_value(serde_json::json!({"covers": {"repo": ["public_repo"]}}))
                .unwrap();
        assert_eq!(
            serde_json::to_value(&spec).unwrap(),
            serde_json::json!({"covers": {"repo": ["public_repo"]}})
        );
    }
}
