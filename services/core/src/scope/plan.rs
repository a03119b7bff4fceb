//! The least-privilege scope planner.
//!
//! Given calls (each a tool's `securitySchemes`: alternatives, any one of
//! which suffices; an `oauth2` alternative needs all its scopes, `noauth`
//! none — SEP-1488 per-tool schemes, which a resolved tool may narrow per
//! call as the tool-resolution SEP-1862 "Dynamic Security Schemes" section
//! proposes), a provider's [`Hierarchy`] and the scopes already granted,
//! [`plan`] chooses one alternative per call.
//!
//! # The rule
//!
//! *Privilege* is the size of the closure of (requested ∪ granted) under
//! the hierarchy: every scope the resulting token could satisfy. The plan
//! minimises it. Already-granted scopes are free (they are in the closure
//! whatever we choose), `noauth` is free, and an alternative whose scopes
//! the grant already covers is free.
//!
//! - A tool with no `securitySchemes` (or an empty list) uses the provider's
//!   default scopes as its one alternative and says so (`defaulted`).
//! - Alternatives of other types (`apiKey`, ...) cannot be met by an OAuth
//!   grant and are skipped; a call left with no alternative is an error.
//! - Scopes a hierarchy says must be requested together (Slack's
//!   `users:read.email` with `users:read`) are added to an alternative
//!   before anything else.
//! - `required` is the antichain of the chosen scopes: each chosen scope not
//!   covered by another chosen one. `request` is `required` without the
//!   scopes the grant already covers, so no requested scope is covered by
//!   another requested or granted one. Both are sorted and de-duplicated.
//!
//! # Tie-breaks
//!
//! Each call ranks its alternatives: `noauth` first, then by how many
//! scopes the alternative adds beyond the grant's closure, then by its
//! index in `securitySchemes`. Once a least-privilege plan is found, every
//! call takes its best-ranked alternative that lies inside that plan's
//! closure (which cannot add privilege). So a call never pays for privilege
//! it does not need, and, the search order being fixed by the input, equal
//! inputs always give equal plans.
//!
//! # Strategy
//!
//! The search is exact branch-and-bound: alternatives dominated within
//! their call (their added closure contains another's) are dropped, calls
//! with one alternative left are fixed, identical calls are searched once.
//! The rest is searched depth-first: a call with an option that adds
//! nothing takes it without branching; otherwise the search branches on
//! the open call whose cheapest option must add the most, cheapest options
//! first, and prunes by a lower bound — the current closure, plus the
//! scopes every option of some open call adds, plus the most any one open
//! call must add beyond both. A greedy plan (each call in order takes its
//! cheapest alternative given the choices so far, then single-call changes
//! that lower privilege until none does) is the first incumbent. The
//! search visits at most [`EXACT_NODE_BUDGET`] nodes; when it finishes
//! inside that bound the plan is `exact` (least privilege proven), otherwise
//! it is `bounded`: the best plan found, at least as good as the greedy one.

use serde::Serialize;

use super::hierarchy::Hierarchy;
use super::token::{TokenProblem, check_scope};
use crate::card::SecurityScheme;

/// The most nodes the exact search may visit before it settles for the best
/// plan found (`bounded`). 10 calls of 3 alternatives each need at most
/// 88,573 nodes without any pruning.
pub const EXACT_NODE_BUDGET: u64 = 100_000;
/// The most calls one plan may hold.
pub const MAX_PLAN_CALLS: usize = 1024;
/// The scope a challenge never names (MCP authorization: a refresh token is
/// the client's business, not an operation's requirement).
pub const OFFLINE_ACCESS: &str = "offline_access";

/// One call to plan for.
#[derive(Debug, Clone, Copy)]
pub struct PlanCall<'a> {
    /// The tool's name (echoed in the plan).
    pub name: &'a str,
    /// Its `securitySchemes` as read (see [`super::declared_schemes`]);
    /// `None` when it declares none.
    pub schemes: Option<&'a [SecurityScheme]>,
}

/// Knobs of the planner (tests and benches shrink the budget).
#[derive(Debug, Clone, Copy)]
pub struct PlanOptions {
    /// Node budget of the exact search.
    pub node_budget: u64,
}

