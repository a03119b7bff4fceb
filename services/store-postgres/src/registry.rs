//! The registry store on PostgreSQL.

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

use crate::notify::send_notifications;
use crate::store::PgStore;
use crate::tenancy::insert_audit;

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

const SELECT_DISPLAY: &str = "SELECT display_name FROM servers WHERE tenant_id = $1 AND name = $2";

/// A whole publish in one statement (see `publish`). Answers whether the
/// tenant exists, whether the version was inserted, and the server's
/// display name as this statement's snapshot sees it.
const PUBLISH: &str = "WITH t AS (SELECT 1 FROM tenants WHERE id = $1),
    s AS (
        INSERT INTO servers (tenant_id, name, display_name, created_at)
        SELECT $1, $2, $3, $4 FROM t
        ON CONFLICT (tenant_id, name) DO NOTHING
        RETURNING display_name),
    v AS (
        INSERT INTO versions (tenant_id, server, version, digest, document, title, description, published_by, published_at)
        SELECT $1, $2, $5, $6, $7, $8, $9, $10, $4 FROM t
        ON CONFLICT (tenant_id, server, version) DO NOTHING
        RETURNING version),
    st AS (
        INSERT INTO version_status (tenant_id, server, version, status, revision, status_changed_at, status_reason, approved_by, approved_at)
        SELECT $1, $2, v.version, $11, $12, $13, $14, $15, $16 FROM v),
    a AS (
        INSERT INTO audit_events (tenant_id, at, actor, kind, server, version, data)
        SELECT $1, $17, $18, $19, $20, $21, $22::jsonb FROM v)
    SELECT EXISTS (SELECT 1 FROM t),
        EXISTS (SELECT 1 FROM v),
        coalesce((SELECT display_name FROM s),
            (SELECT display_name FROM servers WHERE tenant_id = $1 AND name = $2))";

/// `TenantNotFound` unless the tenant exists.
async fn require_tenant(
    conn: &mut sqlx::PgConnection,
    tenant: &TenantId,
) -> Result<(), RegistryStoreError> {
    let exists: Option<i64> = sqlx::query_scalar("SELECT 1::bigint FROM tenants WHERE id = $1")
        .bind(tenant.as_str())
        .fetch_optional(conn)
        .await
        .map_err(registry_error)?;
    exists.map(|_| ()).ok_or(RegistryStoreError::TenantNotFound)
}

