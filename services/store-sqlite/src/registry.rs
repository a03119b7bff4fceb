//! The registry store on SQLite.

use async_trait::async_trait;
use pinfold_core::ids::{TenantId, Timestamp};
use pinfold_registry::model::{
    ListedVersion, NewVersion, PublishOutcome, Review, ServerRow, Status, StatusChange, StoredKey,
    StoredVersion, VersionMeta,
};
use pinfold_registry::store::{ServerQuery, SubregistryQuery, like_pattern};
use pinfold_registry::{RegistryStore, RegistryStoreError};
use pinfold_store_rows::{
    KeyRow, KeyedVersionRow, ListedVersionRow, ReviewRow, ServerSummaryRow, VersionMetaRow,
    VersionRecordRow, VersionRow, registry_error, registry_error_from,
};

use crate::{SqliteStore, insert_audit};

const META_COLUMNS: &str = "v.version, v.digest, v.published_by, v.published_at, \
     st.status, st.revision, st.status_changed_at, st.status_reason, st.approved_by, st.approved_at";

/// Server columns: title and description come from the newest version,
/// so the server row itself is never updated.
const SERVER_COLUMNS: &str = "s.name, s.display_name, s.created_at,
    (SELECT v.title FROM versions v WHERE v.tenant_id = s.tenant_id AND v.server = s.name
        ORDER BY v.published_at DESC, v.version DESC LIMIT 1) AS title,
    (SELECT v.description FROM versions v WHERE v.tenant_id = s.tenant_id AND v.server = s.name
        ORDER BY v.published_at DESC, v.version DESC LIMIT 1) AS description,
    (SELECT MAX(v.published_at) FROM versions v WHERE v.tenant_id = s.tenant_id AND v.server = s.name) AS updated_at,
    (SELECT COUNT(*) FROM versions v WHERE v.tenant_id = s.tenant_id AND v.server = s.name) AS version_count";

const SELECT_DISPLAY: &str = "SELECT display_name FROM servers WHERE tenant_id = ? AND name = ?";

/// `TenantNotFound` unless the tenant exists.
async fn require_tenant(
    conn: &mut sqlx::SqliteConnection,
    tenant: &TenantId,
) -> Result<(), RegistryStoreError> {
    let exists: Option<i64> = sqlx::query_scalar("SELECT 1 FROM tenants WHERE id = ?")
        .bind(tenant.as_str())
        .fetch_optional(conn)
        .await
        .map_err(registry_error)?;
    exists.map(|_| ()).ok_or(RegistryStoreError::TenantNotFound)
}

async fn load_version(
    conn: &mut sqlx::SqliteConnection,
    tenant: &TenantId,
    server_key: &str,
    version: &str,
) -> Result<Option<StoredVersion>, RegistryStoreError> {
    let row = sqlx::query_as::<_, VersionRow>(sqlx::AssertSqlSafe(format!(
        "SELECT s.display_name, v.document, {META_COLUMNS}
         FROM versions v
         JOIN version_status st ON st.tenant_id = v.tenant_id AND st.server = v.server AND st.version = v.version
         JOIN servers s ON s.tenant_id = v.tenant_id AND s.name = v.server
         WHERE v.tenant_id = ? AND v.server = ? AND v.version = ?"
    )))
    .bind(tenant.as_str())
    .bind(server_key)
    .bind(version)
    .fetch_optional(&mut *conn)
    .await
    .map_err(registry_error)?;
    row.map(StoredVersion::try_from).transpose()
}

