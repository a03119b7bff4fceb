//! Opening the configured database.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use pinfold_core::ids::TenantId;
use pinfold_store_postgres::{PgSettings, PgStore};
use pinfold_store_rows::{Replacement, SealedColumn, SealedDbRow};
use pinfold_store_sqlite::SqliteStore;
use pinfold_tenancy::TenantStore;

use crate::config::{Backend, Config, redact_url};

/// The concrete store behind every service trait.
#[derive(Clone, Debug)]
pub enum Store {
    /// Embedded SQLite.
    Sqlite(SqliteStore),
    /// PostgreSQL.
    Postgres(PgStore),
}

impl Store {
    /// Connects to the configured database (creating the SQLite file and
    /// data directory if needed).
    pub async fn open(cfg: &Config) -> anyhow::Result<Store> {
        match cfg.backend()? {
            Backend::Sqlite(url) => {
                std::fs::create_dir_all(&cfg.data_dir).with_context(|| {
                    format!("cannot create data directory {}", cfg.data_dir.display())
                })?;
                let s = SqliteStore::connect(&url)
                    .await
                    .with_context(|| format!("cannot open SQLite database {url}"))?;
                Ok(Store::Sqlite(s))
            }
            Backend::Postgres(url) => {
                let settings = PgSettings {
                    max_connections: cfg.postgres.max_connections,
                    acquire_timeout: Duration::from_secs(cfg.postgres.acquire_timeout_secs),
                    statement_timeout: Duration::from_secs(cfg.postgres.statement_timeout_secs),
                    tcp_nodelay: true,
                };
                let s = PgStore::connect(&url, &settings).await.with_context(|| {
                    format!(
                        "cannot reach PostgreSQL at {} (is it running, and is the URL right?)",
                        redact_url(&url)
                    )
                })?;
                Ok(Store::Postgres(s))
            }
        }
    }

    /// A short name for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Store::Sqlite(_) => "sqlite",
            Store::Postgres(_) => "postgres",
        }
    }

    /// The tenant store.
    pub fn tenants(&self) -> Arc<dyn TenantStore> {
        match self {
            Store::Sqlite(s) => Arc::new(s.clone()),
            Store::Postgres(s) => Arc::new(s.clone()),
        }
    }

    /// The registry store.
    pub fn registry(&self) -> Arc<dyn pinfold_registry::RegistryStore> {
        match self {
            Store::Sqlite(s) => Arc::new(s.clone()),
            Store::Postgres(s) => Arc::new(s.clone()),
        }
    }

    /// The resolve service's session store.
    pub fn sessions(&self) -> Arc<dyn pinfold_resolve::SessionStore> {
        match self {
            Store::Sqlite(s) => Arc::new(s.clone()),
            Store::Postgres(s) => Arc::new(s.clone()),
        }
    }

    /// The review console's session store.
    pub fn console(&self) -> Arc<dyn pinfold_console::ConsoleStore> {
        match self {
            Store::Sqlite(s) => Arc::new(s.clone()),
            Store::Postgres(s) => Arc::new(s.clone()),
        }
    }

    /// The scope service's store.
    pub fn scope(&self) -> Arc<dyn pinfold_scope::ScopeStore> {
        match self {
            Store::Sqlite(s) => Arc::new(s.clone()),
            Store::Postgres(s) => Arc::new(s.clone()),
        }
    }

    /// The guard's route store.
    pub fn guard(&self) -> Arc<dyn pinfold_guard::store::GuardStore> {
        match self {
            Store::Sqlite(s) => Arc::new(s.clone()),
            Store::Postgres(s) => Arc::new(s.clone()),
        }
    }

    /// Applies pending migrations: on PostgreSQL as the owner at
    /// `owner_url` when one is given (the runtime role owns nothing and
    /// cannot), else over this store's own connection.
    pub async fn migrate(&self, owner_url: Option<&str>) -> anyhow::Result<()> {
        match (self, owner_url) {
            (Store::Sqlite(s), _) => s.migrate().await?,
            (Store::Postgres(_), Some(owner)) => PgStore::migrate_as_owner(owner)
                .await
                .with_context(|| format!("as the owner at {}", redact_url(owner)))?,
            (Store::Postgres(s), None) => s.migrate().await?,
        }
        Ok(())
    }

    /// Versions not yet applied.
    pub async fn pending_migrations(&self) -> anyhow::Result<Vec<i64>> {
        Ok(match self {
            Store::Sqlite(s) => s.pending_migrations().await?,
            Store::Postgres(s) => s.pending_migrations().await?,
        })
    }

    /// Up to `limit` tenant ids greater than `after` (`""` first), in
    /// order (on PostgreSQL under the tenant-listing binding).
    pub async fn tenant_ids(&self, after: &str, limit: u32) -> anyhow::Result<Vec<TenantId>> {
        Ok(match self {
            Store::Sqlite(s) => s.tenant_ids(after, limit).await?,
            Store::Postgres(s) => s.tenant_ids(after, limit).await?,
        })
    }

    /// Up to `limit` of `tenant`'s sealed values in `column` after row key
    /// `after` (`""` first), by key.
    pub async fn sealed_values(
        &self,
        tenant: &TenantId,
        column: SealedColumn,
        after: &str,
        limit: u32,
    ) -> anyhow::Result<Vec<SealedDbRow>> {
        Ok(match self {
            Store::Sqlite(s) => s.sealed_values(tenant, column, after, limit).await?,
            Store::Postgres(s) => s.sealed_values(tenant, column, after, limit).await?,
        })
    }

    /// Writes the replacements whose rows still hold the value that was
    /// read, in one transaction; how many were written.
    pub async fn replace_sealed(
        &self,
        tenant: &TenantId,
        column: SealedColumn,
        replacements: &[Replacement],
    ) -> anyhow::Result<u64> {
        Ok(match self {
            Store::Sqlite(s) => s.replace_sealed(tenant, column, replacements).await?,
            Store::Postgres(s) => s.replace_sealed(tenant, column, replacements).await?,
        })
    }

    /// Closes the pool.
    pub async fn close(&self) {
        match self {
            Store::Sqlite(s) => s.close().await,
            Store::Postgres(s) => s.close().await,
        }
    }
}
