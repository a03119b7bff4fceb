//! Rows of `servers`, `versions`, `version_status`, `version_reviews` and
//! `tenant_keys`.

use pinfold_core::ids::Timestamp;
use pinfold_registry::RegistryStoreError;
use pinfold_registry::model::{
    Decision, ListedVersion, Review, ServerRow, Status, StatusRow, StoredKey, StoredVersion,
    VersionMeta,
};

/// A version with its status, without the document: `version, digest,
/// published_by, published_at` of `versions` and `status, revision,
/// status_changed_at, status_reason, approved_by, approved_at` of
/// `version_status`.
#[derive(Debug, sqlx::FromRow)]
pub struct VersionMetaRow {
    /// Exact version.
    pub version: String,
    /// `sha256:<hex>`.
    pub digest: String,
    /// Token `sub`.
    pub published_by: String,
    /// Milliseconds since the epoch.
    pub published_at: i64,
    /// Status spelling.
    pub status: String,
    /// Status revision.
    pub revision: i64,
    /// Milliseconds since the epoch.
    pub status_changed_at: i64,
    /// Note or reason.
    pub status_reason: Option<String>,
    /// Approver.
    pub approved_by: Option<String>,
    /// Milliseconds since the epoch.
    pub approved_at: Option<i64>,
}

impl TryFrom<VersionMetaRow> for VersionMeta {
    type Error = RegistryStoreError;
    fn try_from(r: VersionMetaRow) -> Result<Self, RegistryStoreError> {
        Ok(VersionMeta {
            status: StatusRow {
                status: Status::parse(&r.status).ok_or_else(|| {
                    RegistryStoreError::Other(format!("stored status {}", r.status))
                })?,
                revision: r.revision,
                changed_at: Timestamp::from_millis(r.status_changed_at),
                reason: r.status_reason,
                approved_by: r.approved_by,
                approved_at: r.approved_at.map(Timestamp::from_millis),
            },
            version: r.version,
            digest: r.digest,
            published_by: r.published_by,
            published_at: Timestamp::from_millis(r.published_at),
        })
    }
}

/// A version with its document: the server's `display_name`, `document`,
/// and the [`VersionMetaRow`] columns.
#[derive(Debug, sqlx::FromRow)]
pub struct VersionRow {
    /// Display spelling of the server name.
    pub display_name: String,
    /// Canonical JSON.
    pub document: String,
    /// The rest.
    #[sqlx(flatten)]
    pub meta: VersionMetaRow,
}

impl TryFrom<VersionRow> for StoredVersion {
    type Error = RegistryStoreError;
    fn try_from(r: VersionRow) -> Result<Self, RegistryStoreError> {
        Ok(StoredVersion {
            server: r.display_name,
            document: r.document,
            meta: r.meta.try_into()?,
        })
    }
}

/// A version with its document and its server key: `server_key` (the
/// version's `server` column) and the [`VersionRow`] columns.
#[derive(Debug, sqlx::FromRow)]
pub struct KeyedVersionRow {
    /// Server key.
    pub server_key: String,
    /// The version.
    #[sqlx(flatten)]
    pub version: VersionRow,
}

impl TryFrom<KeyedVersionRow> for (String, StoredVersion) {
    type Error = RegistryStoreError;
    fn try_from(r: KeyedVersionRow) -> Result<Self, RegistryStoreError> {
        Ok((r.server_key, r.version.try_into()?))
    }
}

/// A version without its document, with its server's key and display
/// name: `server_key`, `display_name` and the [`VersionMetaRow`] columns.
#[derive(Debug, sqlx::FromRow)]
pub struct ListedVersionRow {
    /// Server key.
    pub server_key: String,
    /// Display spelling of the server name.
    pub display_name: String,
    /// The version.
    #[sqlx(flatten)]
    pub meta: VersionMetaRow,
}

impl TryFrom<ListedVersionRow> for ListedVersion {
    type Error = RegistryStoreError;
    fn try_from(r: ListedVersionRow) -> Result<Self, RegistryStoreError> {
        Ok(ListedVersion {
            key: r.server_key,
            server: r.display_name,
            meta: r.meta.try_into()?,
        })
    }
}

/// A version with its document and reviews: the [`VersionRow`] columns and
/// `reviews`, the version's `version_reviews` rows (oldest first) as a JSON
/// array of objects with the [`ReviewRow`] fields.
#[derive(Debug, sqlx::FromRow)]
pub struct VersionRecordRow {
    /// The version.
    #[sqlx(flatten)]
    pub version: VersionRow,
    /// JSON array of reviews.
    pub reviews: String,
}

/// One element of [`VersionRecordRow::reviews`].
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ReviewJson {
    decision: String,
    note: Option<String>,
    reviewer: String,
    at: i64,
}

