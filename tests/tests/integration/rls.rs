//! PostgreSQL row-level security (migration 0005): the catalog says every
//! tenant table is isolated and the runtime role cannot get around it, and
//! the isolation holds when tried directly as that role. On SQLite these
//! tests print a notice and pass: it has neither roles nor policies.

use pinfold_server::store::Store;
use pinfold_store_postgres::{PgSettings, PgStore};
use pinfold_tenancy::TenantStore;
use pinfold_tests::*;

/// Tables whose rows are never changed or removed once written: the
/// runtime role must hold neither UPDATE nor DELETE on them.
const IMMUTABLE: [&str; 7] = [
    "tenants",
    "servers",
    "versions",
    "version_reviews",
    "audit_events",
    "tenant_keys",
    "guard_drifts",
];

fn skip_on_sqlite(what: &str) -> bool {
    if backend() == Backend::Sqlite {
        eprintln!("notice: {what} concerns PostgreSQL row-level security; skipped on SQLite");
        return true;
    }
    false
}

/// Every table of the schema that holds tenant rows, with the column that
/// names the tenant (`tenants` is keyed on `id`).
async fn tenant_tables(owner: &sqlx::PgPool) -> Vec<(String, String)> {
    let mut tables: Vec<(String, String)> = sqlx::query_as(
        "SELECT c.relname::text, 'tenant_id'
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
           AND EXISTS (SELECT 1 FROM pg_attribute a
                       WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped)
         ORDER BY 1",
    )
    .fetch_all(owner)
    .await
    .unwrap();
    tables.push(("tenants".into(), "id".into()));
    tables
}

/// The store's own pool (the runtime role).
fn runtime_pool(app: &TestApp) -> &sqlx::PgPool {
    match &app.store {
        Store::Postgres(pg) => pg.pool(),
        Store::Sqlite(_) => unreachable!("PostgreSQL only"),
    }
}

