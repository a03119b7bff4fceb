//! [`Auth`], the extractor a handler takes the request's principal by:
//! verified once per request with the [`Authenticator`] the edge placed in
//! the request extensions.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;

use super::authenticator::Authenticator;
use super::principal::Principal;
use crate::problem::ApiError;

/// The authenticated principal of a request (401 when absent or invalid).
///
/// Reads only the `Authorization` header: tokens in query strings are ignored.
#[derive(Debug, Clone)]
pub struct Auth(pub Arc<Principal>);

impl<S: Send + Sync> FromRequestParts<S> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        if let Some(p) = parts.extensions.get::<Auth>() {
            return Ok(p.clone());
        }
        let Some(authn) = parts.extensions.get::<Arc<Authenticator>>() else {
            tracing::error!("no Authenticator installed in request extensions");
            return Err(ApiError::internal());
        };
        let principal = authn
            .verify_header(parts.headers.get(header::AUTHORIZATION))
            .await?;
        let auth = Auth(principal);
        parts.extensions.insert(auth.clone());
        Ok(auth)
    }
}
