//! Walking and replacing sealed values, for `pinfold keys reseal`, under
//! row-level security as the server runs: the tenant ids are listed in a
//! transaction bound to [`TENANTS_MARKER`] (which sees `tenants` and
//! nothing else), and each tenant's values are read, and a page of
//! replacements written, in a transaction bound to that tenant. A value is
//! replaced only while its row still holds the value that was read.

use pinfold_core::ids::TenantId;
use pinfold_store_rows::{Replacement, SealedColumn, SealedDbRow, store_error as err};
use pinfold_tenancy::StoreError;

use crate::store::PgStore;
use crate::tenant_tx::TENANTS_MARKER;

/// The table, key column and sealed column of `column`.
fn target(column: SealedColumn) -> (&'static str, &'static str, &'static str) {
    match column {
        SealedColumn::AttestationKey => ("tenant_keys", "kid", "private_sealed"),
        SealedColumn::UpstreamHeaders => ("resolve_sessions", "id", "upstream_sealed"),
        SealedColumn::ClientSecret => ("scope_providers", "name", "client_secret_sealed"),
        SealedColumn::PkceVerifier => ("scope_grant_states", "grant_id", "verifier_sealed"),
        SealedColumn::GuardHeaders => ("guard_routes", "server", "headers_sealed"),
    }
}

impl PgStore {
    /// Up to `limit` tenant ids greater than `after` (`""` for the
    /// first page), in ascending order.
    pub async fn tenant_ids(&self, after: &str, limit: u32) -> Result<Vec<TenantId>, StoreError> {
        let ids: Vec<String> =
            sqlx::query_scalar("SELECT id FROM tenants WHERE id > $1 ORDER BY id LIMIT $2")
                .bind(after)
                .bind(i64::from(limit))
                .fetch_all(&mut *self.bound_tx(TENANTS_MARKER).await.map_err(err)?)
                .await
                .map_err(err)?;
        ids.iter()
            .map(|id| TenantId::parse(id).map_err(|e| StoreError::Other(e.to_string())))
            .collect()
    }

    /// Up to `limit` of `tenant`'s values in `column` whose row key is
    /// greater than `after` (`""` for the first page), by key; rows
    /// without a value are skipped.
    pub async fn sealed_values(
        &self,
        tenant: &TenantId,
        column: SealedColumn,
        after: &str,
        limit: u32,
    ) -> Result<Vec<SealedDbRow>, StoreError> {
        let (table, key, sealed) = target(column);
        sqlx::query_as::<_, SealedDbRow>(sqlx::AssertSqlSafe(format!(
            "SELECT {key} AS key, {sealed} AS sealed FROM {table}
             WHERE tenant_id = $1 AND {sealed} IS NOT NULL AND {key} > $2
             ORDER BY {key} LIMIT $3"
        )))
        .bind(tenant.as_str())
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(&mut *self.tenant_tx(tenant).await.map_err(err)?)
        .await
        .map_err(err)
    }

    /// Writes each replacement whose row still holds its `old` value, in
    /// one transaction bound to `tenant`; returns how many were written.
    pub async fn replace_sealed(
        &self,
        tenant: &TenantId,
        column: SealedColumn,
        replacements: &[Replacement],
    ) -> Result<u64, StoreError> {
        let (table, key, sealed) = target(column);
        let statement = format!(
            "UPDATE {table} SET {sealed} = $1 WHERE tenant_id = $2 AND {key} = $3 AND {sealed} = $4"
        );
        let mut tx = self.tenant_tx(tenant).await.map_err(err)?;
        let mut written = 0;
        for r in replacements {
            written += sqlx::query(sqlx::AssertSqlSafe(statement.as_str()))
                .bind(&r.new)
                .bind(tenant.as_str())
                .bind(&r.key)
                .bind(&r.old)
                .execute(&mut *tx)
                .await
                .map_err(err)?
                .rows_affected();
        }
        tx.commit().await.map_err(err)?;
        Ok(written)
    }
}
