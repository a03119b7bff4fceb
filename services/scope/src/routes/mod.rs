//! The scope service's HTTP handlers (docs/SCOPE.md walks through them):
//! the scope envelope of a version, least-privilege plans, provider
//! profiles, grants and their ledger.

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::state::ScopeState;

mod envelope;
mod grants;
mod plan;
mod providers;

pub use envelope::*;
pub use grants::*;
pub use plan::*;
pub use providers::*;

/// The scope routes, with their OpenAPI description.
pub fn router() -> OpenApiRouter<ScopeState> {
    OpenApiRouter::new()
        .routes(routes!(get_scopes))
        .routes(routes!(plan_scopes))
        .routes(routes!(get_provider, put_provider))
        .routes(routes!(create_grant, list_grants))
        .routes(routes!(exchange_grant))
}
