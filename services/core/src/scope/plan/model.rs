//! What the planner takes and what it answers: the calls to plan
//! ([`PlanCall`]) and its options, the plan ([`Plan`], one [`CallPlan`] per
//! call, found by an `exact` or `bounded` [`Strategy`]), the errors, and
//! the bounds on its work.

use serde::Serialize;

use super::challenge::www_authenticate;
use crate::card::SecurityScheme;
use crate::scope::token::TokenProblem;

/// The most nodes the exact search may visit before it settles for the best
/// plan found (`bounded`). 10 calls of 3 alternatives each need at most
/// 88,573 nodes without any pruning.
pub const EXACT_NODE_BUDGET: u64 = 100_000;
/// The most calls one plan may hold.
pub const MAX_PLAN_CALLS: usize = 1024;
/// One call to plan for.
#[derive(Debug, Clone, Copy)]
pub struct PlanCall<'a> {
    /// The tool's name (echoed in the plan).
    pub name: &'a str,
    /// Its `securitySchemes` as read (see [`crate::scope::declared_schemes`]);
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
