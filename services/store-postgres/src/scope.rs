//! The scope service's store on PostgreSQL.

use async_trait::async_trait;
use pinfold_core::ids::{TenantId, Timestamp};
use pinfold_scope::{
    AuditNote, Expect, GrantOutcome, GrantRow, ProviderRow, ProviderWrite, ScopeStore,
    ScopeStoreError, StateRow,
};
use pinfold_store_rows::{
    GrantDbRow, ProviderDbRow, StateDbRow, scope_error as serr, scope_error_from as aerr,
    scopes_json,
};

use crate::store::PgStore;
use crate::tenancy::insert_audit;
use crate::tenant_tx::PURGE_MARKER;

const PROVIDER_INSERT: &str =
    "name, profile, client_secret_sealed, revision, created_at, updated_at, updated_by";
const PROVIDER_COLUMNS: &str = "name, profile::text AS profile, client_secret_sealed, revision, \
     created_at, updated_at, updated_by";
const GRANT_INSERT: &str = "id, provider, principal, issuer, redirect_uri, resource, requested, \
     needed, granted, status, error, created_at, exchanged_at";
const GRANT_COLUMNS: &str = "id, provider, principal, issuer, redirect_uri, resource, \
     requested::text AS requested, needed::text AS needed, granted::text AS granted, status, \
     error, created_at, exchanged_at";

fn fk(e: sqlx::Error) -> ScopeStoreError {
    if let sqlx::Error::Database(db) = &e
        && db.is_foreign_key_violation()
    {
        return ScopeStoreError::TenantNotFound;
    }
    serr(e)
}

#[async_trait]
impl ScopeStore for PgStore {
    async fn provider(
        &self,
        tenant: &TenantId,
        name: &str,
    ) -> Result<Option<ProviderRow>, ScopeStoreError> {
        sqlx::query_as::<_, ProviderDbRow>(sqlx::AssertSqlSafe(format!(
            "SELECT {PROVIDER_COLUMNS} FROM scope_providers WHERE tenant_id = $1 AND name = $2"
        )))
        .bind(tenant.as_str())
        .bind(name)
        .fetch_optional(&mut *self.tenant_tx(tenant).await.map_err(serr)?)
        .await
        .map_err(serr)?
        .map(ProviderRow::try_from)
        .transpose()
    }

    async fn providers(
        &self,
        tenant: &TenantId,
        limit: u32,
    ) -> Result<Vec<ProviderRow>, ScopeStoreError> {
        sqlx::query_as::<_, ProviderDbRow>(sqlx::AssertSqlSafe(format!(
            "SELECT {PROVIDER_COLUMNS} FROM scope_providers WHERE tenant_id = $1 ORDER BY name LIMIT $2"
        )))
        .bind(tenant.as_str())
        .bind(i64::from(limit))
        .fetch_all(&mut *self.tenant_tx(tenant).await.map_err(serr)?)
        .await
        .map_err(serr)?
        .into_iter()
        .map(ProviderRow::try_from)
        .collect()
    }

