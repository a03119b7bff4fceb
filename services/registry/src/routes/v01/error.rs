//! How a `/v0.1` request fails: a not-found in the official API's
//! `{"error"}` shape, anything else as problem+json.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use pinfold_http::problem::{ApiError, NotAProblem};

use crate::routes::v01::answer::no_cache;
use crate::subregistry::response::NotFoundBody;

/// The official 404 message for a server or version.
pub(super) const SERVER_NOT_FOUND: &str = "Server not found";
/// The official 404 message for a subregistry (tenant) that is absent or
/// not the caller's: identical in both cases.
pub(super) const NOT_FOUND: &str = "Not found";

/// A `/v0.1` failure: a problem, or the official `{"error"}` 404.
#[derive(Debug)]
pub enum V01Error {
    /// Rendered as problem+json.
    Problem(ApiError),
    /// 404 with the official body.
    NotFound(&'static str),
}

impl From<ApiError> for V01Error {
    /// Every 404 of the registry (an unknown tenant, server or version)
    /// takes the official shape; anything else stays a problem.
    fn from(e: ApiError) -> Self {
        if e.status == StatusCode::NOT_FOUND {
            V01Error::NotFound(if e.code == "tenant_not_found" {
                NOT_FOUND
            } else {
                SERVER_NOT_FOUND
            })
        } else {
            V01Error::Problem(e)
        }
    }
}

impl IntoResponse for V01Error {
    fn into_response(self) -> Response {
        match self {
            V01Error::Problem(e) => e.into_response(),
            V01Error::NotFound(message) => {
                let mut r = (
                    StatusCode::NOT_FOUND,
                    Json(NotFoundBody {
                        error: message.to_owned(),
                    }),
                )
                    .into_response();
                no_cache(r.headers_mut());
                r.extensions_mut().insert(NotAProblem);
                r
            }
        }
    }
}