#[async_trait]
impl RegistryStore for SqliteStore {
    async fn publish(
        &self,
        tenant: &TenantId,
        v: &NewVersion<'_>,
    ) -> Result<PublishOutcome, RegistryStoreError> {
        let mut tx = self.write_tx().await.map_err(registry_error)?;
        require_tenant(&mut tx, tenant).await?;
        if let Some(existing) = load_version(&mut tx, tenant, v.server_key, &v.meta.version).await?
        {
            return Ok(if existing.meta.digest == v.meta.digest {
                PublishOutcome::Existing(existing)
            } else {
                PublishOutcome::Conflict {
                    existing_digest: existing.meta.digest,
                }
            });
        }
        sqlx::query(
            "INSERT INTO servers (tenant_id, name, display_name, created_at)
             VALUES (?, ?, ?, ?)
             ON CONFLICT (tenant_id, name) DO NOTHING",
        )
        .bind(tenant.as_str())
        .bind(v.server_key)
        .bind(v.server_display)
        .bind(v.meta.published_at.millis())
        .execute(&mut *tx)
        .await
        .map_err(registry_error)?;
        sqlx::query(
            "INSERT INTO versions (tenant_id, server, version, digest, document, title, description, published_by, published_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(tenant.as_str())
        .bind(v.server_key)
        .bind(&v.meta.version)
        .bind(&v.meta.digest)
        .bind(v.document)
        .bind(v.title)
        .bind(v.description)
        .bind(&v.meta.published_by)
        .bind(v.meta.published_at.millis())
        .execute(&mut *tx)
        .await
        .map_err(registry_error)?;
        let st = &v.meta.status;
        sqlx::query(
            "INSERT INTO version_status (tenant_id, server, version, status, revision, status_changed_at, status_reason, approved_by, approved_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(tenant.as_str())
        .bind(v.server_key)
        .bind(&v.meta.version)
        .bind(st.status.as_str())
        .bind(st.revision)
        .bind(st.changed_at.millis())
        .bind(&st.reason)
        .bind(&st.approved_by)
        .bind(st.approved_at.map(|t| t.millis()))
        .execute(&mut *tx)
        .await
        .map_err(registry_error)?;
        insert_audit(&mut tx, tenant, &v.audit)
            .await
            .map_err(registry_error_from)?;
        let display: String = sqlx::query_scalar(SELECT_DISPLAY)
            .bind(tenant.as_str())
            .bind(v.server_key)
            .fetch_one(&mut *tx)
            .await
            .map_err(registry_error)?;
        // Built from what was just written: no need to read 64 KiB back.
        let stored = StoredVersion {
            server: display,
            document: v.document.to_owned(),
            meta: v.meta.clone(),
        };
        tx.commit().await.map_err(registry_error)?;
        Ok(PublishOutcome::Created(stored))
    }

    async fn version(
        &self,
        tenant: &TenantId,
        server_key: &str,
        version: &str,
    ) -> Result<Option<StoredVersion>, RegistryStoreError> {
        let mut conn = self.pool.acquire().await.map_err(registry_error)?;
        load_version(&mut conn, tenant, server_key, version).await
    }

    async fn version_record(
        &self,
        tenant: &TenantId,
        server_key: &str,
        version: &str,
    ) -> Result<Option<(StoredVersion, Vec<Review>)>, RegistryStoreError> {
        // One statement (one round trip) for the document, its status and
        // its reviews, aggregated into a JSON array.
        let row = sqlx::query_as::<_, VersionRecordRow>(sqlx::AssertSqlSafe(format!(
            "SELECT s.display_name, v.document, {META_COLUMNS},
             (SELECT json_group_array(json_object('decision', r.decision, 'note', r.note, 'reviewer', r.reviewer, 'at', r.at) ORDER BY r.id)
                FROM version_reviews r
                WHERE r.tenant_id = v.tenant_id AND r.server = v.server AND r.version = v.version) AS reviews
             FROM versions v
             JOIN version_status st ON st.tenant_id = v.tenant_id AND st.server = v.server AND st.version = v.version
             JOIN servers s ON s.tenant_id = v.tenant_id AND s.name = v.server
             WHERE v.tenant_id = ? AND v.server = ? AND v.version = ?"
        )))
        .bind(tenant.as_str())
        .bind(server_key)
        .bind(version)
        .fetch_optional(&self.pool)
        .await
        .map_err(registry_error)?;
        row.map(TryInto::try_into).transpose()
    }

    async fn versions(
        &self,
        tenant: &TenantId,
        server_key: &str,
    ) -> Result<Vec<VersionMeta>, RegistryStoreError> {
        let rows = sqlx::query_as::<_, VersionMetaRow>(sqlx::AssertSqlSafe(format!(
            "SELECT {META_COLUMNS}
             FROM versions v
             JOIN version_status st ON st.tenant_id = v.tenant_id AND st.server = v.server AND st.version = v.version
             WHERE v.tenant_id = ? AND v.server = ?"
        )))
        .bind(tenant.as_str())
        .bind(server_key)
        .fetch_all(&self.pool)
        .await
        .map_err(registry_error)?;
        rows.into_iter().map(VersionMeta::try_from).collect()
    }

    async fn server(
        &self,
        tenant: &TenantId,
        server_key: &str,
    ) -> Result<Option<ServerRow>, RegistryStoreError> {
        let row = sqlx::query_as::<_, ServerSummaryRow>(sqlx::AssertSqlSafe(format!(
            "SELECT {SERVER_COLUMNS}
             FROM servers s WHERE s.tenant_id = ? AND s.name = ?"
        )))
        .bind(tenant.as_str())
        .bind(server_key)
        .fetch_optional(&self.pool)
        .await
        .map_err(registry_error)?;
        Ok(row.map(|r| <(String, ServerRow)>::from(r).1))
    }

    async fn servers(
        &self,
        tenant: &TenantId,
        q: &ServerQuery,
    ) -> Result<Vec<(String, ServerRow)>, RegistryStoreError> {
        let pattern = q.q.as_deref().map(like_pattern);
        let rows = sqlx::query_as::<_, ServerSummaryRow>(
            sqlx::AssertSqlSafe(format!("SELECT {SERVER_COLUMNS}
             FROM servers s
             WHERE s.tenant_id = ?1 AND s.name > ?2
               AND (?3 IS NULL OR lower(s.name) LIKE ?3 ESCAPE '\\'
                    OR EXISTS (SELECT 1 FROM versions v WHERE v.tenant_id = s.tenant_id AND v.server = s.name
                        AND (lower(coalesce(v.title, '')) LIKE ?3 ESCAPE '\\'
                             OR lower(coalesce(v.description, '')) LIKE ?3 ESCAPE '\\')))
               AND (?4 IS NULL OR EXISTS (SELECT 1 FROM version_status vs
                    WHERE vs.tenant_id = s.tenant_id AND vs.server = s.name AND vs.status = ?4))
             ORDER BY s.name LIMIT ?5"
        )))
        .bind(tenant.as_str())
        .bind(q.after.as_deref().unwrap_or(""))
        .bind(pattern.as_deref())
        .bind(q.status.map(Status::as_str))
        .bind(i64::from(q.limit))
        .fetch_all(&self.pool)
        .await
        .map_err(registry_error)?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn change_status(
        &self,
        tenant: &TenantId,
        c: &StatusChange<'_>,
    ) -> Result<(), RegistryStoreError> {
        let mut tx = self.write_tx().await.map_err(registry_error)?;
        let done = sqlx::query(
            "UPDATE version_status
             SET status = ?, revision = revision + 1, status_changed_at = ?, status_reason = ?,
                 approved_by = coalesce(?, approved_by), approved_at = coalesce(?, approved_at)
             WHERE tenant_id = ? AND server = ? AND version = ? AND revision = ?",
        )
        .bind(c.status.as_str())
        .bind(c.at.millis())
        .bind(c.reason)
        .bind(c.approved_by)
        .bind(c.approved_by.map(|_| c.at.millis()))
        .bind(tenant.as_str())
        .bind(c.server_key)
        .bind(c.version)
        .bind(c.expected_revision)
        .execute(&mut *tx)
        .await
        .map_err(registry_error)?;
        if done.rows_affected() == 0 {
            return Err(RegistryStoreError::Stale);
        }
        if let Some(r) = &c.review {
            sqlx::query(
                "INSERT INTO version_reviews (tenant_id, server, version, decision, note, reviewer, at)
                 VALUES (?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(tenant.as_str())
            .bind(c.server_key)
            .bind(c.version)
            .bind(r.decision.as_str())
            .bind(&r.note)
            .bind(&r.reviewer)
            .bind(r.at.millis())
            .execute(&mut *tx)
            .await
            .map_err(registry_error)?;
        }
        insert_audit(&mut tx, tenant, &c.audit)
            .await
            .map_err(registry_error_from)?;
        tx.commit().await.map_err(registry_error)?;
        Ok(())
    }

    async fn reviews(
        &self,
        tenant: &TenantId,
        server_key: &str,
        version: &str,
    ) -> Result<Vec<Review>, RegistryStoreError> {
        let rows = sqlx::query_as::<_, ReviewRow>(
            "SELECT decision, note, reviewer, at FROM version_reviews
             WHERE tenant_id = ? AND server = ? AND version = ? ORDER BY id",
        )
        .bind(tenant.as_str())
        .bind(server_key)
        .bind(version)
        .fetch_all(&self.pool)
        .await
        .map_err(registry_error)?;
        rows.into_iter().map(Review::try_from).collect()
    }

    async fn subregistry_versions(
        &self,
        tenant: &TenantId,
        q: &SubregistryQuery,
    ) -> Result<Vec<ListedVersion>, RegistryStoreError> {
        let pattern = q.search.as_deref().map(like_pattern);
        let (after_server, after_version) = q
            .after
            .as_ref()
            .map_or(("", ""), |(s, v)| (s.as_str(), v.as_str()));
        // Keyset pagination on the primary key (tenant, server, version).
        let rows = sqlx::query_as::<_, ListedVersionRow>(sqlx::AssertSqlSafe(format!(
            "SELECT v.server AS server_key, s.display_name, {META_COLUMNS}
             FROM versions v
             JOIN version_status st ON st.tenant_id = v.tenant_id AND st.server = v.server AND st.version = v.version
             JOIN servers s ON s.tenant_id = v.tenant_id AND s.name = v.server
             WHERE v.tenant_id = ?1 AND (v.tenant_id, v.server, v.version) > (?1, ?2, ?3)
               AND st.approved_at IS NOT NULL
               AND (?4 OR st.status <> 'revoked')
               AND (?5 IS NULL OR v.server = ?5)
               AND (?6 IS NULL OR v.server LIKE ?6 ESCAPE '\\')
               AND (?7 IS NULL OR st.status_changed_at > ?7)
               AND (?8 IS NULL OR v.version = ?8)
             ORDER BY v.server, v.version LIMIT ?9"
        )))
        .bind(tenant.as_str())
        .bind(after_server)
        .bind(after_version)
        .bind(q.include_revoked)
        .bind(q.server.as_deref())
        .bind(pattern.as_deref())
        .bind(q.updated_since.map(|t| t.millis()))
        .bind(q.version.as_deref())
        .bind(i64::from(q.limit))
        .fetch_all(&self.pool)
        .await
        .map_err(registry_error)?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn servers_with_approved(
        &self,
        tenant: &TenantId,
        after: &str,
        search: Option<&str>,
        changed_after: Option<Timestamp>,
        limit: u32,
    ) -> Result<Vec<String>, RegistryStoreError> {
        let pattern = search.map(like_pattern);
        sqlx::query_scalar(
            "SELECT DISTINCT server FROM version_status
             WHERE tenant_id = ?1 AND status = 'approved' AND server > ?2
               AND (?3 IS NULL OR server LIKE ?3 ESCAPE '\\')
               AND (?4 IS NULL OR status_changed_at > ?4)
             ORDER BY server LIMIT ?5",
        )
        .bind(tenant.as_str())
        .bind(after)
        .bind(pattern.as_deref())
        .bind(changed_after.map(|t| t.millis()))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(registry_error)
    }

    async fn approved_versions(
        &self,
        tenant: &TenantId,
        servers: &[String],
    ) -> Result<Vec<ListedVersion>, RegistryStoreError> {
        if servers.is_empty() {
            return Ok(Vec::new());
        }
        let keys =
            serde_json::to_string(servers).map_err(|e| RegistryStoreError::Other(e.to_string()))?;
        let rows = sqlx::query_as::<_, ListedVersionRow>(sqlx::AssertSqlSafe(format!(
            "SELECT v.server AS server_key, s.display_name, {META_COLUMNS}
             FROM versions v
             JOIN version_status st ON st.tenant_id = v.tenant_id AND st.server = v.server AND st.version = v.version
             JOIN servers s ON s.tenant_id = v.tenant_id AND s.name = v.server
             WHERE v.tenant_id = ?1 AND st.status = 'approved'
               AND v.server IN (SELECT value FROM json_each(?2))"
        )))
        .bind(tenant.as_str())
        .bind(keys)
        .fetch_all(&self.pool)
        .await
        .map_err(registry_error)?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn versions_by_keys(
        &self,
        tenant: &TenantId,
        keys: &[(String, String)],
    ) -> Result<Vec<(String, StoredVersion)>, RegistryStoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let keys =
            serde_json::to_string(keys).map_err(|e| RegistryStoreError::Other(e.to_string()))?;
        let rows = sqlx::query_as::<_, KeyedVersionRow>(sqlx::AssertSqlSafe(format!(
            "SELECT v.server AS server_key, s.display_name, v.document, {META_COLUMNS}
             FROM versions v
             JOIN version_status st ON st.tenant_id = v.tenant_id AND st.server = v.server AND st.version = v.version
             JOIN servers s ON s.tenant_id = v.tenant_id AND s.name = v.server
             WHERE v.tenant_id = ?1
               AND (v.server, v.version) IN
                   (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?2))"
        )))
        .bind(tenant.as_str())
        .bind(keys)
        .fetch_all(&self.pool)
        .await
        .map_err(registry_error)?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn tenant_key(&self, tenant: &TenantId) -> Result<Option<StoredKey>, RegistryStoreError> {
        let row = sqlx::query_as::<_, KeyRow>("SELECT kid, public_key, private_sealed, created_at FROM tenant_keys WHERE tenant_id = ?")
            .bind(tenant.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(registry_error)?;
        Ok(row.map(StoredKey::from))
    }

    async fn insert_tenant_key(
        &self,
        tenant: &TenantId,
        key: &StoredKey,
    ) -> Result<StoredKey, RegistryStoreError> {
        let mut tx = self.write_tx().await.map_err(registry_error)?;
        require_tenant(&mut tx, tenant).await?;
        sqlx::query(
            "INSERT INTO tenant_keys (tenant_id, kid, public_key, private_sealed, created_at)
             VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant_id) DO NOTHING",
        )
        .bind(tenant.as_str())
        .bind(&key.kid)
        .bind(&key.public_key)
        .bind(&key.private_sealed)
        .bind(key.created_at.millis())
        .execute(&mut *tx)
        .await
        .map_err(registry_error)?;
        let row = sqlx::query_as::<_, KeyRow>("SELECT kid, public_key, private_sealed, created_at FROM tenant_keys WHERE tenant_id = ?")
            .bind(tenant.as_str())
            .fetch_one(&mut *tx)
            .await
            .map_err(registry_error)?;
        tx.commit().await.map_err(registry_error)?;
        Ok(row.into())
    }
}