async fn load_version(
    conn: &mut sqlx::PgConnection,
    tenant: &TenantId,
    server_key: &str,
    version: &str,
) -> Result<Option<StoredVersion>, RegistryStoreError> {
    let row = sqlx::query_as::<_, VersionRow>(sqlx::AssertSqlSafe(format!(
        "SELECT s.display_name, v.document, {META_COLUMNS}
         FROM versions v
         JOIN version_status st ON st.tenant_id = v.tenant_id AND st.server = v.server AND st.version = v.version
         JOIN servers s ON s.tenant_id = v.tenant_id AND s.name = v.server
         WHERE v.tenant_id = $1 AND v.server = $2 AND v.version = $3"
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
impl RegistryStore for PgStore {
    async fn publish(
        &self,
        tenant: &TenantId,
        v: &NewVersion<'_>,
    ) -> Result<PublishOutcome, RegistryStoreError> {
        // One statement, so one round trip and its own transaction: the
        // server row (first publish only), the version, its first status row
        // and the audit event, written only when the tenant exists and the
        // version is new. Foreign keys are checked at the end of the
        // statement, so the version may reference the server row inserted
        // beside it. A concurrent publish of the same version waits on the
        // version's key for the other statement; exactly one insert wins.
        let st = &v.meta.status;
        let a = &v.audit;
        let mut tx = self.tenant_tx(tenant).await.map_err(registry_error)?;
        let row: (bool, bool, Option<String>) = sqlx::query_as(PUBLISH)
            .bind(tenant.as_str())
            .bind(v.server_key)
            .bind(v.server_display)
            .bind(v.meta.published_at.millis())
            .bind(&v.meta.version)
            .bind(&v.meta.digest)
            .bind(v.document)
            .bind(v.title)
            .bind(v.description)
            .bind(&v.meta.published_by)
            .bind(st.status.as_str())
            .bind(st.revision)
            .bind(st.changed_at.millis())
            .bind(&st.reason)
            .bind(&st.approved_by)
            .bind(st.approved_at.map(|t| t.millis()))
            .bind(a.at.millis())
            .bind(&a.actor)
            .bind(&a.kind)
            .bind(&a.server)
            .bind(&a.version)
            .bind(a.data.to_string())
            .fetch_one(&mut *tx)
            .await
            .map_err(registry_error)?;
        let (tenant_exists, inserted, display) = row;
        if !tenant_exists {
            return Err(RegistryStoreError::TenantNotFound);
        }
        if !inserted {
            // A later statement of the same (read committed) transaction
            // sees the version the other publish committed.
            let existing = load_version(&mut tx, tenant, v.server_key, &v.meta.version)
                .await?
                .ok_or_else(|| RegistryStoreError::Other("conflicting version vanished".into()))?;
            return Ok(if existing.meta.digest == v.meta.digest {
                PublishOutcome::Existing(existing)
            } else {
                PublishOutcome::Conflict {
                    existing_digest: existing.meta.digest,
                }
            });
        }
        // The statement's snapshot misses a server row another publish
        // committed while this one waited on it; read it now.
        let display = match display {
            Some(d) => d,
            None => sqlx::query_scalar(SELECT_DISPLAY)
                .bind(tenant.as_str())
                .bind(v.server_key)
                .fetch_one(&mut *tx)
                .await
                .map_err(registry_error)?,
        };
        tx.commit().await.map_err(registry_error)?;
        self.notify(tenant, v.server_key).await;
        // Built from what was just written: no need to read 64 KiB back.
        Ok(PublishOutcome::Created(StoredVersion {
            server: display,
            document: v.document.to_owned(),
            meta: v.meta.clone(),
        }))
    }

    async fn version(
        &self,
        tenant: &TenantId,
        server_key: &str,
        version: &str,
    ) -> Result<Option<StoredVersion>, RegistryStoreError> {
        let mut tx = self.tenant_tx(tenant).await.map_err(registry_error)?;
        load_version(&mut tx, tenant, server_key, version).await
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
             COALESCE((SELECT json_agg(json_build_object('decision', r.decision, 'note', r.note, 'reviewer', r.reviewer, 'at', r.at) ORDER BY r.id)
                FROM version_reviews r
                WHERE r.tenant_id = v.tenant_id AND r.server = v.server AND r.version = v.version), '[]')::text AS reviews
             FROM versions v
             JOIN version_status st ON st.tenant_id = v.tenant_id AND st.server = v.server AND st.version = v.version
             JOIN servers s ON s.tenant_id = v.tenant_id AND s.name = v.server
             WHERE v.tenant_id = $1 AND v.server = $2 AND v.version = $3"
        )))
        .bind(tenant.as_str())
        .bind(server_key)
        .bind(version)
        .fetch_optional(&mut *self.tenant_tx(tenant).await.map_err(registry_error)?)
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
             WHERE v.tenant_id = $1 AND v.server = $2"
        )))
        .bind(tenant.as_str())
        .bind(server_key)
        .fetch_all(&mut *self.tenant_tx(tenant).await.map_err(registry_error)?)
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
             FROM servers s WHERE s.tenant_id = $1 AND s.name = $2"
        )))
        .bind(tenant.as_str())
        .bind(server_key)
        .fetch_optional(&mut *self.tenant_tx(tenant).await.map_err(registry_error)?)
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
             WHERE s.tenant_id = $1 AND s.name > $2
               AND ($3::text IS NULL OR lower(s.name) LIKE $3 ESCAPE '\\'
                    OR EXISTS (SELECT 1 FROM versions v WHERE v.tenant_id = s.tenant_id AND v.server = s.name
                        AND (lower(coalesce(v.title, '')) LIKE $3 ESCAPE '\\'
                             OR lower(coalesce(v.description, '')) LIKE $3 ESCAPE '\\')))
               AND ($4::text IS NULL OR EXISTS (SELECT 1 FROM version_status vs
                    WHERE vs.tenant_id = s.tenant_id AND vs.server = s.name AND vs.status = $4))
             ORDER BY s.name LIMIT $5"
        )))
        .bind(tenant.as_str())
        .bind(q.after.as_deref().unwrap_or(""))
        .bind(pattern.as_deref())
        .bind(q.status.map(Status::as_str))
        .bind(i64::from(q.limit))
        .fetch_all(&mut *self.tenant_tx(tenant).await.map_err(registry_error)?)
        .await
        .map_err(registry_error)?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn change_status(
        &self,
        tenant: &TenantId,
        c: &StatusChange<'_>,
    ) -> Result<(), RegistryStoreError> {
        let mut tx = self.tenant_tx(tenant).await.map_err(registry_error)?;
        let done = sqlx::query(
            "UPDATE version_status
             SET status = $1, revision = revision + 1, status_changed_at = $2, status_reason = $3,
                 approved_by = coalesce($4, approved_by), approved_at = coalesce($5, approved_at)
             WHERE tenant_id = $6 AND server = $7 AND version = $8 AND revision = $9",
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
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
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
        self.notify(tenant, c.server_key).await;
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
             WHERE tenant_id = $1 AND server = $2 AND version = $3 ORDER BY id",
        )
        .bind(tenant.as_str())
        .bind(server_key)
        .bind(version)
        .fetch_all(&mut *self.tenant_tx(tenant).await.map_err(registry_error)?)
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
        // Keyset pagination on the primary key (tenant, server, version);
        // the database's collation orders both the keyset and the page.
        let rows = sqlx::query_as::<_, ListedVersionRow>(sqlx::AssertSqlSafe(format!(
            "SELECT v.server AS server_key, s.display_name, {META_COLUMNS}
             FROM versions v
             JOIN version_status st ON st.tenant_id = v.tenant_id AND st.server = v.server AND st.version = v.version
             JOIN servers s ON s.tenant_id = v.tenant_id AND s.name = v.server
             WHERE v.tenant_id = $1 AND (v.tenant_id, v.server, v.version) > ($1, $2, $3)
               AND st.approved_at IS NOT NULL
               AND ($4 OR st.status <> 'revoked')
               AND ($5::text IS NULL OR v.server = $5)
               AND ($6::text IS NULL OR v.server LIKE $6 ESCAPE '\\')
               AND ($7::bigint IS NULL OR st.status_changed_at > $7)
               AND ($8::text IS NULL OR v.version = $8)
             ORDER BY v.server, v.version LIMIT $9"
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
        .fetch_all(&mut *self.tenant_tx(tenant).await.map_err(registry_error)?)
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
             WHERE tenant_id = $1 AND status = 'approved' AND server > $2
               AND ($3::text IS NULL OR server LIKE $3 ESCAPE '\\')
               AND ($4::bigint IS NULL OR status_changed_at > $4)
             ORDER BY server LIMIT $5",
        )
        .bind(tenant.as_str())
        .bind(after)
        .bind(pattern.as_deref())
        .bind(changed_after.map(|t| t.millis()))
        .bind(i64::from(limit))
        .fetch_all(&mut *self.tenant_tx(tenant).await.map_err(registry_error)?)
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
        let rows = sqlx::query_as::<_, ListedVersionRow>(sqlx::AssertSqlSafe(format!(
            "SELECT v.server AS server_key, s.display_name, {META_COLUMNS}
             FROM versions v
             JOIN version_status st ON st.tenant_id = v.tenant_id AND st.server = v.server AND st.version = v.version
             JOIN servers s ON s.tenant_id = v.tenant_id AND s.name = v.server
             WHERE v.tenant_id = $1 AND st.status = 'approved' AND v.server = ANY($2::text[])"
        )))
        .bind(tenant.as_str())
        .bind(servers)
        .fetch_all(&mut *self.tenant_tx(tenant).await.map_err(registry_error)?)
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
        let (servers, versions): (Vec<&str>, Vec<&str>) =
            keys.iter().map(|(s, v)| (s.as_str(), v.as_str())).unzip();
        let rows = sqlx::query_as::<_, KeyedVersionRow>(sqlx::AssertSqlSafe(format!(
            "SELECT v.server AS server_key, s.display_name, v.document, {META_COLUMNS}
             FROM versions v
             JOIN version_status st ON st.tenant_id = v.tenant_id AND st.server = v.server AND st.version = v.version
             JOIN servers s ON s.tenant_id = v.tenant_id AND s.name = v.server
             WHERE v.tenant_id = $1
               AND (v.server, v.version) IN (SELECT * FROM unnest($2::text[], $3::text[]))"
        )))
        .bind(tenant.as_str())
        .bind(servers)
        .bind(versions)
        .fetch_all(&mut *self.tenant_tx(tenant).await.map_err(registry_error)?)
        .await
        .map_err(registry_error)?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn tenant_key(&self, tenant: &TenantId) -> Result<Option<StoredKey>, RegistryStoreError> {
        let row = sqlx::query_as::<_, KeyRow>("SELECT kid, public_key, private_sealed, created_at FROM tenant_keys WHERE tenant_id = $1")
            .bind(tenant.as_str())
            .fetch_optional(&mut *self.tenant_tx(tenant).await.map_err(registry_error)?)
            .await
            .map_err(registry_error)?;
        Ok(row.map(StoredKey::from))
    }

    async fn insert_tenant_key(
        &self,
        tenant: &TenantId,
        key: &StoredKey,
    ) -> Result<StoredKey, RegistryStoreError> {
        let mut tx = self.tenant_tx(tenant).await.map_err(registry_error)?;
        require_tenant(&mut tx, tenant).await?;
        sqlx::query(
            "INSERT INTO tenant_keys (tenant_id, kid, public_key, private_sealed, created_at)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant_id) DO NOTHING",
        )
        .bind(tenant.as_str())
        .bind(&key.kid)
        .bind(&key.public_key)
        .bind(&key.private_sealed)
        .bind(key.created_at.millis())
        .execute(&mut *tx)
        .await
        .map_err(registry_error)?;
        let row = sqlx::query_as::<_, KeyRow>("SELECT kid, public_key, private_sealed, created_at FROM tenant_keys WHERE tenant_id = $1")
            .bind(tenant.as_str())
            .fetch_one(&mut *tx)
            .await
            .map_err(registry_error)?;
        tx.commit().await.map_err(registry_error)?;
        Ok(row.into())
    }
}

impl PgStore {
    /// Announces a committed change to `server_key` (`tenant<TAB>server`)
    /// and returns once it is sent.
    ///
    /// Sent *after* the write commits, outside its transaction: a NOTIFY
    /// inside the write transaction would hold PostgreSQL's global notify
    /// lock through the commit's WAL flush and serialise every publish. The
    /// announcements of concurrent writes are coalesced by [`Notifier`](crate::notify::Notifier). If
    /// one is lost (crash between commit and notify, or a failure here),
    /// other replicas' ETag indexes catch up through their TTL.
    async fn notify(&self, tenant: &TenantId, server_key: &str) {
        let payload = format!("{tenant}\t{server_key}");
        if let Err(payload) = self.notifier.send(payload).await {
            // The batching task is gone (its runtime ended): send alone.
            send_notifications(&self.pool, vec![payload]).await;
        }
    }
}
