//! Conditional `GET`s at the HTTP edge: `ETag` header values, `304`
//! answers, and reading `If-None-Match` from a request.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

pub(crate) fn etag_value(tag: &str) -> HeaderValue {
    HeaderValue::from_str(tag).unwrap_or_else(|_| HeaderValue::from_static("\"invalid\""))
}

pub(crate) fn not_modified(tag: &str, extra: &[(header::HeaderName, HeaderValue)]) -> Response {
    let mut r = StatusCode::NOT_MODIFIED.into_response();
    r.headers_mut().insert(header::ETAG, etag_value(tag));
    for (k, v) in extra {
        r.headers_mut().insert(k.clone(), v.clone());
    }
    r
}

/// `304` with a prepared `ETag` header value.
pub(crate) fn not_modified_with(etag: HeaderValue) -> Response {
    let mut r = StatusCode::NOT_MODIFIED.into_response();
    r.headers_mut().insert(header::ETAG, etag);
    r
}

/// The `If-None-Match` header of a request, if any: only that value is
/// copied (a `HeaderMap` extractor would copy every header).
pub struct IfNoneMatch(pub Option<HeaderValue>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for IfNoneMatch {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(IfNoneMatch(
            parts.headers.get(header::IF_NONE_MATCH).cloned(),
        ))
    }
}

pub(crate) fn inm(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
}
