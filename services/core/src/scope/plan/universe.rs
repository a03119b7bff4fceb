//! The scopes one plan touches, interned as bit positions: a scope the
//! hierarchy knows with everything it covers, an unknown scope alone.

use super::bits::{get, set};
use crate::scope::hierarchy::Hierarchy;

/// Local interning of the scopes a plan touches, as bit positions.
pub(super) struct Universe<'a> {
    h: &'a Hierarchy,
    known: Vec<u32>,
    unknown: Vec<(&'a str, u32)>,
    pub(super) len: u32,
    /// Per bit: its scope and its hierarchy id (`NONE` when unknown).
    names: Vec<&'a str>,
    ids: Vec<u32>,
}

const NONE: u32 = u32::MAX;

impl<'a> Universe<'a> {
    pub(super) fn new(h: &'a Hierarchy) -> Self {
        Self {
            h,
            known: vec![NONE; h.len()],
            unknown: Vec::new(),
            len: 0,
            names: Vec::new(),
            ids: Vec::new(),
        }
    }

    /// Sets, in `bits`, every scope `bit`'s scope strictly covers.
    pub(super) fn strict_into(&self, bit: u32, bits: &mut [u64]) {
        let id = self.ids[bit as usize];
        if id != NONE {
            for &b in self.h.below_ids(id) {
                set(bits, self.known[b as usize]);
            }
        }
    }

    /// The bit of an interned scope.
    pub(super) fn bit_of(&self, scope: &str) -> u32 {
        match self.h.id(scope) {
            Some(id) => self.known[id as usize],
            None => self
                .unknown
                .iter()
                .find(|(s, _)| *s == scope)
                .map(|&(_, b)| b)
                .unwrap_or(NONE),
        }
    }

    /// The scopes of the bits set in `bits`, sorted.
    pub(super) fn names_of(&self, bits: &[u64]) -> Vec<String> {
        let mut v: Vec<String> = (0..self.len)
            .filter(|&b| get(bits, b))
            .map(|b| self.names[b as usize].to_owned())
            .collect();
        v.sort_unstable();
        v
    }

    fn intern_known(&mut self, id: u32) -> u32 {
        let slot = &mut self.known[id as usize];
        if *slot == NONE {
            *slot = self.len;
            self.len += 1;
            self.names.push(self.h.name(id));
            self.ids.push(id);
        }
        *slot
    }

    /// Interns `scope` and everything it covers; returns their bits.
    pub(super) fn closure(&mut self, scope: &'a str, out: &mut Vec<u32>) {
        match self.h.id(scope) {
            Some(id) => {
                out.push(self.intern_known(id));
                for &b in self.h.below_ids(id) {
                    out.push(self.intern_known(b));
                }
            }
            None => {
                let bit = match self.unknown.iter().find(|(s, _)| *s == scope) {
                    Some(&(_, b)) => b,
                    None => {
                        let b = self.len;
                        self.len += 1;
                        self.unknown.push((scope, b));
                        self.names.push(scope);
                        self.ids.push(NONE);
                        b
                    }
                };
                out.push(bit);
            }
        }
    }
}
