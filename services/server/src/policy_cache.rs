//! Tenant policies as the resolve path reads them: on every resolve, so
//! that a tightened policy reaches sessions that are already open, and
//! therefore from memory.
//!
//! [`PolicyCache`] keeps each tenant's policy for at most a second. A
//! change made through this process drops the tenant's copy at once:
//! [`Announcing`] wraps the tenant store the tenancy routes write through
//! and, after a policy write commits, invalidates the copy. Another
//! replica's change is seen within the second.
//!
//! While the database cannot be reached, the last policy read for a
//! tenant (at most [`LAST_KNOWN_TTL`] old) goes on being used, so that
//! open sessions keep resolving from the cache through an outage, as they
//! did before policies were read on the resolve path. A change made
//! through this process forgets that copy too: after a write the policy
//! is read again, or the request fails.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pinfold_core::ids::{TenantId, Timestamp};
use pinfold_http::hot::{HotCache, KeyHasher};
use pinfold_tenancy::model::{
    AuditEvent, AuditFilter, NewAuditEvent, Policy, PolicyRecord, TenantRecord,
};
use pinfold_tenancy::{StoreError, TenantStore};

/// How long a policy read from the database is used.
pub const POLICY_TTL: Duration = Duration::from_secs(1);

/// How long the last policy read is used while the database is
/// unavailable (the longest a session may live).
pub const LAST_KNOWN_TTL: Duration = Duration::from_secs(24 * 3600);

/// Tenants whose policies are kept at once.
const CAPACITY: u64 = 100_000;

/// A tenant's policy as read at one moment.
#[derive(Debug)]
pub struct TenantPolicy {
    /// Whose it is (a hash collision in the cache is a miss).
    pub tenant: TenantId,
    /// The stored policy.
    pub record: PolicyRecord,
}

/// Recently read tenant policies.
pub struct PolicyCache {
    store: Arc<dyn TenantStore>,
    cache: HotCache<Arc<TenantPolicy>>,
    last_known: HotCache<Arc<TenantPolicy>>,
    hasher: KeyHasher,
}

impl PolicyCache {
    /// A cache in front of `store`'s policies.
    pub fn new(store: Arc<dyn TenantStore>) -> Arc<Self> {
        Arc::new(PolicyCache {
            store,
            cache: HotCache::new(CAPACITY, POLICY_TTL),
            last_known: HotCache::new(CAPACITY, LAST_KNOWN_TTL),
            hasher: KeyHasher::default(),
        })
    }

    fn key(&self, tenant: &TenantId) -> u64 {
        use std::hash::BuildHasher as _;
        self.hasher.hash_one(tenant.as_str())
    }

    /// The tenant's policy, at most [`POLICY_TTL`] old (`None`: no such
    /// tenant; not remembered). When the store fails, the last policy
    /// read for the tenant if there is one, else the store's error.
    pub async fn policy(&self, tenant: &TenantId) -> Result<Option<Arc<TenantPolicy>>, StoreError> {
        let key = self.key(tenant);
        if let Some(p) = self.cache.get(key).filter(|p| p.tenant == *tenant) {
            return Ok(Some(p));
        }
        let rec = match self.store.policy(tenant).await {
            Ok(Some(rec)) => rec,
            Ok(None) => return Ok(None),
            Err(e) => {
                return match self.last_known.get(key).filter(|p| p.tenant == *tenant) {
                    Some(p) => {
                        tracing::debug!(tenant = %tenant, error = %e, "policy read failed; using the last one read");
                        Ok(Some(p))
                    }
                    None => Err(e),
                };
            }
        };
        let rec = Arc::new(TenantPolicy {
            tenant: tenant.clone(),
            record: rec,
        });
        self.cache.insert(key, rec.clone(), 1);
        self.last_known.insert(key, rec.clone(), 1);
        Ok(Some(rec))
    }

    /// Forgets the tenant's policy (it was just replaced).
    pub fn invalidate(&self, tenant: &TenantId) {
        let key = self.key(tenant);
        self.cache.invalidate(key);
        self.last_known.invalidate(key);
    }
}

/// A tenant store that invalidates the [`PolicyCache`] after each policy
/// write it commits; every other call goes through unchanged.
pub struct Announcing {
    inner: Arc<dyn TenantStore>,
    policies: Arc<PolicyCache>,
}

impl Announcing {
    /// `inner`, announcing its policy writes to `policies`.
    pub fn wrap(inner: Arc<dyn TenantStore>, policies: &Arc<PolicyCache>) -> Arc<dyn TenantStore> {
        Arc::new(Announcing {
            inner,
            policies: policies.clone(),
        })
    }
}

#[async_trait]
impl TenantStore for Announcing {
    async fn create_tenant(
        &self,
        tenant: &TenantId,
        name: &str,
        policy: &Policy,
        actor: &str,
        at: Timestamp,
    ) -> Result<TenantRecord, StoreError> {
        let r = self
            .inner
            .create_tenant(tenant, name, policy, actor, at)
            .await;
        self.policies.invalidate(tenant);
        r
    }

    async fn tenant(&self, tenant: &TenantId) -> Result<Option<TenantRecord>, StoreError> {
        self.inner.tenant(tenant).await
    }

    async fn policy(&self, tenant: &TenantId) -> Result<Option<PolicyRecord>, StoreError> {
        self.inner.policy(tenant).await
    }

    async fn put_policy(
        &self,
        tenant: &TenantId,
        policy: &Policy,
        expected_revision: Option<i64>,
        actor: &str,
        at: Timestamp,
    ) -> Result<PolicyRecord, StoreError> {
        let r = self
            .inner
            .put_policy(tenant, policy, expected_revision, actor, at)
            .await;
        // Also after a failure: whether it committed is then unknown.
        self.policies.invalidate(tenant);
        r
    }

    async fn append_audit(
        &self,
        tenant: &TenantId,
        event: &NewAuditEvent,
    ) -> Result<i64, StoreError> {
        self.inner.append_audit(tenant, event).await
    }

    async fn audit(
        &self,
        tenant: &TenantId,
        filter: &AuditFilter,
        after: Option<i64>,
        limit: u32,
    ) -> Result<Vec<AuditEvent>, StoreError> {
        self.inner.audit(tenant, filter, after, limit).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }
}