#[tokio::test]
async fn every_tenant_table_forces_row_level_security_and_the_runtime_role_cannot_bypass_it() {
    if skip_on_sqlite("the RLS catalog check") {
        return;
    }
    let app = TestApp::new().await;
    let owner = app.owner_pool().await.unwrap();
    let tables = tenant_tables(&owner).await;
    // The schema's tenant tables, all of them found.
    for t in [
        "tenants",
        "tenant_policies",
        "audit_events",
        "versions",
        "version_status",
        "resolve_sessions",
        "scope_grant_states",
        "guard_routes",
        "guard_drifts",
    ] {
        assert!(tables.iter().any(|(n, _)| n == t), "{t} not found");
    }
    let mut missing = Vec::new();
    for (table, column) in &tables {
        let (rls, force): (bool, bool) = sqlx::query_as(
            "SELECT relrowsecurity, relforcerowsecurity FROM pg_class
             WHERE oid = to_regclass($1)",
        )
        .bind(table)
        .fetch_one(&owner)
        .await
        .unwrap();
        // A policy for every command, admitting and accepting only the
        // bound tenant's rows.
        let isolating: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_policy
             WHERE polrelid = to_regclass($1) AND polcmd = '*' AND polpermissive
               AND pg_get_expr(polqual, polrelid) LIKE '%' || $2 || '%app.tenant_id%'
               AND pg_get_expr(polwithcheck, polrelid) LIKE '%' || $2 || '%app.tenant_id%'",
        )
        .bind(table)
        .bind(column)
        .fetch_one(&owner)
        .await
        .unwrap();
        if !rls {
            missing.push(format!("{table}: ROW LEVEL SECURITY not enabled"));
        }
        if !force {
            missing.push(format!("{table}: ROW LEVEL SECURITY not forced"));
        }
        if isolating == 0 {
            missing.push(format!("{table}: no tenant isolation policy"));
        }
    }
    // No other policy widens what a binding admits (permissive policies
    // are OR-ed): the only exceptions are the purge marker's, reading and
    // deleting expired rows, and the tenant-listing marker's, reading the
    // tenants (migration 0007).
    let others: Vec<(String, String, String, String)> = sqlx::query_as(
        "SELECT c.relname::text, p.polname::text, p.polcmd::text,
                coalesce(pg_get_expr(p.polqual, p.polrelid), '')
         FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
         JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = current_schema() AND p.polname <> 'tenant_isolation'",
    )
    .fetch_all(&owner)
    .await
    .unwrap();
    for (table, name, cmd, qual) in &others {
        let purge = matches!(
            table.as_str(),
            "resolve_sessions" | "scope_grant_states" | "console_sessions"
        ) && name.starts_with("maintenance_purge_")
            && matches!(cmd.as_str(), "r" | "d")
            && qual.contains("'maintenance:purge'")
            && qual.contains("expires_at <");
        let listing = table == "tenants"
            && name == "maintenance_tenants_select"
            && cmd == "r"
            && qual
                == "(current_setting('app.tenant_id'::text, true) = 'maintenance:tenants'::text)";
        if !purge && !listing {
            missing.push(format!("{table}: unexpected policy {name} ({cmd}): {qual}"));
        }
    }
    assert!(missing.is_empty(), "{missing:#?}");

    // The store really connects as the runtime role.
    let me: String = sqlx::query_scalar("SELECT current_user::text")
        .fetch_one(runtime_pool(&app))
        .await
        .unwrap();
    assert_eq!(me, RUNTIME_ROLE);
    for role in [RUNTIME_ROLE, "pinfold_runtime"] {
        // Neither the role nor any role it is a member of may bypass RLS.
        let bypassing: Vec<String> = sqlx::query_scalar(
            "SELECT rolname::text FROM pg_roles
             WHERE pg_has_role($1, oid, 'MEMBER') AND (rolsuper OR rolbypassrls)",
        )
        .bind(role)
        .fetch_all(&owner)
        .await
        .unwrap();
        assert!(
            bypassing.is_empty(),
            "{role} can bypass RLS via {bypassing:?}"
        );
        // It owns nothing (an owner could turn RLS off).
        let owned: Vec<String> = sqlx::query_scalar(
            "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = current_schema() AND pg_has_role($1, c.relowner, 'MEMBER')",
        )
        .bind(role)
        .fetch_all(&owner)
        .await
        .unwrap();
        assert!(owned.is_empty(), "{role} owns {owned:?}");
        // Column UPDATE grants beyond the tables it may update: only the
        // sealed columns, which `pinfold keys reseal` rewrites.
        let columns: Vec<String> = sqlx::query_scalar(
            "SELECT c.relname || '.' || a.attname
             FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
             JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = current_schema() AND c.relkind = 'r'
               AND a.attnum > 0 AND NOT a.attisdropped
               AND has_column_privilege($1, c.oid, a.attnum, 'UPDATE')
               AND NOT has_table_privilege($1, c.oid, 'UPDATE')
             ORDER BY 1",
        )
        .bind(role)
        .fetch_all(&owner)
        .await
        .unwrap();
        assert_eq!(
            columns,
            [
                "resolve_sessions.upstream_sealed",
                "scope_grant_states.verifier_sealed",
                "tenant_keys.private_sealed"
            ],
            "{role}"
        );
        for table in IMMUTABLE {
            for privilege in ["UPDATE", "DELETE", "TRUNCATE"] {
                let has: bool = sqlx::query_scalar("SELECT has_table_privilege($1, $2, $3)")
                    .bind(role)
                    .bind(table)
                    .bind(privilege)
                    .fetch_one(&owner)
                    .await
                    .unwrap();
                assert!(!has, "{role} has {privilege} on immutable {table}");
            }
        }
    }
}

/// Counts `table`'s rows of `tenant` through `conn` as it is bound.
async fn count_of(conn: &mut sqlx::PgConnection, table: &str, column: &str, tenant: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM {table} WHERE {column} = $1"
    )))
    .bind(tenant)
    .fetch_one(conn)
    .await
    .unwrap()
}

