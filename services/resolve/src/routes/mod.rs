//! The resolve service's HTTP handlers (docs/RESOLVE.md walks through them):
//! sessions, and resolving tools within one.

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::state::ResolveState;

mod resolve;
mod sessions;

pub use resolve::*;
pub use sessions::*;

/// The resolve routes, with their OpenAPI description.
pub fn router() -> OpenApiRouter<ResolveState> {
    OpenApiRouter::new()
        .routes(routes!(open_session, list_sessions))
        .routes(routes!(get_session, close_session))
        .routes(routes!(resolve_tool))
        .routes(routes!(resolve_batch))
}
