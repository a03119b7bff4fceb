//! The scope service's HTTP handlers: the scope envelope of a version and
//! least-privilege plans.

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::state::ScopeState;

mod envelope;
mod plan;

pub use envelope::*;
pub use plan::*;

/// The scope routes, with their OpenAPI description.
pub fn router() -> OpenApiRouter<ScopeState> {
    OpenApiRouter::new()
        .routes(routes!(get_scopes))
        .routes(routes!(plan_scopes))
}
