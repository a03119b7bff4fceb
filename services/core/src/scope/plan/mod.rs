//! The least-privilege scope planner.
//!
//! Given calls (each a tool's `securitySchemes`: alternatives, any one of
//! which suffices; an `oauth2` alternative needs all its scopes, `noauth`
//! none — SEP-1488 per-tool schemes, which a resolved tool may narrow per
//! call as the tool-resolution SEP-1862 "Dynamic Security Schemes" section
//! proposes), a provider's [`Hierarchy`](crate::scope::Hierarchy) and the scopes already granted,
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
//!
//! The planner lives by concern: `model` (its input, its answer, its
//! errors and bounds), `alternatives` (each call's usable alternatives),
//! `universe` and `bits` (the touched scopes as bit sets), `search` (the
//! greedy plan, the branch-and-bound and the tie-break), `reason` (why
//! each call's choice), `challenge` (the `insufficient_scope` value) and
//! `planner` ([`plan`] and [`plan_with`], which put them together).

mod alternatives;
mod bits;
mod challenge;
mod model;
mod planner;
mod reason;
mod search;
mod universe;

pub use challenge::{OFFLINE_ACCESS, www_authenticate};
pub use model::{
    CallPlan, EXACT_NODE_BUDGET, MAX_PLAN_CALLS, Plan, PlanCall, PlanError, PlanOptions, Strategy,
};
pub use planner::{plan, plan_with};
