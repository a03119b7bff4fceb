//! The registry store on SQLite.

use async_trait::async_trait;
use signet_core::ids::{TenantId, Timestamp};
use signet_registry::model::{
    Action, NewVersion, PublishOutcome, Review, ServerRow, Status, StatusChange, StatusRow,
    StoredKey, StoredVersion, VersionMeta,
};
use signet_registry::store::{ServerQuery, like_pattern};
use signet_registry::{RegistryStore, RegistryStoreError};
use signet_tenancy::StoreError;
use signet_tenancy::model::NewAuditEvent;
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use crate::{SqliteStore, err, insert_audit};

fn rerr(e: sqlx::Error) -> RegistryStoreError {
    match err(e) {
        StoreError::Unavailable(m) => RegistryStoreError::Unavailable(m),
        other => RegistryStoreError::Other(other.to_string()),
    }
}

fn aerr(e: StoreError) -> RegistryStoreError {
    match e {
        StoreError::Unavailable(m) => RegistryStoreError::Unavailable(m),
        other => RegistryStoreError::Other(other.to_string()),
    }
}

const META_COLUMNS: &str = "v.version, v.digest, v.published_by, v.published_at, \
     st.status, st.revision, st.status_changed_at, st.status_reason, st.approved_by, st.approved_at";

fn meta_from_row(r: &SqliteRow) -> Result<VersionMeta, RegistryStoreError> {
    let status: String = r.try_get("status").map_err(rerr)?;
    Ok(VersionMeta {
        version: r.try_get("version").map_err(rerr)?,
        digest: r.try_get("digest").map_err(rerr)?,
        published_by: r.try_get("published_by").map_err(rerr)?,
        published_at: Timestamp::from_millis(r.try_get("published_at").map_err(rerr)?),
        status: StatusRow {
            status: Status::parse(&status)
                .ok_or_else(|| RegistryStoreError::Other(format!("stored status {status}")))?,
            revision: r.try_get("revision").map_err(rerr)?,
            changed_at: Timestamp::from_millis(r.try_get("status_changed_at").map_err(rerr)?),
            reason: r.try_get("status_reason").map_err(rerr)?,
            approved_by: r.try_get("approved_by").map_err(rerr)?,
            approved_at: r
                .try_get::<Option<i64>, _>("approved_at")
                .map_err(rerr)?
                .map(Timestamp::from_millis),
        },
    })
}

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

async fn load_version(
    conn: &mut sqlx::SqliteConnection,
    tenant: &TenantId,
    server_key: &str,
    version: &str,
) -> Result<Option<StoredVersion>, RegistryStoreError> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
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
    .map_err(rerr)?;
    row.map(|r| {
        Ok(StoredVersion {
            server: r.try_get("display_name").map_err(rerr)?,
            document: r.try_get("document").map_err(rerr)?,
            meta: meta_from_row(&r)?,
        })
    })
    .transpose()
}

