//! Walking and replacing sealed values, for `pinfold keys reseal`: the
//! tenants in order, each sealed column's values of a tenant in pages, and
//! a page's replacements in one transaction, each written only while the
//! row still holds the value that was read.

use pinfold_core::ids::TenantId;
use pinfold_store_rows::{Replacement, SealedColumn, SealedDbRow};
use pinfold_tenancy::StoreError;

use crate::{SqliteStore, err};

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

impl SqliteStore {
    /// Up to `limit` tenant ids greater than `after` (`""` for the
    /// first page), in ascending order.
    pub async fn tenant_ids(&self, after: &str, limit: u32) -> Result<Vec<TenantId>, StoreError> {
        let ids: Vec<String> =
            sqlx::query_scalar("SELECT id FROM tenants WHERE id > ? ORDER BY id LIMIT ?")
                .bind(after)
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
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
             WHERE tenant_id = ? AND {sealed} IS NOT NULL AND {key} > ?
             ORDER BY {key} LIMIT ?"
        )))
        .bind(tenant.as_str())
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(err)
    }

    /// Writes each replacement whose row still holds its `old` value, in
    /// one transaction; returns how many were written.
    pub async fn replace_sealed(
        &self,
        tenant: &TenantId,
        column: SealedColumn,
        replacements: &[Replacement],
    ) -> Result<u64, StoreError> {
        let (table, key, sealed) = target(column);
        let statement = format!(
            "UPDATE {table} SET {sealed} = ? WHERE tenant_id = ? AND {key} = ? AND {sealed} = ?"
        );
        let mut tx = self.write_tx().await.map_err(err)?;
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
