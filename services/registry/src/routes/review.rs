//! Review and lifecycle: approve, reject, deprecate, revoke.

use axum::extract::{Path, State};
use axum::response::Response;
use pinfold_http::problem::{ApiError, ProblemBody};
use pinfold_http::{StrictJson, TenantScope};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::model::{Action, Decision};
use crate::routes::paths::VersionPath;
use crate::routes::record::{VersionRecord, record_response};
use crate::service::{review, set_status};
use crate::state::RegistryState;

// ---------------------------------------------------------------- review

/// Body of a review.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"decision": "approve", "note": "Checked the diff against 1.2.0"}))]
pub struct ReviewBody {
    /// `approve` or `reject`.
    pub decision: Decision,
    /// Why (at most 2,000 characters).
    #[serde(default)]
    #[schema(max_length = 2000)]
    pub note: Option<String>,
}

/// Body of a lifecycle change.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"status": "revoked", "reason": "Leaked credentials in the remote URL"}))]
pub struct StatusBody {
    /// `deprecated` or `revoked`.
    pub status: Lifecycle,
    /// Why (required, not only white space, at most 2,000 characters).
    #[schema(
        min_length = 1,
        max_length = 2000,
        pattern = r"[^\t\n\u000b\u000c\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
    )]
    pub reason: String,
}

/// A lifecycle target.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Lifecycle {
    /// No longer offered as `latest`.
    Deprecated,
    /// Withdrawn for good.
    Revoked,
}

/// Approve or reject a version (roles `reviewer`, `admin`).
///
/// The publisher of a version cannot approve it (`403 separation_of_duties`).
#[utoipa::path(
    post,
    path = "/v1/tenants/{tenant}/servers/{server}/versions/{version}/review",
    tag = "registry",
    operation_id = "review_version",
    params(VersionPath),
    request_body = ReviewBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The updated record", body = VersionRecord),
        (status = 403, description = "Role missing, or approving your own version", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such version", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "Not allowed from the current status", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Invalid body", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn review_version(
    State(st): State<RegistryState>,
    scope: TenantScope,
    Path(p): Path<VersionPath>,
    StrictJson(body): StrictJson<ReviewBody>,
) -> Result<Response, ApiError> {
    let (stored, reviews) = review(
        &st,
        &scope,
        &p.server,
        &p.version,
        body.decision,
        body.note.as_deref(),
    )
    .await?;
    record_response(&stored, reviews)
}

/// Deprecate or revoke a version (roles `admin`, `reviewer`).
#[utoipa::path(
    post,
    path = "/v1/tenants/{tenant}/servers/{server}/versions/{version}/status",
    tag = "registry",
    operation_id = "set_version_status",
    params(VersionPath),
    request_body = StatusBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The updated record", body = VersionRecord),
        (status = 403, description = "Role missing", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such version", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "Not allowed from the current status", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Invalid body", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn set_version_status(
    State(st): State<RegistryState>,
    scope: TenantScope,
    Path(p): Path<VersionPath>,
    StrictJson(body): StrictJson<StatusBody>,
) -> Result<Response, ApiError> {
    let action = match body.status {
        Lifecycle::Deprecated => Action::Deprecate,
        Lifecycle::Revoked => Action::Revoke,
    };
    let (stored, reviews) =
        set_status(&st, &scope, &p.server, &p.version, action, &body.reason).await?;
    record_response(&stored, reviews)
}