    async fn put_provider(
        &self,
        tenant: &TenantId,
        name: &str,
        w: &ProviderWrite<'_>,
        expect: Expect,
        audit: &AuditNote,
    ) -> Result<(ProviderRow, bool), ScopeStoreError> {
        let profile =
            serde_json::to_string(w.profile).map_err(|e| ScopeStoreError::Other(e.to_string()))?;
        let mut tx = self.tenant_tx(tenant).await.map_err(serr)?;
        let current: Option<i64> = sqlx::query_scalar(
            "SELECT revision FROM scope_providers WHERE tenant_id = $1 AND name = $2 FOR UPDATE",
        )
        .bind(tenant.as_str())
        .bind(name)
        .fetch_optional(&mut *tx)
        .await
        .map_err(serr)?;
        let created = match (expect, current) {
            (Expect::Absent, Some(c)) => {
                return Err(ScopeStoreError::PreconditionFailed { current: Some(c) });
            }
            (Expect::CreateOnly, Some(c)) => {
                return Err(ScopeStoreError::PreconditionRequired { current: c });
            }
            (Expect::Revision(_), None) => {
                return Err(ScopeStoreError::PreconditionFailed { current: None });
            }
            (Expect::Revision(r), Some(c)) if r != c => {
                return Err(ScopeStoreError::PreconditionFailed { current: Some(c) });
            }
            (_, None) => true,
            (Expect::Revision(_), Some(_)) => false,
        };
        let row = if created {
            let inserted = sqlx::query_as::<_, ProviderDbRow>(sqlx::AssertSqlSafe(format!(
                "INSERT INTO scope_providers (tenant_id, {PROVIDER_INSERT})
                 VALUES ($1, $2, $3::jsonb, $4, 1, $5, $6, $7)
                 ON CONFLICT (tenant_id, name) DO NOTHING
                 RETURNING {PROVIDER_COLUMNS}"
            )))
            .bind(tenant.as_str())
            .bind(name)
            .bind(&profile)
            .bind(w.client_secret_sealed)
            .bind(w.at.millis())
            .bind(w.at.millis())
            .bind(w.by)
            .fetch_optional(&mut *tx)
            .await
            .map_err(fk)?;
            match inserted {
                Some(r) => r,
                // Created concurrently (after our read saw nothing).
                None => {
                    let current: Option<i64> = sqlx::query_scalar(
                        "SELECT revision FROM scope_providers WHERE tenant_id = $1 AND name = $2",
                    )
                    .bind(tenant.as_str())
                    .bind(name)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(serr)?;
                    return Err(ScopeStoreError::PreconditionFailed { current });
                }
            }
        } else {
            sqlx::query_as::<_, ProviderDbRow>(sqlx::AssertSqlSafe(format!(
                "UPDATE scope_providers
                 SET profile = $1::jsonb, client_secret_sealed = COALESCE($2, client_secret_sealed),
                     revision = revision + 1, updated_at = $3, updated_by = $4
                 WHERE tenant_id = $5 AND name = $6
                 RETURNING {PROVIDER_COLUMNS}"
            )))
            .bind(&profile)
            .bind(w.client_secret_sealed)
            .bind(w.at.millis())
            .bind(w.by)
            .bind(tenant.as_str())
            .bind(name)
            .fetch_one(&mut *tx)
            .await
            .map_err(serr)?
        };
        let row = ProviderRow::try_from(row)?;
        let mut audit = audit.clone();
        audit.data["revision"] = row.revision.into();
        insert_audit(&mut tx, tenant, &audit).await.map_err(aerr)?;
        tx.commit().await.map_err(serr)?;
        Ok((row, created))
    }

