//! The egress path as the services see it: the server's one
//! [`Egress`] and, per tenant, the rules its requests go out under (the
//! tenant policy's `egress_allow`, with loopback as the operator set it).

use std::sync::Arc;

use async_trait::async_trait;
use axum::http::StatusCode;
use pinfold_core::ids::TenantId;
use pinfold_egress::{AllowList, Egress, EgressError, Rules};

use crate::problem::ApiError;

/// Where a tenant's allow-list is read from (its policy).
#[async_trait]
pub trait AllowLists: Send + Sync + 'static {
    /// The allow-list of `tenant` (empty when its policy names none).
    async fn allow_list(&self, tenant: &TenantId) -> Result<AllowList, ApiError>;
}

/// The egress path and where each tenant's rules come from.
#[derive(Clone)]
pub struct TenantEgress {
    /// The server's one egress path.
    pub egress: Arc<Egress>,
    lists: Arc<dyn AllowLists>,
}

impl TenantEgress {
    /// Tenants' requests through `egress`, under the allow-lists of `lists`.
    pub fn new(egress: Arc<Egress>, lists: Arc<dyn AllowLists>) -> Self {
        TenantEgress { egress, lists }
    }

    /// The rules of `tenant`'s requests now.
    pub async fn rules(&self, tenant: &TenantId) -> Result<Rules, ApiError> {
        Ok(self.egress.rules(self.lists.allow_list(tenant).await?))
    }
}

/// A fixed allow-list for every tenant (tests, and services run alone).
pub struct FixedAllowList(pub AllowList);

#[async_trait]
impl AllowLists for FixedAllowList {
    async fn allow_list(&self, _tenant: &TenantId) -> Result<AllowList, ApiError> {
        Ok(self.0.clone())
    }
}

/// 422 `upstream_not_allowed` at `pointer`: the egress policy refuses the
/// URL (its addresses, or credentials over plain http). The detail says
/// which rule, never what answered where.
pub fn not_allowed(pointer: &str, e: &EgressError) -> ApiError {
    let detail = match e {
        EgressError::PlainCredentials => {
            "credentials are sent over plain http only to hosts the tenant's egress_allow names; use https or add the host to egress_allow"
        }
        _ => {
            "the URL's host is not a public address, and the tenant's egress_allow does not name it"
        }
    };
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "upstream_not_allowed",
        "Destination not allowed",
    )
    .detail(format!("{pointer}: {detail}"))
}
