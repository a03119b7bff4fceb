//! [`TenantStore`] on PostgreSQL: tenants, policies with their revisions,
//! and the append-only audit log, whose one insert ([`insert_audit`]) the
//! other stores share to append an event inside their own transaction.

use async_trait::async_trait;
use pinfold_core::ids::{TenantId, Timestamp};
use pinfold_store_rows::{AuditRow, PolicyRow, TenantRow, store_error as err};
use pinfold_tenancy::model::{
    AuditEvent, AuditFilter, NewAuditEvent, Policy, PolicyRecord, TenantRecord,
    policy_updated_event, tenant_created_event,
};
use pinfold_tenancy::{StoreError, TenantStore};

use crate::store::PgStore;

/// Appends `e` to `tenant`'s audit log inside the caller's transaction;
/// returns the event's id.
pub(crate) async fn insert_audit(
    tx: &mut sqlx::PgConnection,
    tenant: &TenantId,
    e: &NewAuditEvent,
) -> Result<i64, StoreError> {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO audit_events (tenant_id, at, actor, kind, server, version, data)
         VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb) RETURNING id",
    )
    .bind(tenant.as_str())
    .bind(e.at.millis())
    .bind(&e.actor)
    .bind(&e.kind)
    .bind(&e.server)
    .bind(&e.version)
    .bind(e.data.to_string())
    .fetch_one(tx)
    .await
    .map_err(err)?;
    Ok(id)
}

fn overrides_json(p: &Policy) -> Result<String, StoreError> {
    serde_json::to_string(&p.overrides).map_err(|e| StoreError::Other(e.to_string()))
}

fn egress_json(p: &Policy) -> Result<String, StoreError> {
    serde_json::to_string(&p.egress_allow).map_err(|e| StoreError::Other(e.to_string()))
}

const POLICY_COLUMNS: &str = "enforcement_mode, approval_required, overrides::text AS overrides, egress_allow::text AS egress_allow, revision, updated_at, updated_by";

#[async_trait]
impl TenantStore for PgStore {
    async fn create_tenant(
        &self,
        tenant: &TenantId,
        name: &str,
        policy: &Policy,
        actor: &str,
        at: Timestamp,
    ) -> Result<TenantRecord, StoreError> {
        // Bound to the new tenant: its own row is the only one it may write.
        let mut tx = self.tenant_tx(tenant).await.map_err(err)?;
        sqlx::query(
            "INSERT INTO tenants (id, name, created_at, created_by) VALUES ($1, $2, $3, $4)",
        )
        .bind(tenant.as_str())
        .bind(name)
        .bind(at.millis())
        .bind(actor)
        .execute(&mut *tx)
        .await
        .map_err(err)?;
        sqlx::query(
            "INSERT INTO tenant_policies
             (tenant_id, enforcement_mode, approval_required, overrides, egress_allow, revision, updated_at, updated_by)
             VALUES ($1, $2, $3, $4::jsonb, $5::jsonb, 1, $6, $7)",
        )
        .bind(tenant.as_str())
        .bind(policy.enforcement_mode.as_str())
        .bind(policy.approval_required)
        .bind(overrides_json(policy)?)
        .bind(egress_json(policy)?)
        .bind(at.millis())
        .bind(actor)
        .execute(&mut *tx)
        .await
        .map_err(err)?;
        insert_audit(
            &mut tx,
            tenant,
            &tenant_created_event(name, policy, actor, at),
        )
        .await?;
        tx.commit().await.map_err(err)?;
        Ok(TenantRecord {
            id: tenant.clone(),
            name: name.to_owned(),
            created_at: at,
            created_by: actor.to_owned(),
        })
    }

    async fn tenant(&self, tenant: &TenantId) -> Result<Option<TenantRecord>, StoreError> {
        let row = sqlx::query_as::<_, TenantRow>(
            "SELECT id, name, created_at, created_by FROM tenants WHERE id = $1",
        )
        .bind(tenant.as_str())
        .fetch_optional(&mut *self.tenant_tx(tenant).await.map_err(err)?)
        .await
        .map_err(err)?;
        row.map(TenantRecord::try_from).transpose()
    }