#[tokio::test]
async fn as_the_runtime_role_another_tenants_rows_are_invisible_and_unwritable() {
    if skip_on_sqlite("direct isolation") {
        return;
    }
    let app = TestApp::new().await;
    let a = app.tenant.clone();
    let b = app.new_tenant().await;
    let owner = app.owner_pool().await.unwrap();
    let tables = tenant_tables(&owner).await;
    // What the owner sees of B: the tables a new tenant writes to.
    let mut seen_by_owner = 0;
    for (table, column) in &tables {
        let mut conn = owner.acquire().await.unwrap();
        if count_of(&mut conn, table, column, b.as_str()).await > 0 {
            seen_by_owner += 1;
        }
    }
    assert!(
        seen_by_owner >= 3,
        "tenant B wrote rows to {seen_by_owner} tables"
    );

    let pool = runtime_pool(&app);
    for binding in [Some(a.as_str()), Some("maintenance:purge"), None] {
        let mut tx = pool.begin().await.unwrap();
        if let Some(binding) = binding {
            sqlx::query("SELECT set_config('app.tenant_id', $1, true)")
                .bind(binding)
                .execute(&mut *tx)
                .await
                .unwrap();
        }
        for (table, column) in &tables {
            assert_eq!(
                count_of(&mut tx, table, column, b.as_str()).await,
                0,
                "{table}: B's rows visible when bound to {binding:?}"
            );
        }
        let own = count_of(&mut tx, "tenants", "id", a.as_str()).await;
        assert_eq!(own, i64::from(binding == Some(a.as_str())), "{binding:?}");
        // Writing B's rows is refused, whatever the binding.
        let denied = sqlx::query(
            "INSERT INTO audit_events (tenant_id, at, actor, kind, data)
             VALUES ($1, 0, 'mallory', 'x', '{}'::jsonb)",
        )
        .bind(b.as_str())
        .execute(&mut *tx)
        .await
        .unwrap_err();
        assert!(
            denied.to_string().contains("row-level security"),
            "{binding:?}: {denied}"
        );
        tx.rollback().await.unwrap();
    }
    // Bound to A, A's rows are there and A may write them.
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("SELECT set_config('app.tenant_id', $1, true)")
        .bind(a.as_str())
        .execute(&mut *tx)
        .await
        .unwrap();
    assert_eq!(
        count_of(&mut tx, "tenant_policies", "tenant_id", a.as_str()).await,
        1
    );
    sqlx::query(
        "INSERT INTO audit_events (tenant_id, at, actor, kind, data)
         VALUES ($1, 0, 'tester', 'x', '{}'::jsonb)",
    )
    .bind(a.as_str())
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.rollback().await.unwrap();
}

#[tokio::test]
async fn the_tenant_binding_ends_with_its_transaction_on_a_pooled_connection() {
    if skip_on_sqlite("the transaction-local binding") {
        return;
    }
    let app = TestApp::new().await;
    // One connection, so every use below is the same session.
    let store = PgStore::connect(
        &app.db.url,
        &PgSettings {
            max_connections: 1,
            ..PgSettings::default()
        },
    )
    .await
    .unwrap();
    let probe = || async {
        let mut conn = store.pool().acquire().await.unwrap();
        let setting: Option<String> =
            sqlx::query_scalar("SELECT current_setting('app.tenant_id', true)")
                .fetch_one(&mut *conn)
                .await
                .unwrap();
        let visible: i64 = sqlx::query_scalar("SELECT count(*) FROM tenants")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        (setting.unwrap_or_default(), visible)
    };
    // A read (its transaction dropped, not committed), a write (committed),
    // a failed write (rolled back): none leaves the tenant bound.
    assert!(store.tenant(&app.tenant).await.unwrap().is_some());
    assert_eq!(probe().await, (String::new(), 0));
    let policy = store.policy(&app.tenant).await.unwrap().unwrap();
    store
        .put_policy(
            &app.tenant,
            &policy.policy,
            Some(policy.revision),
            "tester",
            pinfold_core::ids::Timestamp::from_millis(1),
        )
        .await
        .unwrap();
    assert_eq!(probe().await, (String::new(), 0));
    assert!(
        store
            .put_policy(
                &app.tenant,
                &policy.policy,
                Some(policy.revision),
                "tester",
                pinfold_core::ids::Timestamp::from_millis(2),
            )
            .await
            .is_err(),
        "a stale revision is refused"
    );
    assert_eq!(probe().await, (String::new(), 0));
    store.close().await;
}

