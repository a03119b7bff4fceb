//! The version record: what a read, a publish and a review answer with,
//! and its `200` answer carrying the record `ETag`.

use axum::Json;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use pinfold_core::ids::Timestamp;
use pinfold_http::problem::ApiError;
use serde::Serialize;
use utoipa::ToSchema;

use crate::index::record_etag;
use crate::model::{Review, Status, StoredVersion};
use crate::routes::conditional::etag_value;

/// A version record.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionRecord {
    /// Server name.
    pub server: String,
    /// Version.
    pub version: String,
    /// `sha256:<hex>` of the RFC 8785 canonical document.
    pub digest: String,
    /// Trust status.
    pub status: Status,
    /// The published document (server card with its `signature`), in its
    /// canonical form, passed through without re-parsing.
    #[schema(value_type = Object)]
    pub card: Box<serde_json::value::RawValue>,
    /// Publisher (token `sub`).
    pub published_by: String,
    /// When it was published.
    #[schema(value_type = String, format = DateTime)]
    pub published_at: Timestamp,
    /// When the status last changed.
    #[schema(value_type = String, format = DateTime)]
    pub status_changed_at: Timestamp,
    /// Note or reason of the last status change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_reason: Option<String>,
    /// Who approved it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    /// When it was approved.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub approved_at: Option<Timestamp>,
    /// Review history, oldest first.
    pub reviews: Vec<Review>,
}

pub(crate) fn record(
    stored: &StoredVersion,
    reviews: Vec<Review>,
) -> Result<VersionRecord, ApiError> {
    let card = serde_json::value::RawValue::from_string(stored.document.clone()).map_err(|e| {
        tracing::error!(error = %e, "stored document is not JSON");
        ApiError::internal()
    })?;
    let m = &stored.meta;
    Ok(VersionRecord {
        server: stored.server.clone(),
        version: m.version.clone(),
        digest: m.digest.clone(),
        status: m.status.status,
        card,
        published_by: m.published_by.clone(),
        published_at: m.published_at,
        status_changed_at: m.status.changed_at,
        status_reason: m.status.reason.clone(),
        approved_by: m.status.approved_by.clone(),
        approved_at: m.status.approved_at,
        reviews,
    })
}

/// The record as a `200` answer with its `ETag`.
pub(crate) fn record_response(
    stored: &StoredVersion,
    reviews: Vec<Review>,
) -> Result<Response, ApiError> {
    let tag = record_etag(&stored.meta);
    let mut resp = Json(record(stored, reviews)?).into_response();
    resp.headers_mut().insert(header::ETAG, etag_value(&tag));
    Ok(resp)
}
