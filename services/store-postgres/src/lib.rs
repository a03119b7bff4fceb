//! pinfold-store-postgres: the production PostgreSQL backend.
//!
//! One of the only two crates that contain SQL. It implements the store
//! traits of the service crates on PostgreSQL: a bounded pool with acquire,
//! connect and statement timeouts; uniqueness and immutability enforced by
//! constraints and triggers, so N stateless replicas can share one database.
//!
//! `store` holds [`PgStore`] (the pool, its settings and its lifecycle),
//! `tenant_tx` the transactions bound to one tenant for row-level security,
//! `migrate` the embedded migrations, `tenancy`, `registry`, `resolve` and
//! `scope` one store trait each, `sealed` the walk over sealed values that
//! key rotation re-seals, `notify` the announcements of changes to
//! other replicas, `listener` the task that receives them, and `nodelay`
//! `TCP_NODELAY` on the pool's TCP connections.

mod console;
mod guard;
mod listener;
mod migrate;
pub mod nodelay;
mod notify;
mod registry;
mod resolve;
mod scope;
mod sealed;
mod store;
mod tenancy;
mod tenant_tx;

pub use listener::ListenerStatus;
pub use migrate::MIGRATOR;
pub use notify::{REGISTRY_CHANNEL, RESOLVE_CHANNEL};
pub use store::{PgSettings, PgStore};
pub use tenant_tx::{PURGE_MARKER, TENANTS_MARKER};
