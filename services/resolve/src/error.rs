//! How the resolve service's failures reach the wire.

use axum::http::StatusCode;
use pinfold_http::problem::ApiError;
use pinfold_http::tenant::tenant_not_found;

use crate::store::SessionStoreError;

/// Maps a store error, logging what the client must not see.
pub fn store_error(e: SessionStoreError) -> ApiError {
    match e {
        SessionStoreError::TenantNotFound => tenant_not_found(),
        SessionStoreError::VersionNotFound => ApiError::new(
            StatusCode::NOT_FOUND,
            "version_not_found",
            "Version not found",
        )
        .detail("no such server version in this tenant"),
        SessionStoreError::Conflict => {
            ApiError::new(StatusCode::CONFLICT, "session_conflict", "Session id taken")
                .detail("a session with this id exists; retry")
        }
        SessionStoreError::Unavailable(cause) => {
            tracing::error!(error = %cause, "database unavailable");
            ApiError::database_unavailable()
        }
        SessionStoreError::Other(cause) => {
            tracing::error!(error = %cause, "database error");
            ApiError::internal()
        }
    }
}

/// 404 `session_not_found`: the same for a session that does not exist,
/// that belongs to another principal, or to another tenant.
pub fn session_not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "session_not_found",
        "Session not found",
    )
    .detail("no such session for this caller")
}

/// 410 `session_expired`.
pub fn session_expired() -> ApiError {
    ApiError::new(StatusCode::GONE, "session_expired", "Session expired")
        .detail("this session has ended; open a new one")
}

/// 410 `version_revoked`.
pub fn version_revoked() -> ApiError {
    ApiError::new(StatusCode::GONE, "version_revoked", "Version revoked")
        .detail("the signature version this session pinned was revoked, which ended the session")
}
