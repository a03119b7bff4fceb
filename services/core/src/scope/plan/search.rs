//! The search for a least-privilege choice: a greedy first plan, then the
//! exact branch-and-bound within the node budget, then the tie-break that
//! lets each call take its best-ranked option inside the plan's closure.

use super::bits::{count, count_new, or_into, subset};
use super::model::Strategy;

/// The search state.
struct Search<'a> {
    w: usize,
    options: &'a [Vec<&'a [u64]>],
    budget: u64,
    nodes: u64,
    best: u32,
    best_choice: Vec<usize>,
    choice: Vec<usize>,
    done: Vec<bool>,
    stack: Vec<u64>,
    forced: Vec<u64>,
}

impl Search<'_> {
    /// Explores the open calls from `depth` (calls assigned so far);
    /// `false` when the budget ran out.
    fn dfs(&mut self, depth: usize) -> bool {
        self.nodes += 1;
        if self.nodes > self.budget {
            return false;
        }
        let w = self.w;
        let options = self.options;
        let n = options.len();
        let cur = &self.stack[depth * w..(depth + 1) * w];
        let here = count(cur);
        if here >= self.best {
            return true;
        }
        if depth == n {
            self.best = here;
            self.best_choice.clone_from(&self.choice);
            return true;
        }
        // Bits every option of an open call adds are forced; a call with an
        // option adding nothing takes it without branching.
        self.forced.iter_mut().for_each(|f| *f = 0);
        for (k, opts) in options.iter().enumerate() {
            if self.done[k] {
                continue;
            }
            if let Some(free) = opts.iter().position(|o| subset(o, cur)) {
                self.done[k] = true;
                self.choice[k] = free;
                let (lo, hi) = self.stack.split_at_mut((depth + 1) * w);
                hi[..w].copy_from_slice(&lo[depth * w..]);
                let ok = self.dfs(depth + 1);
                self.done[k] = false;
                return ok;
            }
            for i in 0..w {
                let inter = opts.iter().fold(!0u64, |acc, o| acc & o[i] & !cur[i]);
                self.forced[i] |= inter;
            }
        }
        // Lower bound: the current closure, the forced bits, and the most any
        // one open call must still add beyond both. Branch on that call.
        let mut widest = 0;
        let mut pick = usize::MAX;
        for (k, opts) in options.iter().enumerate() {
            if self.done[k] {
                continue;
            }
            let least = opts
                .iter()
                .map(|o| {
                    o.iter()
                        .zip(cur)
                        .zip(&self.forced)
                        .map(|((x, c), f)| (x & !c & !f).count_ones())
                        .sum::<u32>()
                })
                .min()
                .unwrap_or(0);
            if pick == usize::MAX || least > widest {
                widest = least;
                pick = k;
            }
        }
        let forced_new = count_new(&self.forced, cur);
        if here + forced_new + widest >= self.best {
            return true;
        }
        // Cheapest options first (ties in rank order); no allocation for
        // up to 16 options.
        let opts = &options[pick];
        let mut small = [(0u32, 0usize); 16];
        let mut heap = Vec::new();
        let order: &mut [(u32, usize)] = if opts.len() <= small.len() {
            &mut small[..opts.len()]
        } else {
            heap.resize(opts.len(), (0, 0));
            &mut heap
        };
        for (slot, (i, o)) in order.iter_mut().zip(opts.iter().enumerate()) {
            *slot = (count_new(o, cur), i);
        }
        order.sort_unstable();
        self.done[pick] = true;
        for &(_, i) in order.iter() {
            let (lo, hi) = self.stack.split_at_mut((depth + 1) * w);
            for ((x, c), o) in hi[..w]
                .iter_mut()
                .zip(&lo[depth * w..])
                .zip(options[pick][i])
            {
                *x = c | o;
            }
            self.choice[pick] = i;
            if !self.dfs(depth + 1) {
                self.done[pick] = false;
                return false;
            }
        }
        self.done[pick] = false;
        true
    }
}

/// Greedy choice, then single-call improvements until none lowers the
/// privilege (at most 8 passes).
fn greedy(w: usize, base: &[u64], options: &[Vec<&[u64]>]) -> (Vec<usize>, u32) {
    let mut cur = base.to_vec();
    let mut choice = Vec::with_capacity(options.len());
    for opts in options {
        let mut best = 0;
        let mut best_cost = u32::MAX;
        for (k, o) in opts.iter().enumerate() {
            let c = count_new(o, &cur);
            if c < best_cost {
                best_cost = c;
                best = k;
            }
        }
        or_into(&mut cur, opts[best]);
        choice.push(best);
    }
    let n = options.len();
    let mut suffix = vec![0u64; (n + 1) * w];
    for _ in 0..8 {
        for i in (0..n).rev() {
            let (lo, hi) = suffix.split_at_mut((i + 1) * w);
            let dst = &mut lo[i * w..];
            dst.copy_from_slice(&hi[..w]);
            or_into(dst, options[i][choice[i]]);
        }
        let mut prefix = base.to_vec();
        let mut changed = false;
        for i in 0..n {
            let mut others = prefix.clone();
            or_into(&mut others, &suffix[(i + 1) * w..(i + 2) * w]);
            let now = count_new(options[i][choice[i]], &others);
            let mut best = choice[i];
            let mut best_cost = now;
            for (k, o) in options[i].iter().enumerate() {
                let c = count_new(o, &others);
                if c < best_cost {
                    best_cost = c;
                    best = k;
                }
            }
            if best != choice[i] {
                choice[i] = best;
                changed = true;
            }
            or_into(&mut prefix, options[i][choice[i]]);
        }
        if !changed {
            break;
        }
    }
    let mut total = base.to_vec();
    for (i, &c) in choice.iter().enumerate() {
        or_into(&mut total, options[i][c]);
    }
    (choice, count(&total))
}

/// Chooses one option per open call: least privilege within `budget`
/// nodes, else the best found; then each call takes its best-ranked option
/// inside the plan's closure (the tie-break). Returns the choice, the
/// strategy and the nodes visited.
pub(super) fn search(
    w: usize,
    base: &[u64],
    options: &[Vec<&[u64]>],
    budget: u64,
) -> (Vec<usize>, Strategy, u64) {
    if options.is_empty() {
        return (Vec::new(), Strategy::Exact, 0);
    }
    let (g_choice, g_val) = greedy(w, base, options);
    let mut s = Search {
        w,
        options,
        budget,
        nodes: 0,
        best: g_val,
        best_choice: g_choice,
        choice: vec![0; options.len()],
        done: vec![false; options.len()],
        stack: vec![0u64; (options.len() + 1) * w],
        forced: vec![0u64; w],
    };
    s.stack[..w].copy_from_slice(base);
    let complete = s.dfs(0);
    // Tie-break: within the closure the plan grants, each call takes its
    // best-ranked option (never adds privilege: the option is inside it).
    let mut union = base.to_vec();
    for (k, &c) in s.best_choice.iter().enumerate() {
        or_into(&mut union, options[k][c]);
    }
    let mut choice = s.best_choice;
    for (k, opts) in options.iter().enumerate() {
        if let Some(i) = opts.iter().position(|o| subset(o, &union)) {
            choice[k] = i;
        }
    }
    let strategy = if complete {
        Strategy::Exact
    } else {
        Strategy::Bounded
    };
    (choice, strategy, s.nodes)
}
