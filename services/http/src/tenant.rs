//! The tenant extractor.
//!
//! Every tenant route has a `{tenant}` path segment. [`TenantScope`] is the
//! only way a handler learns which tenant it serves: it verifies the bearer
//! token, then checks that the token belongs to that tenant. A token of
//! tenant A on a tenant-B path gets **404**, exactly as if B did not exist,
//! so tenants cannot even be enumerated. A `platform` token may address any
//! tenant (it manages them), but holds no role inside one.
//!
//! Admission charges the request to the rate limits of its tenant and
//! caller ([`crate::ratelimit`]) when the edge installed a limiter: over
//! either, `429 rate_limited`.
//!
//! A `TenantScope` cannot be built outside this module, so a service
//! function that takes `&TenantScope` cannot be called for a tenant the
//! caller was not admitted to.

use std::sync::Arc;

use axum::extract::{FromRequestParts, RawPathParams};
use axum::http::StatusCode;
use axum::http::request::Parts;
use pinfold_core::ids::TenantId;

use crate::auth::{Auth, Principal, Role};
use crate::problem::ApiError;
use crate::ratelimit::Charge;

/// A request admitted to one tenant.
#[derive(Debug, Clone)]
pub struct TenantScope {
    tenant: TenantId,
    principal: Arc<Principal>,
}

/// 404 `tenant_not_found`; identical for "absent" and "not yours".
pub fn tenant_not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "tenant_not_found",
        "Tenant not found",
    )
    .detail("no such tenant")
}

impl TenantScope {
    /// The tenant.
    pub fn tenant(&self) -> &TenantId {
        &self.tenant
    }

    /// The caller.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// The caller's subject, as recorded in audit events.
    pub fn actor(&self) -> &str {
        &self.principal.sub
    }

    /// `Ok` when the caller holds one of `roles` in this tenant, else 403.
    pub fn require_any(&self, roles: &[Role]) -> Result<(), ApiError> {
        self.principal.require_any(roles)
    }

    /// `Ok` when the caller holds any tenant role (read access).
    pub fn require_member(&self) -> Result<(), ApiError> {
        self.principal.require_any(&Role::TENANT)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for TenantScope {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Auth(principal) = Auth::from_request_parts(parts, state).await?;
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|_| tenant_not_found())?;
        let raw = params
            .iter()
            .find(|(k, _)| *k == "tenant")
            .map(|(_, v)| v)
            .ok_or_else(|| {
                tracing::error!("TenantScope used on a route without a {{tenant}} segment");
                ApiError::internal()
            })?;
        let tenant = TenantId::parse(raw).map_err(|_| tenant_not_found())?;
        let admitted = principal.has(Role::Platform) || principal.tenant.as_ref() == Some(&tenant);
        if !admitted {
            return Err(tenant_not_found());
        }
        // Charged here, once admitted: a request for a tenant that is not
        // the caller's never touches that tenant's buckets.
        if let Some(charge) = parts.extensions.remove::<Charge>() {
            charge
                .limiter
                .check(&tenant, &principal, charge.class)
                .map_err(|limited| limited.into_error())?;
        }
        // The request span (opened by the server's edge) carries the tenant
        // (when a subscriber records it at all).
        if tracing::level_enabled!(tracing::Level::INFO) {
            tracing::Span::current().record("tenant.id", tenant.as_str());
        }
        Ok(TenantScope { tenant, principal })
    }
}