#[tokio::test]
async fn the_purge_marker_reads_and_deletes_only_expired_grant_states() {
    if skip_on_sqlite("the purge marker's policies") {
        return;
    }
    let app = TestApp::new().await;
    let t = app.tenant.as_str();
    let owner = app.owner_pool().await.unwrap();
    // Arranged as the owner (a superuser in the suite): a provider, two
    // grants, one state long expired and one live for an hour.
    let now = i64::try_from(now()).unwrap() * 1000;
    sqlx::query(
        "INSERT INTO scope_providers (tenant_id, name, profile, revision, created_at, updated_at, updated_by)
         VALUES ($1, 'p', '{}'::jsonb, 1, 0, 0, 'tester')",
    )
    .bind(t)
    .execute(&owner)
    .await
    .unwrap();
    for (grant, expires_at) in [("expired", -100), ("live", now + 3_600_000)] {
        sqlx::query(
            "INSERT INTO scope_grants (tenant_id, id, provider, principal, issuer, redirect_uri,
                 requested, needed, status, created_at)
             VALUES ($1, $2, 'p', 'me', 'iss', 'https://app.example/cb', '[]'::jsonb, '[]'::jsonb, 'pending', 0)",
        )
        .bind(t)
        .bind(grant)
        .execute(&owner)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO scope_grant_states (tenant_id, grant_id, state_hash, verifier_sealed, expires_at)
             VALUES ($1, $2, repeat('a', 64), 'sealed', $3)",
        )
        .bind(t)
        .bind(grant)
        .bind(expires_at)
        .execute(&owner)
        .await
        .unwrap();
    }
    let pool = runtime_pool(&app);
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("SELECT set_config('app.tenant_id', 'maintenance:purge', true)")
        .execute(&mut *tx)
        .await
        .unwrap();
    let visible: Vec<String> = sqlx::query_scalar("SELECT grant_id FROM scope_grant_states")
        .fetch_all(&mut *tx)
        .await
        .unwrap();
    assert_eq!(visible, ["expired"], "the marker sees expired states only");
    for other in ["scope_grants", "scope_providers", "tenants", "audit_events"] {
        let n: i64 =
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {other}")))
                .fetch_one(&mut *tx)
                .await
                .unwrap();
        assert_eq!(n, 0, "the marker sees rows of {other}");
    }
    let deleted = sqlx::query("DELETE FROM scope_grant_states")
        .execute(&mut *tx)
        .await
        .unwrap()
        .rows_affected();
    assert_eq!(deleted, 1, "only the expired state is deleted");
    tx.commit().await.unwrap();
    // Nor may it insert, or update (the runtime role may update only the
    // sealed verifier of a grant state, and the marker sees no row to).
    for (write, refusal) in [
        (
            "INSERT INTO scope_grant_states (tenant_id, grant_id, state_hash, verifier_sealed, expires_at)
             VALUES ($1, 'expired', repeat('b', 64), 'sealed', -100)",
            "row-level security",
        ),
        (
            "UPDATE scope_grant_states SET expires_at = -1 WHERE tenant_id = $1",
            "permission denied",
        ),
    ] {
        let mut tx = pool.begin().await.unwrap();
        sqlx::query("SELECT set_config('app.tenant_id', 'maintenance:purge', true)")
            .execute(&mut *tx)
            .await
            .unwrap();
        let denied = sqlx::query(sqlx::AssertSqlSafe(write))
            .bind(t)
            .execute(&mut *tx)
            .await
            .unwrap_err();
        assert!(denied.to_string().contains(refusal), "{denied}");
    }
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("SELECT set_config('app.tenant_id', 'maintenance:purge', true)")
        .execute(&mut *tx)
        .await
        .unwrap();
    let rewritten = sqlx::query("UPDATE scope_grant_states SET verifier_sealed = 'x'")
        .execute(&mut *tx)
        .await
        .unwrap()
        .rows_affected();
    assert_eq!(rewritten, 0, "the marker rewrote a sealed verifier");
    tx.rollback().await.unwrap();
    let left: Vec<String> =
        sqlx::query_scalar("SELECT grant_id FROM scope_grant_states WHERE tenant_id = $1")
            .bind(t)
            .fetch_all(&owner)
            .await
            .unwrap();
    assert_eq!(left, ["live"]);
}

