//! pinfold-tenancy: tenants, their policies and the append-only audit log.
//!
//! This is the platform layer under the three services: it owns the tenant
//! model, the [`TenantStore`] trait that the store crates implement, and the
//! `/v1/tenants` routes. It knows no SQL (the store crates do) and no other
//! service.

pub mod model;
pub mod routes;
pub mod store;

pub use model::{AuditEvent, AuditFilter, Mode, Policy, PolicyRecord, TenantRecord};
pub use routes::{NoHooks, TenancyState, TenantHooks, router};
pub use store::{StoreError, TenantStore};
