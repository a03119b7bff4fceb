//! Database-level guarantees on the backend under test.

use std::collections::BTreeSet;

use signet_server::store::Store;
use signet_tests::*;

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
    store.migrate().await.unwrap();
    assert!(store.pending_migrations().await.unwrap().is_empty());
    store.migrate().await.unwrap();
    assert!(store.pending_migrations().await.unwrap().is_empty());
    store.close().await;
    // A second process opening the same database finds nothing to do either.
    let again = Store::open(&cfg).await.unwrap();
    assert!(again.pending_migrations().await.unwrap().is_empty());
    again.migrate().await.unwrap();
    again.close().await;
}

#[tokio::test]
async fn serve_refuses_pending_migrations_when_told_not_to_migrate() {
    let db = fresh_db().await;
    let mut cfg = config_for(&db);
    cfg.migrate_on_start = false;
    let err = signet_server::serve::open_store(&cfg)
        .await
        .expect_err("must refuse");
    let msg = format!("{err:#}");
    assert!(msg.contains("pending migration"), "{msg}");
    assert!(msg.contains("signet migrate"), "{msg}");
    // After `signet migrate` it starts.
    Store::open(&cfg).await.unwrap().migrate().await.unwrap();
    signet_server::serve::open_store(&cfg)
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
        Store::Postgres(s) => {
            let e = sqlx::query(update).execute(s.pool()).await.unwrap_err();
            assert!(e.to_string().contains("append-only"), "{e}");
            let e = sqlx::query(delete).execute(s.pool()).await.unwrap_err();
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