impl TryFrom<VersionRecordRow> for (StoredVersion, Vec<Review>) {
    type Error = RegistryStoreError;
    fn try_from(r: VersionRecordRow) -> Result<Self, RegistryStoreError> {
        let reviews: Vec<ReviewJson> = serde_json::from_str(&r.reviews)
            .map_err(|e| RegistryStoreError::Other(format!("stored reviews: {e}")))?;
        let reviews = reviews
            .into_iter()
            .map(|j| {
                Review::try_from(ReviewRow {
                    decision: j.decision,
                    note: j.note,
                    reviewer: j.reviewer,
                    at: j.at,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok((r.version.try_into()?, reviews))
    }
}

/// A server with what its versions say: `name, display_name, created_at`
/// of `servers`, and `title, description` (of the newest version),
/// `updated_at` (newest publication, none without versions),
/// `version_count`.
#[derive(Debug, sqlx::FromRow)]
pub struct ServerSummaryRow {
    /// Server key.
    pub name: String,
    /// Display spelling.
    pub display_name: String,
    /// Milliseconds since the epoch.
    pub created_at: i64,
    /// Newest version's title.
    pub title: Option<String>,
    /// Newest version's description.
    pub description: Option<String>,
    /// Milliseconds since the epoch of the newest publication.
    pub updated_at: Option<i64>,
    /// Number of versions.
    pub version_count: i64,
}

impl From<ServerSummaryRow> for (String, ServerRow) {
    /// The server key and the server.
    fn from(r: ServerSummaryRow) -> Self {
        (
            r.name,
            ServerRow {
                name: r.display_name,
                title: r.title,
                description: r.description,
                created_at: Timestamp::from_millis(r.created_at),
                updated_at: Timestamp::from_millis(r.updated_at.unwrap_or(r.created_at)),
                version_count: r.version_count,
            },
        )
    }
}

/// `decision, note, reviewer, at` of `version_reviews`.
#[derive(Debug, sqlx::FromRow)]
pub struct ReviewRow {
    /// `approve` or `reject`.
    pub decision: String,
    /// Note.
    pub note: Option<String>,
    /// Token `sub`.
    pub reviewer: String,
    /// Milliseconds since the epoch.
    pub at: i64,
}

impl TryFrom<ReviewRow> for Review {
    type Error = RegistryStoreError;
    fn try_from(r: ReviewRow) -> Result<Self, RegistryStoreError> {
        Ok(Review {
            decision: Decision::parse(&r.decision).ok_or_else(|| {
                RegistryStoreError::Other(format!("stored decision {}", r.decision))
            })?,
            note: r.note,
            reviewer: r.reviewer,
            at: Timestamp::from_millis(r.at),
        })
    }
}

/// `kid, public_key, private_sealed, created_at` of `tenant_keys`.
#[derive(Debug, sqlx::FromRow)]
pub struct KeyRow {
    /// Key id.
    pub kid: String,
    /// Public key, base64url.
    pub public_key: String,
    /// Sealed private key.
    pub private_sealed: String,
    /// Milliseconds since the epoch.
    pub created_at: i64,
}

impl From<KeyRow> for StoredKey {
    fn from(r: KeyRow) -> Self {
        StoredKey {
            kid: r.kid,
            public_key: r.public_key,
            private_sealed: r.private_sealed,
            created_at: Timestamp::from_millis(r.created_at),
        }
    }
}

#[cfg(test)]
mod tests {
    use pinfold_registry::model::{ServerRow, Status, VersionMeta};

    use super::*;

    #[test]
    fn corrupt_rows_are_errors_not_panics() {
        let meta = VersionMetaRow {
            version: "1.0.0".into(),
            digest: "sha256:00".into(),
            published_by: "p".into(),
            published_at: 1,
            status: "unknown".into(),
            revision: 1,
            status_changed_at: 1,
            status_reason: None,
            approved_by: None,
            approved_at: None,
        };
        assert!(VersionMeta::try_from(meta).is_err());
    }

    #[test]
    fn a_version_row_keeps_every_status_column() {
        let meta = VersionMeta::try_from(VersionMetaRow {
            version: "1.0.0".into(),
            digest: "sha256:00".into(),
            published_by: "p".into(),
            published_at: 1,
            status: "approved".into(),
            revision: 2,
            status_changed_at: 3,
            status_reason: Some("ok".into()),
            approved_by: Some("r".into()),
            approved_at: Some(3),
        })
        .unwrap();
        assert_eq!(meta.status.status, Status::Approved);
        assert_eq!(meta.status.revision, 2);
        assert_eq!(meta.status.changed_at.millis(), 3);
        assert_eq!(meta.status.reason.as_deref(), Some("ok"));
        assert_eq!(meta.status.approved_by.as_deref(), Some("r"));
        assert_eq!(meta.status.approved_at.map(|t| t.millis()), Some(3));
    }

    #[test]
    fn a_server_without_versions_was_last_updated_when_created() {
        let (key, row): (String, ServerRow) = ServerSummaryRow {
            name: "io.acme/files".into(),
            display_name: "io.Acme/files".into(),
            created_at: 10,
            title: None,
            description: None,
            updated_at: None,
            version_count: 0,
        }
        .into();
        assert_eq!(key, "io.acme/files");
        assert_eq!(row.name, "io.Acme/files");
        assert_eq!(row.updated_at.millis(), 10);
    }
}
