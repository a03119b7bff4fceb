//! The scope service's HTTP handlers (docs/SCOPE.md walks through them):
//! provider profiles and grants.

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::state::ScopeState;

mod grants;
mod providers;

pub use grants::*;
pub use providers::*;

/// The scope routes, with their OpenAPI description.
pub fn router() -> OpenApiRouter<ScopeState> {
    OpenApiRouter::new()
        .routes(routes!(get_provider, put_provider))
        .routes(routes!(create_grant, list_grants))
        .routes(routes!(exchange_grant))
}