impl Default for PlanOptions {
    fn default() -> Self {
        Self {
            node_budget: EXACT_NODE_BUDGET,
        }
    }
}

/// How the plan was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Least privilege, proven by a complete search.
    Exact,
    /// The search hit its bound: the best plan found.
    Bounded,
}

/// The choice for one call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallPlan {
    /// The tool's name.
    pub name: String,
    /// Index of the chosen alternative in the tool's `securitySchemes`
    /// (`None` when the provider's defaults were used).
    pub alternative: Option<usize>,
    /// The scopes the chosen alternative needs (with co-requested ones),
    /// sorted.
    pub scopes: Vec<String>,
    /// The chosen alternative is `noauth`.
    pub noauth: bool,
    /// No scheme was declared: the provider's defaults were used.
    pub defaulted: bool,
    /// Why this alternative, in one sentence.
    pub reason: String,
}

/// A plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// `exact` or `bounded`.
    pub strategy: Strategy,
    /// Per call, in the order given.
    pub calls: Vec<CallPlan>,
    /// The antichain of the chosen scopes, sorted.
    pub required: Vec<String>,
    /// `required` without what the grant covers, sorted: what to ask for.
    pub request: Vec<String>,
    /// Size of the closure of (request ∪ granted).
    #[serde(skip)]
    pub privilege: usize,
    /// Scopes for an `insufficient_scope` challenge: the request plus the
    /// granted scopes still needed (a step-up asks for both), as an
    /// antichain, sorted, never `offline_access`. Empty when nothing is
    /// missing.
    #[serde(skip)]
    pub challenge: Vec<String>,
    /// Nodes the exact search visited (for benches and reports).
    #[serde(skip)]
    pub nodes: u64,
}

impl Plan {
    /// The `WWW-Authenticate` value for an HTTP 403 (MCP authorization,
    /// 2026-07-28: one challenge with every scope the operation needs),
    /// or `None` when nothing is missing.
    pub fn www_authenticate(&self, resource_metadata: Option<&str>) -> Option<String> {
        (!self.request.is_empty()).then(|| www_authenticate(&self.challenge, resource_metadata))
    }
}

/// Why a plan could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A scope (granted, default or in a scheme) is not a scope token.
    #[error("{pointer}: {scope:?} is not a scope token: {}", problem.message())]
    InvalidScope {
        /// Where: `/granted/0`, `/default_scopes/1`,
        /// `/calls/2/securitySchemes/0/scopes/1`.
        pointer: String,
        /// The offending string.
        scope: String,
        /// What is wrong with it.
        problem: TokenProblem,
    },
    /// A call's tool offers neither `noauth` nor `oauth2`.
    #[error(
        "/calls/{call}: tool {name:?} declares no noauth or oauth2 alternative, so no OAuth grant can satisfy it"
    )]
    Unsatisfiable {
        /// Index of the call.
        call: usize,
        /// The tool's name.
        name: String,
    },
    /// More than [`MAX_PLAN_CALLS`] calls.
    #[error("a plan may hold at most {MAX_PLAN_CALLS} calls")]
    TooManyCalls,
}

impl PlanError {
    /// The stable problem code for the HTTP layer.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidScope { .. } => "invalid_scope",
            Self::Unsatisfiable { .. } => "scope_unsatisfiable",
            Self::TooManyCalls => "too_many_calls",
        }
    }
}

/// Renders an `insufficient_scope` Bearer challenge (RFC 6750 §3; RFC 9728
/// §5.1 `resource_metadata`). Scope tokens are NQCHAR, so they need no
/// escaping; the URL is written as an RFC 9110 quoted-string.
pub fn www_authenticate(scopes: &[String], resource_metadata: Option<&str>) -> String {
    let mut s = String::from("Bearer error=\"insufficient_scope\", scope=\"");
    let mut first = true;
    for sc in scopes.iter().filter(|s| s.as_str() != OFFLINE_ACCESS) {
        if !first {
            s.push(' ');
        }
        first = false;
        s.push_str(sc);
    }
    s.push('"');
    if let Some(url) = resource_metadata {
        s.push_str(", resource_metadata=\"");
        for c in url.chars() {
            if c == '"' || c == '\\' {
                s.push('\\');
            }
            s.push(c);
        }
        s.push('"');
    }
    s
}