#[tokio::test]
async fn the_tenant_listing_marker_reads_the_tenants_and_nothing_else() {
    if skip_on_sqlite("the tenant-listing marker's policy") {
        return;
    }
    let app = TestApp::new().await;
    let (a, b) = (app.tenant.clone(), app.new_tenant().await);
    let owner = app.owner_pool().await.unwrap();
    let tables = tenant_tables(&owner).await;
    let pool = runtime_pool(&app);
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("SELECT set_config('app.tenant_id', 'maintenance:tenants', true)")
        .execute(&mut *tx)
        .await
        .unwrap();
    let mut ids: Vec<String> = sqlx::query_scalar("SELECT id FROM tenants")
        .fetch_all(&mut *tx)
        .await
        .unwrap();
    ids.sort();
    let mut want = vec![a.to_string(), b.to_string()];
    want.sort();
    assert_eq!(ids, want, "the marker lists every tenant");
    // No row of any other table, of either tenant (each has a policy, a
    // key, audit events).
    for (table, column) in tables.iter().filter(|(t, _)| t != "tenants") {
        for t in [&a, &b] {
            assert_eq!(
                count_of(&mut tx, table, column, t.as_str()).await,
                0,
                "the marker sees {t}'s rows of {table}"
            );
        }
    }
    tx.rollback().await.unwrap();
    // It writes nothing: neither tenants nor any tenant's rows.
    for (write, refusal) in [
        (
            "INSERT INTO tenants (id, name, created_at, created_by) VALUES ('mallory', 'm', 0, 'm')",
            "row-level security",
        ),
        (
            "INSERT INTO audit_events (tenant_id, at, actor, kind, data)
             VALUES ($1, 0, 'mallory', 'x', '{}'::jsonb)",
            "row-level security",
        ),
        (
            "UPDATE tenants SET name = 'x' WHERE id = $1",
            "permission denied",
        ),
    ] {
        let mut tx = pool.begin().await.unwrap();
        sqlx::query("SELECT set_config('app.tenant_id', 'maintenance:tenants', true)")
            .execute(&mut *tx)
            .await
            .unwrap();
        let denied = sqlx::query(sqlx::AssertSqlSafe(write))
            .bind(a.as_str())
            .execute(&mut *tx)
            .await
            .unwrap_err();
        assert!(denied.to_string().contains(refusal), "{write}: {denied}");
    }
    for sealed in [
        "UPDATE tenant_keys SET private_sealed = 'x'",
        "UPDATE resolve_sessions SET upstream_sealed = 'x'",
        "UPDATE scope_grant_states SET verifier_sealed = 'x'",
        "UPDATE scope_providers SET client_secret_sealed = 'x'",
    ] {
        let mut tx = pool.begin().await.unwrap();
        sqlx::query("SELECT set_config('app.tenant_id', 'maintenance:tenants', true)")
            .execute(&mut *tx)
            .await
            .unwrap();
        let n = sqlx::query(sqlx::AssertSqlSafe(sealed))
            .execute(&mut *tx)
            .await
            .unwrap()
            .rows_affected();
        assert_eq!(n, 0, "{sealed}");
        tx.rollback().await.unwrap();
    }
}
