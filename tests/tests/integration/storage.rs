//! Database-level guarantees on the backend under test.

use std::collections::BTreeSet;

use pinfold_server::store::Store;
use pinfold_tests::*;

fn versions(dir: &str) -> BTreeSet<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../migrations")
        .join(dir);
    std::fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".sql"))
        .map(|n| n.split('_').next().unwrap().to_owned())
        .collect()
}

#[test]
fn both_migration_folders_list_the_same_versions() {
    let pg = versions("postgres");
    let lite = versions("sqlite");
    assert!(!pg.is_empty());
    assert_eq!(
        pg, lite,
        "migrations/postgres and migrations/sqlite must stay in lock-step"
    );
}

#[tokio::test]
async fn migrations_applied_twice_are_a_no_op() {
    let db = fresh_db().await;
    let cfg = config_for(&db);
    let store = Store::open(&cfg).await.unwrap();
    assert!(!store.pending_migrations().await.unwrap().is_empty());
    let owner = cfg.owner_url().unwrap();
    store.migrate(owner.as_deref()).await.unwrap();
    assert!(store.pending_migrations().await.unwrap().is_empty());
    store.migrate(owner.as_deref()).await.unwrap();
    assert!(store.pending_migrations().await.unwrap().is_empty());
    store.close().await;
    // A second process opening the same database finds nothing to do either.
    let again = Store::open(&cfg).await.unwrap();
    assert!(again.pending_migrations().await.unwrap().is_empty());
    again.migrate(owner.as_deref()).await.unwrap();
    again.close().await;
}

#[tokio::test]
async fn serve_refuses_pending_migrations_when_told_not_to_migrate() {
    let db = fresh_db().await;
    let mut cfg = config_for(&db);
    cfg.migrate_on_start = false;
    let err = pinfold_server::serve::open_store(&cfg)
        .await
        .expect_err("must refuse");
    let msg = format!("{err:#}");
    assert!(msg.contains("pending migration"), "{msg}");
    assert!(msg.contains("pinfold migrate"), "{msg}");
    // After `pinfold migrate` it starts.
    Store::open(&cfg)
        .await
        .unwrap()
        .migrate(cfg.owner_url().unwrap().as_deref())
        .await
        .unwrap();
    pinfold_server::serve::open_store(&cfg)
        .await
        .unwrap()
        .close()
        .await;
}

#[tokio::test]
async fn the_audit_log_is_append_only_in_the_database() {
    let app = TestApp::new().await;
    let update = "UPDATE audit_events SET actor = 'mallory'";
    let delete = "DELETE FROM audit_events";
    match &app.store {
        Store::Sqlite(s) => {
            let e = sqlx::query(update).execute(s.pool()).await.unwrap_err();
            assert!(e.to_string().contains("append-only"), "{e}");
            let e = sqlx::query(delete).execute(s.pool()).await.unwrap_err();
            assert!(e.to_string().contains("append-only"), "{e}");
        }
        Store::Postgres(_) => {
            let e = sqlx::query(update)
                .execute(&app.owner_pool().await.unwrap())
                .await
                .unwrap_err();
            assert!(e.to_string().contains("append-only"), "{e}");
            let e = sqlx::query(delete)
                .execute(&app.owner_pool().await.unwrap())
                .await
                .unwrap_err();
            assert!(e.to_string().contains("append-only"), "{e}");
        }
    }
    let audit = app
        .get(&format!("/v1/tenants/{}/audit", app.tenant), &app.admin())
        .await
        .json();
    assert_eq!(audit["items"][0]["actor"], "platform-op");
}

#[tokio::test]
async fn the_suite_runs_on_the_backend_it_was_asked_for() {
    let app = TestApp::new().await;
    match (backend(), &app.store) {
        (Backend::Sqlite, Store::Sqlite(_)) | (Backend::Postgres(_), Store::Postgres(_)) => {}
        (b, s) => panic!("asked for {b:?}, got {}", s.kind()),
    }
}

/// sqlx 0.9.0 opens TCP connections with Nagle's algorithm on (sqlx issue
/// 4335), which holds the tail of a large statement for a delayed ACK.
/// Every connection of the server's pool must have `TCP_NODELAY`; a pool
/// built without the fix shows the option off, so this test fails without
/// it.
#[tokio::test]
async fn postgres_connections_over_tcp_have_nodelay() {
    use pinfold_store_postgres::{PgSettings, PgStore, nodelay};
    if backend() == Backend::Sqlite {
        eprintln!("notice: TCP_NODELAY concerns PostgreSQL connections; SQLite has no socket");
        return;
    }
    let app = TestApp::new().await;
    let Store::Postgres(store) = &app.store else {
        panic!("PostgreSQL expected")
    };
    let mut probe = store.pool().acquire().await.unwrap();
    if nodelay::endpoints(&mut probe).await.unwrap().is_none() {
        // A Unix-socket URL: no TCP, nothing to set, and nothing reported.
        assert_eq!(nodelay::is_enabled(&mut probe).await.unwrap(), None);
        eprintln!(
            "notice: PINFOLD_TEST_DATABASE_URL is a Unix socket; TCP_NODELAY is checked over TCP only"
        );
        return;
    }
    drop(probe);
    // The server's own pool (as `pinfold serve` opens it): hold several
    // connections at once, so that several sockets are checked.
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(store.pool().acquire().await.unwrap());
    }
    for conn in &mut held {
        assert_eq!(
            nodelay::is_enabled(conn).await.unwrap(),
            Some(true),
            "a pooled PostgreSQL connection over TCP without TCP_NODELAY"
        );
    }
    // The same pool without the fix: what sqlx does by itself.
    let bare = PgStore::connect(
        &app.db.url,
        &PgSettings {
            max_connections: 1,
            tcp_nodelay: false,
            ..PgSettings::default()
        },
    )
    .await
    .unwrap();
    let mut conn = bare.pool().acquire().await.unwrap();
    assert_eq!(nodelay::is_enabled(&mut conn).await.unwrap(), Some(false));
    // Enabling is idempotent: on once, then found on.
    assert_eq!(nodelay::enable(&mut conn).await, nodelay::Outcome::Set);
    assert_eq!(
        nodelay::enable(&mut conn).await,
        nodelay::Outcome::AlreadySet
    );
    assert_eq!(nodelay::is_enabled(&mut conn).await.unwrap(), Some(true));
    drop(conn);
    bare.close().await;
}
