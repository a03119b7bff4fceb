//! A provider's scope hierarchy as the profile states it: each scope maps to
//! the scopes it covers (directly; coverage is transitive).
//!
//! This is the small part the scope service itself needs (checking a
//! profile for cycles, and the closure the grant ledger compares). The
//! planner's model of hierarchies and the built-in presets live in
//! `signet-core`; when a profile names a preset, its table is merged in
//! through [`Hierarchy::extend`].

use std::collections::{BTreeMap, BTreeSet};

/// Scope → the scopes it covers directly.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hierarchy {
    covers: BTreeMap<String, BTreeSet<String>>,
}

impl Hierarchy {
    /// A hierarchy from a profile's `hierarchy` map.
    pub fn from_map(map: &BTreeMap<String, Vec<String>>) -> Self {
        let mut h = Hierarchy::default();
        h.extend(
            map.iter()
                .map(|(k, v)| (k.as_str(), v.iter().map(String::as_str))),
        );
        h
    }

    /// Adds edges (a profile's `hierarchy` extends its preset).
    pub fn extend<'a, I, J>(&mut self, edges: I)
    where
        I: IntoIterator<Item = (&'a str, J)>,
        J: IntoIterator<Item = &'a str>,
    {
        for (scope, covered) in edges {
            let e = self.covers.entry(scope.to_owned()).or_default();
            e.extend(covered.into_iter().map(str::to_owned));
        }
    }

    /// A cycle (`[a, b, a]`: `a` covers `b` covers `a`), if there is one.
    /// A scope covering itself is a cycle too: coverage is a strict order.
    /// The first cycle in scope order is reported, so the answer is stable.
    pub fn find_cycle(&self) -> Option<Vec<String>> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            Open,
            Done,
        }
        let mut marks: BTreeMap<&str, Mark> = BTreeMap::new();
        for start in self.covers.keys() {
            if marks.contains_key(start.as_str()) {
                continue;
            }
            // Iterative depth-first search; `path` is the open chain.
            let mut path: Vec<&str> = vec![start];
            let mut iters: Vec<std::collections::btree_set::Iter<'_, String>> =
                vec![self.children(start)];
            marks.insert(start, Mark::Open);
            while let Some(it) = iters.last_mut() {
                match it.next() {
                    Some(next) => match marks.get(next.as_str()) {
                        Some(Mark::Open) => {
                            let from = path.iter().position(|s| *s == next).unwrap_or(0);
                            let mut cycle: Vec<String> =
                                path[from..].iter().map(|s| (*s).to_owned()).collect();
                            cycle.push(next.clone());
                            return Some(cycle);
                        }
                        Some(Mark::Done) => {}
                        None => {
                            marks.insert(next, Mark::Open);
                            path.push(next);
                            iters.push(self.children(next));
                        }
                    },
                    None => {
                        iters.pop();
                        if let Some(done) = path.pop() {
                            marks.insert(done, Mark::Done);
                        }
                    }
                }
            }
        }
        None
    }

    fn children(&self, scope: &str) -> std::collections::btree_set::Iter<'_, String> {
        static EMPTY: BTreeSet<String> = BTreeSet::new();
        self.covers.get(scope).unwrap_or(&EMPTY).iter()
    }

    /// Every scope that `scopes` grant: themselves and everything they
    /// cover, transitively.
    pub fn closure<'a>(&self, scopes: impl IntoIterator<Item = &'a String>) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let mut todo: Vec<&str> = scopes.into_iter().map(String::as_str).collect();
        while let Some(s) = todo.pop() {
            if out.insert(s.to_owned()) {
                todo.extend(self.children(s).map(String::as_str));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(edges: &[(&str, &[&str])]) -> Hierarchy {
        let map = edges
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.iter().map(|s| (*s).to_owned()).collect()))
            .collect();
        Hierarchy::from_map(&map)
    }

    #[test]
    fn closure_is_transitive() {
        let g = h(&[("admin:org", &["write:org"]), ("write:org", &["read:org"])]);
        let c = g.closure(&["admin:org".to_owned()]);
        assert_eq!(
            c.into_iter().collect::<Vec<_>>(),
            ["admin:org", "read:org", "write:org"]
        );
        assert!(g.find_cycle().is_none());
    }

    #[test]
    fn cycles_are_reported_with_their_path() {
        let g = h(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("d", &[])]);
        assert_eq!(g.find_cycle().unwrap(), ["a", "b", "c", "a"]);
        let g = h(&[("x", &["x"])]);
        assert_eq!(g.find_cycle().unwrap(), ["x", "x"]);
        // A diamond is no cycle.
        let g = h(&[("a", &["b", "c"]), ("b", &["d"]), ("c", &["d"])]);
        assert!(g.find_cycle().is_none());
    }
}