    async fn policy(&self, tenant: &TenantId) -> Result<Option<PolicyRecord>, StoreError> {
        let row = sqlx::query_as::<_, PolicyRow>(sqlx::AssertSqlSafe(format!(
            "SELECT {POLICY_COLUMNS} FROM tenant_policies WHERE tenant_id = $1"
        )))
        .bind(tenant.as_str())
        .fetch_optional(&mut *self.tenant_tx(tenant).await.map_err(err)?)
        .await
        .map_err(err)?;
        row.map(PolicyRecord::try_from).transpose()
    }

    async fn put_policy(
        &self,
        tenant: &TenantId,
        policy: &Policy,
        expected_revision: Option<i64>,
        actor: &str,
        at: Timestamp,
    ) -> Result<PolicyRecord, StoreError> {
        let mut tx = self.tenant_tx(tenant).await.map_err(err)?;
        // The row lock taken by UPDATE makes a concurrent writer wait and
        // then re-check the revision predicate against the committed row.
        let row = sqlx::query_as::<_, PolicyRow>(sqlx::AssertSqlSafe(format!(
            "UPDATE tenant_policies
             SET enforcement_mode = $1, approval_required = $2, overrides = $3::jsonb,
                 egress_allow = $8::jsonb,
                 revision = revision + 1, updated_at = $4, updated_by = $5
             WHERE tenant_id = $6 AND ($7::bigint IS NULL OR revision = $7)
             RETURNING {POLICY_COLUMNS}"
        )))
        .bind(policy.enforcement_mode.as_str())
        .bind(policy.approval_required)
        .bind(overrides_json(policy)?)
        .bind(at.millis())
        .bind(actor)
        .bind(tenant.as_str())
        .bind(expected_revision)
        .bind(egress_json(policy)?)
        .fetch_optional(&mut *tx)
        .await
        .map_err(err)?;
        let Some(row) = row else {
            let current: Option<i64> =
                sqlx::query_scalar("SELECT revision FROM tenant_policies WHERE tenant_id = $1")
                    .bind(tenant.as_str())
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(err)?;
            return Err(match current {
                Some(current) => StoreError::PreconditionFailed { current },
                None => StoreError::NotFound,
            });
        };
        let rec = PolicyRecord::try_from(row)?;
        insert_audit(
            &mut tx,
            tenant,
            &policy_updated_event(rec.revision, policy, actor, at),
        )
        .await?;
        tx.commit().await.map_err(err)?;
        Ok(rec)
    }

    async fn append_audit(
        &self,
        tenant: &TenantId,
        event: &NewAuditEvent,
    ) -> Result<i64, StoreError> {
        let mut tx = self.tenant_tx(tenant).await.map_err(err)?;
        let id = insert_audit(&mut tx, tenant, event).await?;
        tx.commit().await.map_err(err)?;
        Ok(id)
    }

    async fn audit(
        &self,
        tenant: &TenantId,
        filter: &AuditFilter,
        after: Option<i64>,
        limit: u32,
    ) -> Result<Vec<AuditEvent>, StoreError> {
        let rows = sqlx::query_as::<_, AuditRow>(
            "SELECT id, at, actor, kind, server, version, data::text AS data FROM audit_events
             WHERE tenant_id = $1 AND id > $2
               AND ($3::text IS NULL OR server = $3) AND ($4::text IS NULL OR kind = $4)
               AND ($5::text IS NULL OR actor = $5) AND ($6::bigint IS NULL OR at >= $6)
               AND ($7::bigint IS NULL OR at < $7)
             ORDER BY id LIMIT $8",
        )
        .bind(tenant.as_str())
        .bind(after.unwrap_or(0))
        .bind(&filter.server)
        .bind(&filter.kind)
        .bind(&filter.actor)
        .bind(filter.since.map(|t| t.millis()))
        .bind(filter.until.map(|t| t.millis()))
        .bind(i64::from(limit))
        .fetch_all(&mut *self.tenant_tx(tenant).await.map_err(err)?)
        .await
        .map_err(err)?;
        rows.into_iter().map(AuditEvent::try_from).collect()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map_err(err)?;
        Ok(())
    }
}
