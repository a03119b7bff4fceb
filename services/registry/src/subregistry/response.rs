//! One version as the official API shows it: the `ServerResponse` and
//! `ServerList` wire shapes, the official registry's `_meta` and
//! Pinfold's own `_meta` key beside it.

use pinfold_core::ids::{TenantId, Timestamp};
use serde::Serialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;

use crate::model::{Status, VersionMeta};
use crate::policy::EnforcementModes;
use crate::subregistry::cache::DocView;
use crate::subregistry::listing::Entry;
use crate::subregistry::server_json::shorten;
use crate::subregistry::visibility::official_status;

/// The official registry's `_meta` key (its members are fixed).
pub const OFFICIAL_META: &str = "io.modelcontextprotocol.registry/official";

/// Pinfold's own `_meta` key: the reverse-DNS name of the project's
/// repository, as server names are built.
pub const PINFOLD_META: &str = "io.github.pinfold/pinfold";

/// Longest `statusMessage` the official schema allows.
pub const MAX_STATUS_MESSAGE_CHARS: usize = 500;

/// One server version as the official API shows it (`ServerResponse`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ServerResponse {
    /// The `server.json` document: the published card without its
    /// `signature`.
    #[schema(value_type = Object)]
    pub server: Box<RawValue>,
    /// Registry metadata.
    #[serde(rename = "_meta")]
    pub meta: ResponseMeta,
}

/// The `_meta` of a [`ServerResponse`].
#[derive(Debug, Serialize, ToSchema)]
pub struct ResponseMeta {
    /// The official registry's metadata.
    #[serde(rename = "io.modelcontextprotocol.registry/official")]
    pub official: OfficialMeta,
    /// Pinfold's own metadata.
    #[serde(rename = "io.github.pinfold/pinfold")]
    pub pinfold: PinfoldMeta,
}

/// The official registry's metadata of a version.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OfficialMeta {
    /// `active` (approved), `deprecated` or `deleted` (revoked).
    #[schema(value_type = String, example = "active")]
    pub status: &'static str,
    /// Why it was deprecated or deleted (at most 500 characters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// When the status last changed.
    #[schema(value_type = String, format = DateTime)]
    pub status_changed_at: Timestamp,
    /// When the version was published.
    #[schema(value_type = String, format = DateTime)]
    pub published_at: Timestamp,
    /// When anything about it last changed (its status: the content is
    /// immutable).
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: Timestamp,
    /// Whether `latest` resolves to this version.
    pub is_latest: bool,
}

/// Pinfold's metadata of a version (under `io.github.pinfold/pinfold`).
#[derive(Debug, Serialize, ToSchema)]
pub struct PinfoldMeta {
    /// `sha256:<hex>` of the RFC 8785 canonical published document.
    pub digest: String,
    /// The signed attestation of this version: a path-absolute URL,
    /// resolved against the subregistry's origin.
    pub attestation: String,
    /// The tenant's enforcement mode for this server.
    #[schema(value_type = String, example = "permissive")]
    pub mode: &'static str,
    /// Pinfold's own status (`approved`, `deprecated`, `revoked`).
    pub status: Status,
    /// The worst-case `tools/list`: every tool reduced to the least safe
    /// value of each hint (SEP-2091 "Reference Implementation").
    #[schema(value_type = Vec<Object>)]
    pub tools: Box<RawValue>,
}

/// A page in the official `ServerList` shape.
#[derive(Debug, Serialize, ToSchema)]
pub struct ServerList {
    /// The versions.
    pub servers: Vec<ServerResponse>,
    /// Pagination.
    pub metadata: ListMetadata,
}

/// Pagination metadata of a [`ServerList`].
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListMetadata {
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// How many entries this page holds.
    pub count: usize,
}

/// The official 404 body.
#[derive(Debug, Serialize, ToSchema)]
pub struct NotFoundBody {
    /// What was not found.
    pub error: String,
}

/// The attestation path of a version: the `/v1` attestation resource.
pub fn attestation_path(tenant: &TenantId, server: &str, version: &str) -> String {
    format!(
        "/v1/tenants/{tenant}/servers/{}/versions/{version}/attestation",
        server.replace('/', "%2F")
    )
}

/// The official metadata of a visible version.
pub fn official_meta(meta: &VersionMeta, is_latest: bool) -> OfficialMeta {
    let status = official_status(meta.status.status).unwrap_or("deleted");
    let status_message = match meta.status.status {
        Status::Deprecated | Status::Revoked => meta
            .status
            .reason
            .as_deref()
            .map(|r| shorten(r, MAX_STATUS_MESSAGE_CHARS)),
        _ => None,
    };
    OfficialMeta {
        status,
        status_message,
        status_changed_at: meta.status.changed_at,
        published_at: meta.published_at,
        // The content is immutable: the last change is a status change
        // (publication itself sets the first status).
        updated_at: meta.status.changed_at.max(meta.published_at),
        is_latest,
    }
}

/// One entry as the official API shows it, from its rendered view.
pub fn response(
    entry: &Entry,
    view: &DocView,
    tenant: &TenantId,
    modes: &EnforcementModes,
) -> ServerResponse {
    let meta = &entry.meta;
    ServerResponse {
        server: view.server.clone(),
        meta: ResponseMeta {
            official: official_meta(meta, entry.is_latest),
            pinfold: PinfoldMeta {
                digest: meta.digest.clone(),
                attestation: attestation_path(tenant, &entry.server, &meta.version),
                mode: modes.mode_for(&entry.key).as_str(),
                status: meta.status.status,
                tools: view.tools.clone(),
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subregistry::fixtures::meta;
    use serde_json::json;

    #[test]
    fn official_meta_carries_messages_only_for_deprecated_and_deleted() {
        let active = official_meta(&meta(Status::Approved, true, Some("looks fine")), true);
        assert_eq!(active.status, "active");
        assert_eq!(active.status_message, None);
        assert!(active.is_latest);
        assert_eq!(active.updated_at, Timestamp::from_millis(5_000));
        assert_eq!(active.published_at, Timestamp::from_millis(1_000));
        let long = "x".repeat(600);
        let gone = official_meta(&meta(Status::Revoked, true, Some(&long)), false);
        assert_eq!(gone.status, "deleted");
        let msg = gone.status_message.unwrap();
        assert_eq!(msg.chars().count(), MAX_STATUS_MESSAGE_CHARS);
        let body =
            serde_json::to_value(official_meta(&meta(Status::Deprecated, true, None), false))
                .unwrap();
        assert_eq!(
            body,
            json!({"status": "deprecated", "statusChangedAt": "1970-01-01T00:00:05.000Z",
                "publishedAt": "1970-01-01T00:00:01.000Z", "updatedAt": "1970-01-01T00:00:05.000Z",
                "isLatest": false})
        );
    }

    #[test]
    fn attestation_paths_encode_the_slash() {
        let t = TenantId::parse("acme").unwrap();
        assert_eq!(
            attestation_path(&t, "io.github.acme/files", "1.2.0"),
            "/v1/tenants/acme/servers/io.github.acme%2Ffiles/versions/1.2.0/attestation"
        );
    }
}