#[async_trait]
impl RegistryStore for SqliteStore {
    async fn publish(
        &self,
        tenant: &TenantId,
        v: &NewVersion<'_>,
    ) -> Result<PublishOutcome, RegistryStoreError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(rerr)?;
        let exists: Option<i64> = sqlx::query_scalar("SELECT 1 FROM tenants WHERE id = ?")
            .bind(tenant.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(rerr)?;
        if exists.is_none() {
            return Err(RegistryStoreError::TenantNotFound);
        }
        if let Some(existing) = load_version(&mut tx, tenant, v.server_key, v.version).await? {
            return Ok(if existing.meta.digest == v.digest {
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
        .bind(v.at.millis())
        .execute(&mut *tx)
        .await
        .map_err(rerr)?;
        sqlx::query(
            "INSERT INTO versions (tenant_id, server, version, digest, document, title, description, published_by, published_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(tenant.as_str())
        .bind(v.server_key)
        .bind(v.version)
        .bind(v.digest)
        .bind(v.document)
        .bind(v.title)
        .bind(v.description)
        .bind(v.published_by)
        .bind(v.at.millis())
        .execute(&mut *tx)
        .await
        .map_err(rerr)?;
        let approved = v.initial == Status::Approved;
        let reason =
            approved.then_some("approved on publish: the tenant policy requires no review");
        sqlx::query(
            "INSERT INTO version_status (tenant_id, server, version, status, revision, status_changed_at, status_reason, approved_by, approved_at)
             VALUES (?, ?, ?, ?, 1, ?, ?, NULL, ?)",
        )
        .bind(tenant.as_str())
        .bind(v.server_key)
        .bind(v.version)
        .bind(v.initial.as_str())
        .bind(v.at.millis())
        .bind(reason)
        .bind(approved.then_some(v.at.millis()))
        .execute(&mut *tx)
        .await
        .map_err(rerr)?;
        let mut data = v.event_data.clone();
        data["status"] = serde_json::json!(v.initial.as_str());
        insert_audit(
            &mut tx,
            tenant,
            &NewAuditEvent {
                at: v.at,
                actor: v.published_by.to_owned(),
                kind: v.event.to_owned(),
                server: Some(v.server_key.to_owned()),
                version: Some(v.version.to_owned()),
                data,
            },
        )
        .await
        .map_err(aerr)?;
        let display: String = sqlx::query_scalar(SELECT_DISPLAY)
            .bind(tenant.as_str())
            .bind(v.server_key)
            .fetch_one(&mut *tx)
            .await
            .map_err(rerr)?;
        // Built from what was just written: no need to read 64 KiB back.
        let stored = StoredVersion {
            server: display,
            document: v.document.to_owned(),
            meta: VersionMeta {
                version: v.version.to_owned(),
                digest: v.digest.to_owned(),
                published_by: v.published_by.to_owned(),
                published_at: v.at,
                status: StatusRow {
                    status: v.initial,
                    revision: 1,
                    changed_at: v.at,
                    reason: reason.map(str::to_owned),
                    approved_by: None,
                    approved_at: approved.then_some(v.at),
                },
            },
        };
        tx.commit().await.map_err(rerr)?;
        Ok(PublishOutcome::Created(stored))
    }

    async fn version(
        &self,
        tenant: &TenantId,
        server_key: &str,
        version: &str,
    ) -> Result<Option<StoredVersion>, RegistryStoreError> {
        let mut conn = self.pool.acquire().await.map_err(rerr)?;
        load_version(&mut conn, tenant, server_key, version).await
    }

    async fn versions(
        &self,
        tenant: &TenantId,
        server_key: &str,
    ) -> Result<Vec<VersionMeta>, RegistryStoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {META_COLUMNS}
             FROM versions v
             JOIN version_status st ON st.tenant_id = v.tenant_id AND st.server = v.server AND st.version = v.version
             WHERE v.tenant_id = ? AND v.server = ?"
        )))
        .bind(tenant.as_str())
        .bind(server_key)
        .fetch_all(&self.pool)
        .await
        .map_err(rerr)?;
        rows.iter().map(meta_from_row).collect()
    }

