//! The guard's route store on SQLite.

use async_trait::async_trait;
use pinfold_core::audit::NewAuditEvent;
use pinfold_core::ids::TenantId;
use pinfold_guard::model::GuardRoute;
use pinfold_guard::store::{GuardStore, StoreError};
use pinfold_store_rows::{
    GuardRouteDbRow, guard_error as gerr, guard_error_from as aerr, header_names_json,
};

use crate::{SqliteStore, insert_audit};

const COLUMNS: &str = "server, revision, upstream_url, header_names, headers_sealed, \
     version_pin, mode, calls, created_at, updated_at, updated_by";

#[async_trait]
impl GuardStore for SqliteStore {
    async fn put_route(
        &self,
        tenant: &TenantId,
        route: &GuardRoute,
        expected_revision: Option<i64>,
        event: &NewAuditEvent,
    ) -> Result<GuardRoute, StoreError> {
        let server = route.server.to_ascii_lowercase();
        let mut tx = self.write_tx().await.map_err(gerr)?;
        let stored = match expected_revision {
            Some(expected) => sqlx::query_as::<_, GuardRouteDbRow>(sqlx::AssertSqlSafe(format!(
                "UPDATE guard_routes
                 SET revision = revision + 1, upstream_url = ?, header_names = ?,
                     headers_sealed = ?, version_pin = ?, mode = ?, calls = ?,
                     updated_at = max(created_at, ?), updated_by = ?
                 WHERE tenant_id = ? AND server = ? AND revision = ?
                 RETURNING {COLUMNS}"
            )))
            .bind(&route.upstream_url)
            .bind(header_names_json(route))
            .bind(&route.headers_sealed)
            .bind(route.version.as_str())
            .bind(route.mode.map(|m| m.as_str()))
            .bind(route.calls.as_str())
            .bind(route.updated_at.millis())
            .bind(&route.updated_by)
            .bind(tenant.as_str())
            .bind(&server)
            .bind(expected)
            .fetch_optional(&mut *tx)
            .await
            .map_err(gerr)?,
            None => Some(
                sqlx::query_as::<_, GuardRouteDbRow>(sqlx::AssertSqlSafe(format!(
                    "INSERT INTO guard_routes (tenant_id, {COLUMNS})
                     VALUES (?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                     ON CONFLICT (tenant_id, server) DO UPDATE SET
                         revision = guard_routes.revision + 1,
                         upstream_url = excluded.upstream_url,
                         header_names = excluded.header_names,
                         headers_sealed = excluded.headers_sealed,
                         version_pin = excluded.version_pin,
                         mode = excluded.mode,
                         calls = excluded.calls,
                         updated_at = max(guard_routes.created_at, excluded.updated_at),
                         updated_by = excluded.updated_by
                     RETURNING {COLUMNS}"
                )))
                .bind(tenant.as_str())
                .bind(&server)
                .bind(&route.upstream_url)
                .bind(header_names_json(route))
                .bind(&route.headers_sealed)
                .bind(route.version.as_str())
                .bind(route.mode.map(|m| m.as_str()))
                .bind(route.calls.as_str())
                .bind(route.created_at.millis())
                .bind(route.updated_at.millis())
                .bind(&route.updated_by)
                .fetch_one(&mut *tx)
                .await
                .map_err(gerr)?,
            ),
        };
        let Some(stored) = stored else {
            let current: Option<i64> = sqlx::query_scalar(
                "SELECT revision FROM guard_routes WHERE tenant_id = ? AND server = ?",
            )
            .bind(tenant.as_str())
            .bind(&server)
            .fetch_optional(&mut *tx)
            .await
            .map_err(gerr)?;
            return Err(StoreError::PreconditionFailed { current });
        };
        insert_audit(&mut tx, tenant, event).await.map_err(aerr)?;
        tx.commit().await.map_err(gerr)?;
        GuardRoute::try_from(stored)
    }

    async fn route(
        &self,
        tenant: &TenantId,
        server: &str,
    ) -> Result<Option<GuardRoute>, StoreError> {
        sqlx::query_as::<_, GuardRouteDbRow>(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM guard_routes WHERE tenant_id = ? AND server = ?"
        )))
        .bind(tenant.as_str())
        .bind(server.to_ascii_lowercase())
        .fetch_optional(&self.pool)
        .await
        .map_err(gerr)?
        .map(GuardRoute::try_from)
        .transpose()
    }

    async fn delete_route(
        &self,
        tenant: &TenantId,
        server: &str,
        event: &NewAuditEvent,
    ) -> Result<bool, StoreError> {
        let mut tx = self.write_tx().await.map_err(gerr)?;
        let gone = sqlx::query("DELETE FROM guard_routes WHERE tenant_id = ? AND server = ?")
            .bind(tenant.as_str())
            .bind(server.to_ascii_lowercase())
            .execute(&mut *tx)
            .await
            .map_err(gerr)?
            .rows_affected();
        if gone == 0 {
            return Ok(false);
        }
        insert_audit(&mut tx, tenant, event).await.map_err(aerr)?;
        tx.commit().await.map_err(gerr)?;
        Ok(true)
    }

    async fn record_drift(
        &self,
        tenant: &TenantId,
        server: &str,
        pinned_digest: &str,
        upstream_digest: &str,
        event: &NewAuditEvent,
    ) -> Result<bool, StoreError> {
        let mut tx = self.write_tx().await.map_err(gerr)?;
        let inserted = sqlx::query(
            "INSERT INTO guard_drifts
                 (tenant_id, server, pinned_digest, upstream_digest, first_seen)
             VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (tenant_id, server, pinned_digest, upstream_digest) DO NOTHING",
        )
        .bind(tenant.as_str())
        .bind(server.to_ascii_lowercase())
        .bind(pinned_digest)
        .bind(upstream_digest)
        .bind(event.at.millis())
        .execute(&mut *tx)
        .await
        .map_err(gerr)?
        .rows_affected();
        if inserted == 0 {
            return Ok(false);
        }
        insert_audit(&mut tx, tenant, event).await.map_err(aerr)?;
        tx.commit().await.map_err(gerr)?;
        Ok(true)
    }
}
