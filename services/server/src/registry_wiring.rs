//! Wiring of the registry service: its policy source over the tenancy
//! store, the attestation keyring, and cross-replica index invalidation.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use async_trait::async_trait;
use pinfold_core::card::Limits;
use pinfold_core::ids::TenantId;
use pinfold_registry::index::EtagIndex;
use pinfold_registry::keys::Keyring;
use pinfold_registry::{
    EnforcementModes, PolicySource, RegistryPolicy, RegistryState, RegistryStoreError,
};
use pinfold_tenancy::{StoreError, TenantStore};

use crate::config::Config;
use crate::store::Store;

fn policy_error(e: StoreError) -> RegistryStoreError {
    match e {
        StoreError::Unavailable(m) => RegistryStoreError::Unavailable(m),
        other => RegistryStoreError::Other(other.to_string()),
    }
}

/// The registry's view of tenant policies, read from the tenancy store.
pub struct TenancyPolicies(pub Arc<dyn TenantStore>);

#[async_trait]
impl PolicySource for TenancyPolicies {
    async fn registry_policy(
        &self,
        tenant: &TenantId,
        server_key: &str,
    ) -> Result<Option<RegistryPolicy>, RegistryStoreError> {
        let rec = self.0.policy(tenant).await.map_err(policy_error)?;
        Ok(rec.map(|r| RegistryPolicy {
            approval_required: r.policy.approval_required,
            mode: r.policy.mode_for(server_key),
        }))
    }

    async fn enforcement_modes(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<EnforcementModes>, RegistryStoreError> {
        let rec = self.0.policy(tenant).await.map_err(policy_error)?;
        Ok(rec.map(|r| {
            let default = r.policy.enforcement_mode;
            // Every override, in the policy's order, with the mode it
            // resolves to: the first name that matches decides, exactly as
            // `Policy::mode_for` does.
            let overrides = r
                .policy
                .overrides
                .servers
                .iter()
                .map(|(name, o)| (name.clone(), o.enforcement_mode.unwrap_or(default)))
                .collect();
            EnforcementModes { default, overrides }
        }))
    }
}

/// Tenant-creation work of the registry: create the attestation key with the
/// tenant.
pub struct RegistryTenantHooks(pub RegistryState);

#[async_trait]
impl pinfold_tenancy::TenantHooks for RegistryTenantHooks {
    async fn tenant_created(&self, tenant: &TenantId) -> Result<(), String> {
        pinfold_registry::service::tenant_key(&self.0, tenant)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

const KEY_FILE: &str = "encryption-key";

/// The keyring: the current key from `encryption_key`, or in dev mode from
/// (or into) the data directory, and the old keys of
/// `encryption_keys_old`. An error names the setting, never a key.
pub fn keyring(cfg: &Config) -> anyhow::Result<Keyring> {
    configured_keyring(cfg, true)
}

/// [`keyring`] for commands that work on stored secrets (`pinfold keys`):
/// in dev mode the data directory's key must exist already (a new key
/// would open nothing stored).
pub fn existing_keyring(cfg: &Config) -> anyhow::Result<Keyring> {
    configured_keyring(cfg, false)
}

fn configured_keyring(cfg: &Config, create: bool) -> anyhow::Result<Keyring> {
    let current = if let Some(k) = &cfg.encryption_key {
        Keyring::from_base64(k).context("encryption_key")?
    } else if !cfg.dev_mode() {
        bail!(
            "encryption_key is required outside dev mode (32 random bytes, base64; for example `openssl rand -base64 32`); it seals every secret Pinfold stores"
        );
    } else if create {
        load_or_create_key_file(&cfg.data_dir)?
    } else {
        load_key_file(&cfg.data_dir)?.with_context(|| {
            format!(
                "no encryption_key is configured and there is no {} in {}",
                KEY_FILE,
                cfg.data_dir.display()
            )
        })?
    };
    with_old_keys(current, &cfg.encryption_keys_old)
}

/// `keyring` with the old keys `old` (base64 each), which open what was
/// sealed under them; the error names `encryption_keys_old[i]`.
pub fn with_old_keys(keyring: Keyring, old: &[String]) -> anyhow::Result<Keyring> {
    old.iter().enumerate().try_fold(keyring, |ring, (i, key)| {
        ring.with_old_base64(key)
            .with_context(|| format!("encryption_keys_old[{i}]"))
    })
}

fn load_key_file(dir: &Path) -> anyhow::Result<Option<Keyring>> {
    let path = dir.join(KEY_FILE);
    if !path.exists() {
        return Ok(None);
    }
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(Some(
        Keyring::from_base64(&text).with_context(|| format!("{}", path.display()))?,
    ))
}

fn load_or_create_key_file(dir: &Path) -> anyhow::Result<Keyring> {
    if let Some(ring) = load_key_file(dir)? {
        return Ok(ring);
    }
    let path = dir.join(KEY_FILE);
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let text = Keyring::generate_base64()?;
    crate::devkeys::write_private(&path, text.as_bytes())?;
    Ok(Keyring::from_base64(&text)?)
}

/// The registry's state over `store` (the change listener that evicts its
/// index on other replicas' writes is spawned by
/// [`crate::resolve_wiring::spawn_change_listener`]).
pub fn registry_state(store: &Store, keyring: Arc<Keyring>, limits: Limits) -> RegistryState {
    let index = Arc::new(EtagIndex::default());
    RegistryState {
        store: store.registry(),
        policies: Arc::new(TenancyPolicies(store.tenants())),
        keyring,
        index,
        limits,
        views: Arc::new(pinfold_registry::subregistry::cache::ViewCache::default()),
    }
}
