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

/// `value` as an SQL string literal: quotes doubled; refuses NUL, which a
/// literal cannot hold. (With `standard_conforming_strings` on, the
/// default since PostgreSQL 9.1, a backslash is an ordinary character.)
fn sql_literal(value: &str) -> Result<String, sqlx::Error> {
    if value.contains('\0') {
        return Err(sqlx::Error::Protocol("NUL in a tenant binding".into()));
    }
    Ok(format!("'{}'", value.replace('\'', "''")))
}

/// The statement opening a transaction bound to `binding`: `BEGIN` and the
/// transaction-local `app.tenant_id` in one simple-query message, so one
/// round trip. `set_config(..., true)` ends with the transaction, so the
/// binding never outlives it on a pooled connection.
fn begin_bound(binding: &str) -> Result<String, sqlx::Error> {
    Ok(format!(
        "BEGIN; SELECT set_config('app.tenant_id', {}, true)",
        sql_literal(binding)?
    ))
}

impl PgStore {
    /// A transaction bound to `tenant`: every statement in it sees and
    /// writes only that tenant's rows (row-level security, migration
    /// 0005). One round trip opens it. A read-only caller may drop it
    /// instead of committing: sqlx then queues the `ROLLBACK`, which goes
    /// out with the connection's release check, off the request's path.
    pub(crate) async fn tenant_tx(&self, tenant: &TenantId) -> Result<TenantTx, sqlx::Error> {
        self.bound_tx(tenant.as_str()).await
    }

    /// A transaction bound to `binding` (a tenant id or a marker).
    pub(crate) async fn bound_tx(&self, binding: &str) -> Result<TenantTx, sqlx::Error> {
        self.pool
            .begin_with(sqlx::AssertSqlSafe(begin_bound(binding)?))
            .await
    }
}
