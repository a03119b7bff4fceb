//! The registry's HTTP layer: one handler module per concern (`v01` is the
//! official-registry-compatible subregistry), the modules they share (path
//! parameters, the version record, conditional `GET`s), and the router
//! composed from them here (docs/REGISTRY.md walks through the API).

pub mod attest;
pub mod compare;
pub mod conditional;
pub mod documents;
pub mod paths;
pub mod publish;
pub mod read;
pub mod record;
pub mod review;
pub mod server_json;
pub mod v01;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::state::RegistryState;

/// The registry routes, with their OpenAPI description.
pub fn router() -> OpenApiRouter<RegistryState> {
    OpenApiRouter::new()
        .routes(routes!(read::list_servers))
        .routes(routes!(read::get_server))
        .routes(routes!(publish::publish_version, read::get_version))
        .routes(routes!(documents::get_signature))
        .routes(routes!(documents::get_tools))
        .routes(routes!(documents::get_card, documents::preflight_card))
        .routes(routes!(review::review_version))
        .routes(routes!(review::set_version_status))
        .routes(routes!(compare::diff_versions))
        .routes(routes!(compare::verify_version))
        .routes(routes!(attest::get_attestation))
        .routes(routes!(attest::get_jwks))
        .routes(routes!(publish::import_server_json))
        .routes(routes!(v01::handlers::list_subregistry_servers))
        .routes(routes!(v01::handlers::list_subregistry_versions))
        .routes(routes!(v01::handlers::get_subregistry_version))
}
