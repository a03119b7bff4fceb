//! Why a request is not authenticated ([`AuthError`]), and the answer it
//! becomes: 401 problem+json with a `WWW-Authenticate: Bearer` challenge.

use axum::http::{HeaderValue, StatusCode, header};

use crate::problem::ApiError;

/// Why a request is not authenticated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No bearer token was sent.
    #[error("a bearer token is required")]
    Missing,
    /// A token was sent but is not acceptable.
    #[error("invalid token: {0}")]
    Invalid(String),
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> Self {
        let (code, title, challenge) = match &e {
            AuthError::Missing => (
                "unauthenticated",
                "Authentication required",
                "Bearer realm=\"pinfold\"".to_owned(),
            ),
            AuthError::Invalid(why) => (
                "invalid_token",
                "Invalid bearer token",
                format!(
                    "Bearer realm=\"pinfold\", error=\"invalid_token\", error_description=\"{}\"",
                    why.replace(['"', '\\'], "'")
                ),
            ),
        };
        ApiError::new(StatusCode::UNAUTHORIZED, code, title)
            .detail(e.to_string())
            .header(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_str(&challenge)
                    .unwrap_or_else(|_| HeaderValue::from_static("Bearer realm=\"pinfold\"")),
            )
    }
}
