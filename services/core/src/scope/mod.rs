//! OAuth scopes: what tools need and the least grant that serves them.
//!
//! - [`envelope`]: the scope envelope of a signature (every scope any tool
//!   could ever need), shown to reviewers;
//! - [`schemes`]: reading a tool's `securitySchemes` (top-level, or the
//!   `_meta.securitySchemes` copy OpenAI's Apps SDK uses);
//! - [`token`]: RFC 6749 scope-token validation;
//! - [`hierarchy`]: which scope covers which, closed transitively, cycles
//!   refused with the cycle named;
//! - [`preset`]: built-in hierarchies (GitHub, Sentry, Google, Slack, Jira,
//!   Confluence);
//! - [`plan`]: the least-privilege planner and the `insufficient_scope`
//!   challenge.
//!
//! Everything here is pure: the scope service feeds it resolved tools and
//! provider profiles.

pub mod envelope;
pub mod hierarchy;
pub mod plan;
pub mod preset;
pub mod schemes;
pub mod token;

pub use envelope::{ScopeEnvelope, ToolScopes, scope_envelope, tool_scopes};
pub use hierarchy::{Hierarchy, HierarchyError, HierarchySpec};
pub use plan::{
    CallPlan, Plan, PlanCall, PlanError, PlanOptions, Strategy, plan, plan_with, www_authenticate,
};
pub use preset::Preset;
pub use schemes::{DeclaredSchemes, Notice, SchemeSource, declared_schemes};
pub use token::{MAX_SCOPE_LEN, SCOPE_TOKEN_PATTERN, check_scope};
