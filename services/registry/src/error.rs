//! How the registry's failures reach the wire: store errors, validation
//! errors and the registry's own not-found answers, as problem+json.

use axum::http::StatusCode;
use pinfold_core::error::ValidationErrors;
use pinfold_core::names::ServerName;
use pinfold_http::problem::{ApiError, FieldError};
use pinfold_http::tenant::tenant_not_found;

use crate::store::RegistryStoreError;

/// Maps a store error to the HTTP edge, logging what the client must not see.
pub fn store_error(e: RegistryStoreError) -> ApiError {
    match e {
        RegistryStoreError::TenantNotFound => tenant_not_found(),
        RegistryStoreError::NotFound => version_not_found(),
        RegistryStoreError::Stale => ApiError::new(
            StatusCode::CONFLICT,
            "concurrent_change",
            "Changed concurrently",
        )
        .detail("the version's status changed while this request ran; read it again and retry"),
        RegistryStoreError::Unavailable(cause) => {
            tracing::error!(error = %cause, "database unavailable");
            ApiError::database_unavailable()
        }
        RegistryStoreError::Other(cause) => {
            tracing::error!(error = %cause, "database error");
            ApiError::internal()
        }
    }
}

/// 404 `version_not_found`.
pub fn version_not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "version_not_found",
        "Version not found",
    )
    .detail("no such server version in this tenant")
}

/// 404 `server_not_found`: the tenant has no such server.
pub fn server_not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "server_not_found",
        "Server not found",
    )
    .detail("no such server in this tenant")
}

/// Converts core validation errors: limits → 413, the rest → 422.
pub fn validation_error(errors: ValidationErrors) -> ApiError {
    let too_large = errors.exceeds_limits();
    let fields: Vec<FieldError> = errors
        .errors
        .into_iter()
        .map(|e| FieldError {
            pointer: e.pointer,
            code: e.code.to_owned(),
            message: e.message,
        })
        .collect();
    if too_large {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "document_too_large",
            "Document exceeds the configured limits",
        )
        .detail("the document exceeds a configured limit (size, tools, nesting or possibilities)")
        .with_errors(fields)
    } else {
        ApiError::validation(fields)
    }
}

/// The server key of a path segment; an invalid name cannot exist, so 404.
pub fn server_key(raw: &str) -> Result<ServerName, ApiError> {
    ServerName::parse(raw).map_err(|_| server_not_found())
}