    async fn insert_grant(
        &self,
        tenant: &TenantId,
        g: &GrantRow,
        s: &StateRow,
        audit: &AuditNote,
    ) -> Result<(), ScopeStoreError> {
        let mut tx = self.tenant_tx(tenant).await.map_err(serr)?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO scope_grants (tenant_id, {GRANT_INSERT})
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9::jsonb, $10::jsonb, $11, $12, $13, $14)"
        )))
        .bind(tenant.as_str())
        .bind(&g.id)
        .bind(&g.provider)
        .bind(&g.principal)
        .bind(&g.issuer)
        .bind(&g.redirect_uri)
        .bind(&g.resource)
        .bind(scopes_json(&g.requested))
        .bind(scopes_json(&g.needed))
        .bind(g.granted.as_deref().map(scopes_json))
        .bind(g.status.as_str())
        .bind(&g.error)
        .bind(g.created_at.millis())
        .bind(g.exchanged_at.map(|t| t.millis()))
        .execute(&mut *tx)
        .await
        .map_err(fk)?;
        sqlx::query(
            "INSERT INTO scope_grant_states (tenant_id, grant_id, state_hash, verifier_sealed, expires_at)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(tenant.as_str())
        .bind(&s.grant_id)
        .bind(&s.state_hash)
        .bind(&s.verifier_sealed)
        .bind(s.expires_at.millis())
        .execute(&mut *tx)
        .await
        .map_err(serr)?;
        insert_audit(&mut tx, tenant, audit).await.map_err(aerr)?;
        tx.commit().await.map_err(serr)
    }

    async fn grant(
        &self,
        tenant: &TenantId,
        id: &str,
    ) -> Result<Option<GrantRow>, ScopeStoreError> {
        sqlx::query_as::<_, GrantDbRow>(sqlx::AssertSqlSafe(format!(
            "SELECT {GRANT_COLUMNS} FROM scope_grants WHERE tenant_id = $1 AND id = $2"
        )))
        .bind(tenant.as_str())
        .bind(id)
        .fetch_optional(&mut *self.tenant_tx(tenant).await.map_err(serr)?)
        .await
        .map_err(serr)?
        .map(GrantRow::try_from)
        .transpose()
    }

    async fn take_state(
        &self,
        tenant: &TenantId,
        id: &str,
        state_hash: &str,
    ) -> Result<Option<StateRow>, ScopeStoreError> {
        let mut tx = self.tenant_tx(tenant).await.map_err(serr)?;
        let row = sqlx::query_as::<_, StateDbRow>(
            "DELETE FROM scope_grant_states
             WHERE tenant_id = $1 AND grant_id = $2 AND state_hash = $3
             RETURNING grant_id, state_hash, verifier_sealed, expires_at",
        )
        .bind(tenant.as_str())
        .bind(id)
        .bind(state_hash)
        .fetch_optional(&mut *tx)
        .await
        .map_err(serr)?;
        tx.commit().await.map_err(serr)?;
        Ok(row.map(StateRow::from))
    }

    async fn purge_expired_states(
        &self,
        before: Timestamp,
        limit: u32,
    ) -> Result<u64, ScopeStoreError> {
        let mut tx = self.bound_tx(PURGE_MARKER).await.map_err(serr)?;
        let n = sqlx::query(
            "DELETE FROM scope_grant_states WHERE (tenant_id, grant_id) IN
                (SELECT tenant_id, grant_id FROM scope_grant_states WHERE expires_at < $1 LIMIT $2)",
        )
        .bind(before.millis())
        .bind(i64::from(limit))
        .execute(&mut *tx)
        .await
        .map_err(serr)?
        .rows_affected();
        tx.commit().await.map_err(serr)?;
        Ok(n)
    }

    async fn finish_grant(
        &self,
        tenant: &TenantId,
        id: &str,
        o: &GrantOutcome,
        audit: &AuditNote,
    ) -> Result<(), ScopeStoreError> {
        let mut tx = self.tenant_tx(tenant).await.map_err(serr)?;
        sqlx::query(
            "UPDATE scope_grants SET status = $1, granted = $2::jsonb, error = $3, exchanged_at = $4
             WHERE tenant_id = $5 AND id = $6 AND status = 'pending'",
        )
        .bind(o.status.as_str())
        .bind(o.granted.as_deref().map(scopes_json))
        .bind(&o.error)
        .bind(o.at.millis())
        .bind(tenant.as_str())
        .bind(id)
        .execute(&mut *tx)
        .await
        .map_err(serr)?;
        insert_audit(&mut tx, tenant, audit).await.map_err(aerr)?;
        tx.commit().await.map_err(serr)
    }

    async fn grants(
        &self,
        tenant: &TenantId,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<GrantRow>, ScopeStoreError> {
        sqlx::query_as::<_, GrantDbRow>(sqlx::AssertSqlSafe(format!(
            "SELECT {GRANT_COLUMNS} FROM scope_grants
             WHERE tenant_id = $1 AND id > $2 ORDER BY id LIMIT $3"
        )))
        .bind(tenant.as_str())
        .bind(after.unwrap_or(""))
        .bind(i64::from(limit))
        .fetch_all(&mut *self.tenant_tx(tenant).await.map_err(serr)?)
        .await
        .map_err(serr)?
        .into_iter()
        .map(GrantRow::try_from)
        .collect()
    }
}
