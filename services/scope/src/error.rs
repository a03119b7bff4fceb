//! How the scope service's failures reach the wire.

use axum::http::StatusCode;
use pinfold_http::problem::ApiError;
use pinfold_http::tenant::tenant_not_found;

use crate::store::ScopeStoreError;

/// Maps a store error, logging what the client must not see.
pub fn store_error(e: ScopeStoreError) -> ApiError {
    match e {
        ScopeStoreError::TenantNotFound => tenant_not_found(),
        ScopeStoreError::PreconditionFailed { current } => {
            let mut err = ApiError::new(
                StatusCode::PRECONDITION_FAILED,
                "precondition_failed",
                "Precondition failed",
            );
            err = match current {
                Some(rev) => err
                    .detail("the provider changed since you read it; read it again and retry")
                    .with("current_revision", rev),
                None => err.detail("there is no such provider to replace"),
            };
            err
        }
        ScopeStoreError::PreconditionRequired { current } => ApiError::new(
            StatusCode::PRECONDITION_REQUIRED,
            "precondition_required",
            "Precondition required",
        )
        .detail("this provider exists: send If-Match with the ETag you read")
        .with("current_revision", current),
        ScopeStoreError::Conflict => ApiError::new(StatusCode::CONFLICT, "conflict", "Conflict")
            .detail("a row with this id exists; retry"),
        ScopeStoreError::Unavailable(cause) => {
            tracing::error!(error = %cause, "database unavailable");
            ApiError::database_unavailable()
        }
        ScopeStoreError::Other(cause) => {
            tracing::error!(error = %cause, "database error");
            ApiError::internal()
        }
    }
}

/// 404 `provider_not_found`.
pub fn provider_not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "provider_not_found",
        "Provider not found",
    )
    .detail("no such provider profile in this tenant")
}

/// 404 `grant_not_found`: the same for absent, another caller's, or another
/// tenant's grant.
pub fn grant_not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "grant_not_found", "Grant not found")
        .detail("no such grant for this caller")
}