/// Plans `calls` with the default options.
pub fn plan(
    hierarchy: &Hierarchy,
    defaults: &[String],
    granted: &[String],
    calls: &[PlanCall<'_>],
) -> Result<Plan, PlanError> {
    plan_with(hierarchy, defaults, granted, calls, PlanOptions::default())
}

/// One usable alternative of a call.
struct Alt<'a> {
    index: Option<usize>,
    noauth: bool,
    /// Declared scopes plus co-requested ones, sorted, de-duplicated.
    scopes: Vec<&'a str>,
    /// How many co-requested scopes were added.
    added: usize,
}

struct CallAlts<'a> {
    alts: Vec<Alt<'a>>,
    defaulted: Option<&'static str>,
    ignored: usize,
}

/// Local interning of the scopes a plan touches, as bit positions.
struct Universe<'a> {
    h: &'a Hierarchy,
    known: Vec<u32>,
    unknown: Vec<(&'a str, u32)>,
    len: u32,
    /// Per bit: its scope and its hierarchy id (`NONE` when unknown).
    names: Vec<&'a str>,
    ids: Vec<u32>,
}

const NONE: u32 = u32::MAX;

impl<'a> Universe<'a> {
    fn new(h: &'a Hierarchy) -> Self {
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
    fn strict_into(&self, bit: u32, bits: &mut [u64]) {
        let id = self.ids[bit as usize];
        if id != NONE {
            for &b in self.h.below_ids(id) {
                set(bits, self.known[b as usize]);
            }
        }
    }

    /// The bit of an interned scope.
    fn bit_of(&self, scope: &str) -> u32 {
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
    fn names_of(&self, bits: &[u64]) -> Vec<String> {
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
    fn closure(&mut self, scope: &'a str, out: &mut Vec<u32>) {
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

fn check(pointer: impl FnOnce() -> String, scope: &str) -> Result<(), PlanError> {
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

fn collect_alternatives<'a>(
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

/// Bit-set helpers over `w`-word slices.
fn set(bits: &mut [u64], i: u32) {
    bits[(i / 64) as usize] |= 1 << (i % 64);
}

fn get(bits: &[u64], i: u32) -> bool {
    bits[(i / 64) as usize] & (1 << (i % 64)) != 0
}

fn count(bits: &[u64]) -> u32 {
    bits.iter().map(|w| w.count_ones()).sum()
}

fn count_new(bits: &[u64], over: &[u64]) -> u32 {
    bits.iter()
        .zip(over)
        .map(|(a, b)| (a & !b).count_ones())
        .sum()
}

fn subset(a: &[u64], b: &[u64]) -> bool {
    a.iter().zip(b).all(|(x, y)| x & !y == 0)
}

fn or_into(dst: &mut [u64], src: &[u64]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d |= s;
    }
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

fn reason_for(c: &CallAlts<'_>, k: usize, m: &[u64], others: &[u64]) -> String {
    let alt = &c.alts[k];
    if let Some(why) = c.defaulted {
        return if alt.scopes.is_empty() {
            format!("{why}: the provider has no default scopes, nothing to request")
        } else {
            format!("{why}: the provider's default scopes apply")
        };
    }
    let n = c.alts.len();
    let j = alt.index.unwrap_or_default();
    if alt.noauth {
        return format!("alternative {j} is noauth: callable without credentials");
    }
    if count(m) == 0 && !alt.scopes.is_empty() {
        return format!("alternative {j}: already covered by the granted scopes");
    }
    if alt.scopes.is_empty() {
        return format!("alternative {j} is oauth2 without scopes: a token, no scope");
    }
    if n == 1 {
        return format!("alternative {j} is the only oauth2 alternative");
    }
    let added = count_new(m, others);
    if added == 0 {
        format!("alternative {j} of {n}: covered by the scopes other calls need")
    } else {
        format!("alternative {j} of {n}: the least added privilege ({added} scope(s))")
    }
}

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
fn search(
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

#[cfg(test)]
mod tests {
    use super::*;
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
