//! Wiring of the egress path: the server's one [`Egress`] (every outbound
//! request of every service goes through it), the rules of the server's
//! own requests (`[egress]`), and each tenant's allow-list read from its
//! policy.

use std::sync::Arc;

use async_trait::async_trait;
use pinfold_core::ids::TenantId;
use pinfold_egress::{AllowList, Egress};
use pinfold_http::egress::{AllowLists, TenantEgress};
use pinfold_http::problem::ApiError;
use pinfold_tenancy::{StoreError, TenantStore};

use crate::config::Config;

/// The egress path of `cfg`: `[egress]`, loopback as
/// [`Config::egress_loopback`] decides, the upstream connect timeout of
/// `[resolve]`.
pub fn egress(cfg: &Config) -> Arc<Egress> {
    let mut c = cfg
        .egress
        .egress_config(cfg.resolve.upstream_connect_timeout_ms);
    c.allow_loopback = cfg.egress_loopback();
    Egress::new(c)
}

/// The rules of the server's own requests (issuers' JWKS documents).
pub fn jwks_fetch(cfg: &Config, egress: &Arc<Egress>) -> pinfold_http::auth::JwksFetch {
    pinfold_http::auth::JwksFetch {
        egress: egress.clone(),
        rules: cfg.egress.server_rules(egress.config().allow_loopback),
    }
}

/// Each tenant's `egress_allow`, from its stored policy.
pub struct PolicyAllowLists(pub Arc<dyn TenantStore>);

#[async_trait]
impl AllowLists for PolicyAllowLists {
    async fn allow_list(&self, tenant: &TenantId) -> Result<AllowList, ApiError> {
        let rec = self.0.policy(tenant).await.map_err(|e| match e {
            StoreError::Unavailable(m) => {
                tracing::error!(error = %m, "database unavailable");
                ApiError::database_unavailable()
            }
            other => {
                tracing::error!(error = %other, "database error");
                ApiError::internal()
            }
        })?;
        let Some(rec) = rec else {
            return Err(pinfold_http::tenant::tenant_not_found());
        };
        // Checked when written; a stored list that no longer parses (a
        // stricter parser after an upgrade) allows nothing extra.
        Ok(
            AllowList::parse(rec.policy.egress_allow.iter().map(String::as_str))
                .unwrap_or_else(|e| {
                    tracing::warn!(tenant = %tenant, error = %e, "stored egress_allow does not parse; using none");
                    AllowList::default()
                }),
        )
    }
}

/// Tenants' requests through `egress`, under their policies' allow-lists.
pub fn tenant_egress(egress: &Arc<Egress>, tenants: Arc<dyn TenantStore>) -> TenantEgress {
    TenantEgress::new(egress.clone(), Arc::new(PolicyAllowLists(tenants)))
}
