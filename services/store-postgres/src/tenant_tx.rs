//! Transactions bound to one tenant: every statement Pinfold runs on
//! PostgreSQL runs inside one, so row-level security (migration 0005) lets
//! it see and write only that tenant's rows. Two bindings span tenants: the
//! purge's ([`PURGE_MARKER`]) and the tenant listing's ([`TENANTS_MARKER`]).

use pinfold_core::ids::TenantId;

use crate::store::PgStore;

/// The `app.tenant_id` value of the background purge, the one binding that
/// spans tenants: migration 0005 lets it read and delete only rows whose
/// expiry has passed, in `resolve_sessions` and `scope_grant_states`. No
/// tenant id can equal it (tenant ids never contain `:`).
pub const PURGE_MARKER: &str = "maintenance:purge";

/// The `app.tenant_id` value that lists the tenants, for maintenance
/// commands that visit every tenant (`pinfold keys reseal`): migration 0007
/// lets it read the `tenants` table and nothing else, so each tenant's own
/// rows are then read and written in a transaction bound to that tenant.
/// No tenant id can equal it.
pub const TENANTS_MARKER: &str = "maintenance:tenants";

/// A transaction bound to one tenant (or to [`PURGE_MARKER`] or
/// [`TENANTS_MARKER`]).
pub(crate) type TenantTx = sqlx::Transaction<'static, sqlx::Postgres>;

/// Binds the open transaction to `binding`: the transaction-local
/// `app.tenant_id` (`set_config(..., true)` ends with the transaction, so the
/// binding never outlives it on a pooled connection). The value travels as
/// a bound parameter, never inside the statement's text.
const BIND: &str = "SELECT set_config('app.tenant_id', $1, true)";

impl PgStore {
    /// A transaction bound to `tenant`: every statement in it sees and
    /// writes only that tenant's rows (row-level security, migration
    /// 0005). Opening it takes two round trips: `BEGIN`, then the binding
    /// with the tenant as a parameter (a prepared statement, parsed once per
    /// connection). A read-only caller may drop it instead of committing:
    /// sqlx then queues the `ROLLBACK`, which goes out with the
    /// connection's release check, off the request's path.
    pub(crate) async fn tenant_tx(&self, tenant: &TenantId) -> Result<TenantTx, sqlx::Error> {
        self.bound_tx(tenant.as_str()).await
    }

    /// A transaction bound to `binding` (a tenant id, [`PURGE_MARKER`] or
    /// [`TENANTS_MARKER`]). A binding holding NUL (which no text value can)
    /// is refused before anything is sent.
    pub(crate) async fn bound_tx(&self, binding: &str) -> Result<TenantTx, sqlx::Error> {
        if binding.contains('\0') {
            return Err(sqlx::Error::Protocol("NUL in a tenant binding".into()));
        }
        let mut tx = self.pool.begin().await?;
        sqlx::query(BIND).bind(binding).execute(&mut *tx).await?;
        Ok(tx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::PgSettings;

    /// Whatever a binding holds reaches `app.tenant_id` as it is, quotes
    /// and all: it is a value, never part of a statement. (PostgreSQL only:
    /// skipped with a notice without `PINFOLD_TEST_DATABASE_URL`.)
    #[tokio::test]
    async fn a_binding_is_sent_as_a_value_never_as_sql() {
        let Ok(url) = std::env::var("PINFOLD_TEST_DATABASE_URL") else {
            eprintln!("notice: the tenant binding test needs PINFOLD_TEST_DATABASE_URL; skipped");
            return;
        };
        let store = PgStore::connect(
            &url,
            &PgSettings {
                max_connections: 1,
                ..PgSettings::default()
            },
        )
        .await
        .unwrap();
        for binding in [
            "acme",
            PURGE_MARKER,
            "o'brien",
            "x'); SELECT set_config('app.tenant_id', 'other', false); --",
            "back\\slash $1 $$ dollar",
            "ünïcødé",
        ] {
            let mut tx = store.bound_tx(binding).await.unwrap();
            let seen: String = sqlx::query_scalar("SELECT current_setting('app.tenant_id')")
                .fetch_one(&mut *tx)
                .await
                .unwrap();
            assert_eq!(seen, binding);
            tx.rollback().await.unwrap();
            // Transaction-local: nothing stays on the pooled connection.
            let after: Option<String> =
                sqlx::query_scalar("SELECT current_setting('app.tenant_id', true)")
                    .fetch_one(store.pool())
                    .await
                    .unwrap();
            assert_eq!(after.unwrap_or_default(), "", "after {binding:?}");
        }
        assert!(store.bound_tx("nul\0inside").await.is_err());
        store.close().await;
    }
}
