//! `application/problem+json` (RFC 9457) errors with stable codes.
//!
//! Handlers return [`ApiError`]; the server's outermost middleware adds the
//! request id to the body. A 5xx never carries its cause to the client: the
//! cause is logged once, with the request id, and the body stays generic.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// Content type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// One validation error, located by a JSON pointer (RFC 6901) into the
/// request body (or a query parameter name prefixed with `?`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct FieldError {
    /// Where the problem is (`""` is the whole document).
    pub pointer: String,
    /// Stable machine-readable reason.
    pub code: String,
    /// Human-readable explanation.
    pub message: String,
}

/// The wire shape of an error (RFC 9457 plus Pinfold's members).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ProblemBody {
    /// A URI naming the problem type (`urn:pinfold:problem:<code>`).
    #[serde(rename = "type")]
    pub type_: String,
    /// Short summary, the same for every occurrence of a code.
    pub title: String,
    /// HTTP status code.
    pub status: u16,
    /// Stable machine-readable code (`invalid_token`, `tenant_not_found`, ...).
    pub code: String,
    /// Explanation of this occurrence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The request id (also in the `x-request-id` response header).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// Validation errors, each with its JSON pointer.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
    /// Extra members specific to a code (for example both digests of a conflict).
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub extra: Map<String, Value>,
}

/// The error every handler returns (boxed, so `Result<T, ApiError>` stays
/// one pointer wide on the happy path).
#[derive(Debug, Clone)]
pub struct ApiError(Box<Problem>);

/// The contents of an [`ApiError`].
#[derive(Debug, Clone)]
pub struct Problem {
    /// Status to answer with.
    pub status: StatusCode,
    /// Stable code.
    pub code: &'static str,
    /// Short summary.
    pub title: &'static str,
    /// Explanation of this occurrence.
    pub detail: Option<String>,
    /// Validation errors.
    pub errors: Vec<FieldError>,
    /// Extra members.
    pub extra: Map<String, Value>,
    /// Extra response headers (for example `WWW-Authenticate`).
    pub headers: Vec<(header::HeaderName, HeaderValue)>,
}

impl std::ops::Deref for ApiError {
    type Target = Problem;

    fn deref(&self) -> &Problem {
        &self.0
    }
}

impl std::ops::DerefMut for ApiError {
    fn deref_mut(&mut self) -> &mut Problem {
        &mut self.0
    }
}

impl ApiError {
    /// A new error with no detail.
    pub fn new(status: StatusCode, code: &'static str, title: &'static str) -> Self {
        Self(Box::new(Problem {
            status,
            code,
            title,
            detail: None,
            errors: Vec::new(),
            extra: Map::new(),
            headers: Vec::new(),
        }))
    }

    /// Moves the validation errors out.
    pub fn into_errors(self) -> Vec<FieldError> {
        self.0.errors
    }

    /// Adds an explanation.
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// Adds validation errors.
    pub fn with_errors(mut self, errors: Vec<FieldError>) -> Self {
        self.errors = errors;
        self
    }

    /// Adds an extra member to the body.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.extra.insert(key.to_owned(), value.into());
        self
    }

    /// Adds a response header.
    pub fn header(mut self, name: header::HeaderName, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }

    /// 400 `malformed_json`.
    pub fn malformed_json(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "malformed_json",
            "Malformed JSON body",
        )
        .detail(detail)
    }

    /// 422 `validation_failed` with every error.
    pub fn validation(errors: Vec<FieldError>) -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
            "The request body is not valid",
        )
        .detail(format!("{} validation error(s)", errors.len()))
        .with_errors(errors)
    }

    /// 404 `not_found` for a named resource kind.
    pub fn not_found(what: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", "Not found")
            .detail(format!("{what} not found"))
    }

    /// 403 `forbidden_role`: authenticated, but lacking any of the roles.
    pub fn forbidden_role(needed: &[&str]) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden_role", "Missing role").detail(format!(
            "this operation needs one of the roles: {}",
            needed.join(", ")
        ))
    }

    /// 500 with a generic body. Log the cause before calling this.
    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            "Internal server error",
        )
        .detail("the server failed to handle this request; quote the request id when reporting it")
    }

    /// 503 `unavailable`.
    pub fn unavailable(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "Service unavailable",
        )
        .detail(detail)
    }

    /// 503 `database_unavailable` with `Retry-After: 2` (RFC 9110 §10.2.3):
    /// the database cannot be reached (connection refused or lost, pool
    /// wait timed out). The request may be retried unchanged. Log the cause
    /// before calling this.
    pub fn database_unavailable() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "database_unavailable",
            "Database unavailable",
        )
        .detail("the database cannot be reached; retry later")
        .header(header::RETRY_AFTER, HeaderValue::from_static("2"))
    }

    /// The body this error renders to, with the given request id.
    pub fn body(&self, request_id: Option<String>) -> ProblemBody {
        ProblemBody {
            type_: format!("urn:pinfold:problem:{}", self.code),
            title: self.title.to_owned(),
            status: self.status.as_u16(),
            code: self.code.to_owned(),
            detail: self.detail.clone(),
            request_id,
            errors: self.errors.clone(),
            extra: self.extra.clone(),
        }
    }

    /// Renders the response with a request id in the body.
    pub fn into_response_with_id(self, request_id: Option<String>) -> Response {
        let body = serde_json::to_vec(&self.body(request_id)).unwrap_or_else(|_| b"{}".to_vec());
        let mut resp = (self.status, body).into_response();
        resp.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        for (k, v) in &self.headers {
            resp.headers_mut().append(k.clone(), v.clone());
        }
        resp.extensions_mut().insert(RenderedProblem(self));
        resp
    }
}

/// Marks an error response whose body is deliberately not problem+json
/// (the official MCP registry API's `{"error": "..."}` 404s): the server's
/// edge leaves such a body as it is instead of rendering a problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAProblem;

/// Marks a response produced from an [`ApiError`], so the server can re-render
/// it with the request id.
#[derive(Debug, Clone)]
pub struct RenderedProblem(pub ApiError);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.into_response_with_id(None)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status.as_u16(), self.code)?;
        if let Some(d) = &self.detail {
            write!(f, ": {d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ApiError {}