    async fn server(
        &self,
        tenant: &TenantId,
        server_key: &str,
    ) -> Result<Option<ServerRow>, RegistryStoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {SERVER_COLUMNS}
             FROM servers s WHERE s.tenant_id = ? AND s.name = ?"
        )))
        .bind(tenant.as_str())
        .bind(server_key)
        .fetch_optional(&self.pool)
        .await
        .map_err(rerr)?;
        row.map(|r| server_from_row(&r).map(|(_, s)| s)).transpose()
    }

    async fn servers(
        &self,
        tenant: &TenantId,
        q: &ServerQuery,
    ) -> Result<Vec<(String, ServerRow)>, RegistryStoreError> {
        let pattern = q.q.as_deref().map(like_pattern);
        let rows = sqlx::query(
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
        .map_err(rerr)?;
        rows.iter().map(server_from_row).collect()
    }

    async fn change_status(
        &self,
        tenant: &TenantId,
        c: &StatusChange<'_>,
    ) -> Result<(), RegistryStoreError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(rerr)?;
        let approve = c.to == Status::Approved;
        let done = sqlx::query(
            "UPDATE version_status
             SET status = ?, revision = revision + 1, status_changed_at = ?, status_reason = ?,
                 approved_by = CASE WHEN ? THEN ? ELSE approved_by END,
                 approved_at = CASE WHEN ? THEN ? ELSE approved_at END
             WHERE tenant_id = ? AND server = ? AND version = ? AND revision = ?",
        )
        .bind(c.to.as_str())
        .bind(c.at.millis())
        .bind(c.note)
        .bind(approve)
        .bind(c.actor)
        .bind(approve)
        .bind(c.at.millis())
        .bind(tenant.as_str())
        .bind(c.server_key)
        .bind(c.version)
        .bind(c.expected_revision)
        .execute(&mut *tx)
        .await
        .map_err(rerr)?;
        if done.rows_affected() == 0 {
            return Err(RegistryStoreError::Stale);
        }
        if let Some(decision) = match c.action {
            Action::Approve => Some("approve"),
            Action::Reject => Some("reject"),
            _ => None,
        } {
            sqlx::query(
                "INSERT INTO version_reviews (tenant_id, server, version, decision, note, reviewer, at)
                 VALUES (?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(tenant.as_str())
            .bind(c.server_key)
            .bind(c.version)
            .bind(decision)
            .bind(c.note)
            .bind(c.actor)
            .bind(c.at.millis())
            .execute(&mut *tx)
            .await
            .map_err(rerr)?;
        }
        insert_audit(
            &mut tx,
            tenant,
            &NewAuditEvent {
                at: c.at,
                actor: c.actor.to_owned(),
                kind: c.action.event_kind().to_owned(),
                server: Some(c.server_key.to_owned()),
                version: Some(c.version.to_owned()),
                data: serde_json::json!({"from": c.from.as_str(), "to": c.to.as_str(), "note": c.note}),
            },
        )
        .await
        .map_err(aerr)?;
        tx.commit().await.map_err(rerr)?;
        Ok(())
    }

    async fn reviews(
        &self,
        tenant: &TenantId,
        server_key: &str,
        version: &str,
    ) -> Result<Vec<Review>, RegistryStoreError> {
        let rows = sqlx::query(
            "SELECT decision, note, reviewer, at FROM version_reviews
             WHERE tenant_id = ? AND server = ? AND version = ? ORDER BY id",
        )
        .bind(tenant.as_str())
        .bind(server_key)
        .bind(version)
        .fetch_all(&self.pool)
        .await
        .map_err(rerr)?;
        rows.iter()
            .map(|r| {
                Ok(Review {
                    decision: r.try_get("decision").map_err(rerr)?,
                    note: r.try_get("note").map_err(rerr)?,
                    reviewer: r.try_get("reviewer").map_err(rerr)?,
                    at: Timestamp::from_millis(r.try_get("at").map_err(rerr)?),
                })
            })
            .collect()
    }

    async fn tenant_key(&self, tenant: &TenantId) -> Result<Option<StoredKey>, RegistryStoreError> {
        let row = sqlx::query("SELECT kid, public_key, private_sealed, created_at FROM tenant_keys WHERE tenant_id = ?")
            .bind(tenant.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(rerr)?;
        row.map(|r| key_from_row(&r)).transpose()
    }

    async fn insert_tenant_key(
        &self,
        tenant: &TenantId,
        key: &StoredKey,
    ) -> Result<StoredKey, RegistryStoreError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(rerr)?;
        let exists: Option<i64> = sqlx::query_scalar("SELECT 1 FROM tenants WHERE id = ?")
            .bind(tenant.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(rerr)?;
        if exists.is_none() {
            return Err(RegistryStoreError::TenantNotFound);
        }
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
        .map_err(rerr)?;
        let row = sqlx::query("SELECT kid, public_key, private_sealed, created_at FROM tenant_keys WHERE tenant_id = ?")
            .bind(tenant.as_str())
            .fetch_one(&mut *tx)
            .await
            .map_err(rerr)?;
        tx.commit().await.map_err(rerr)?;
        key_from_row(&row)
    }
}

fn server_from_row(r: &SqliteRow) -> Result<(String, ServerRow), RegistryStoreError> {
    let created_at: i64 = r.try_get("created_at").map_err(rerr)?;
    Ok((
        r.try_get("name").map_err(rerr)?,
        ServerRow {
            name: r.try_get("display_name").map_err(rerr)?,
            title: r.try_get("title").map_err(rerr)?,
            description: r.try_get("description").map_err(rerr)?,
            created_at: Timestamp::from_millis(created_at),
            updated_at: Timestamp::from_millis(
                r.try_get::<Option<i64>, _>("updated_at")
                    .map_err(rerr)?
                    .unwrap_or(created_at),
            ),
            version_count: r.try_get("version_count").map_err(rerr)?,
        },
    ))
}

fn key_from_row(r: &SqliteRow) -> Result<StoredKey, RegistryStoreError> {
    Ok(StoredKey {
        kid: r.try_get("kid").map_err(rerr)?,
        public_key: r.try_get("public_key").map_err(rerr)?,
        private_sealed: r.try_get("private_sealed").map_err(rerr)?,
        created_at: Timestamp::from_millis(r.try_get("created_at").map_err(rerr)?),
    })
}
