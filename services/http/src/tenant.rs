//! The tenant extractor, and where each role acts.
//!
//! Every tenant route has a `{tenant}` path segment. [`TenantScope`] is the
//! only way a handler learns which tenant it serves: it verifies the bearer
//! token, then admits the request only when the path names the token's own
//! tenant (its `tenant` claim, or the tenant its issuer's claim rules gave
//! it). Anything else gets **404 `tenant_not_found`**, exactly as if the
//! tenant did not exist, so tenants cannot even be enumerated.
//!
//! Roles stay in their place:
//!
//! - The tenant roles (`admin`, `publisher`, `reviewer`, `reader`,
//!   `client`: [`Role::TENANT`]) act in the token's own tenant and nowhere
//!   else.
//! - `platform` acts on the platform routes only, the routes outside any
//!   `{tenant}` (today `POST /v1/tenants`, which creates a tenant), and
//!   holds nothing under `/v1/tenants/{tenant}` or `/t/{tenant}`: it never
//!   admits a request to a tenant, and [`TenantScope::require_any`] does
//!   not count it as a role there. A `platform` token without a tenant
//!   therefore gets 404 on every tenant route.
//! - A token holding both is each in its own place: a `platform,admin`
//!   token of tenant A creates tenants, is `admin` in A, and gets the same
//!   404 as a missing tenant on every route of tenant B.
//!
//! Why no tenant route is a platform route: everything under
//! `/v1/tenants/{tenant}` is the tenant's own data. Reading the tenant
//! (`GET /v1/tenants/{tenant}`) returns its policy with it, and the policy,
//! audit log, registry, sessions, providers and grants are what a tenant's
//! own roles manage. Creating a tenant answers its record in the `201`; a
//! tenant is read afterwards with a token of that tenant. A route that
//! manages tenant records across tenants (listing them, say) would sit
//! outside `{tenant}`, as `POST /v1/tenants` does, check `platform` itself,
//! and need its own database binding: on PostgreSQL, row-level security
//! lets no tenant binding read another tenant's row.
//!
//! Admission charges the request to the rate limits of its tenant and
//! caller ([`crate::ratelimit`]) when the edge installed a limiter: over
//! either, `429 rate_limited`.
//!
//! A `TenantScope` is built only here, by the extractor or by
//! [`TenantScope::admit`] (the review console's sessions), both under the
//! one admission rule, so a service function that takes `&TenantScope`
//! cannot be called for a tenant the caller was not admitted to.

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

    /// `Ok` when the caller holds one of `roles` in this tenant, else 403
    /// `forbidden_role`. Only tenant roles count here: `platform` in
    /// `roles` is never satisfied (it holds nothing inside a tenant).
    pub fn require_any(&self, roles: &[Role]) -> Result<(), ApiError> {
        let held = roles
            .iter()
            .any(|r| *r != Role::Platform && self.principal.has(*r));
        if held {
            Ok(())
        } else {
            let names: Vec<&str> = roles
                .iter()
                .filter(|r| **r != Role::Platform)
                .map(|r| r.as_str())
                .collect();
            Err(ApiError::forbidden_role(&names))
        }
    }

    /// `Ok` when the caller holds any tenant role (read access).
    pub fn require_member(&self) -> Result<(), ApiError> {
        self.require_any(&Role::TENANT)
    }

    /// Admits `principal` to the tenant named `raw` by the same rule as the
    /// extractor (the principal's own tenant only, `platform` nowhere), or
    /// answers the same 404. For a caller that authenticated its principal
    /// from a verified token some other way than this request's
    /// `Authorization` header: the review console, whose server-side
    /// session keeps the principal of the token it signed in with. Charges
    /// no rate limit (the console charges its own class, `console`, once
    /// its session is admitted).
    pub fn admit(principal: Arc<Principal>, raw: &str) -> Result<TenantScope, ApiError> {
        let tenant = TenantId::parse(raw).map_err(|_| tenant_not_found())?;
        if !admits(&principal, &tenant) {
            return Err(tenant_not_found());
        }
        Ok(TenantScope { tenant, principal })
    }
}

/// Whether `principal` is admitted to `tenant`: the token belongs to it.
/// Its roles play no part (`platform` included); handlers check them.
fn admits(principal: &Principal, tenant: &TenantId) -> bool {
    principal.tenant.as_ref() == Some(tenant)
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
        // The token's own tenant only: `platform` admits nowhere (module docs).
        if !admits(&principal, &tenant) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(id: &str) -> TenantId {
        TenantId::parse(id).unwrap()
    }

    fn scope(principal: Principal) -> TenantScope {
        let tenant = principal.tenant.clone().expect("a tenant token");
        assert!(admits(&principal, &tenant));
        TenantScope {
            tenant,
            principal: Arc::new(principal),
        }
    }

    #[test]
    fn only_the_tokens_own_tenant_admits_whatever_its_roles() {
        let acme = tenant("acme");
        let beta = tenant("beta");
        let mixed = Principal::new(
            "p",
            "i",
            Some(acme.clone()),
            &[Role::Platform, Role::Admin],
            0,
        );
        assert!(admits(&mixed, &acme));
        assert!(!admits(&mixed, &beta), "platform opens no other tenant");
        let platform = Principal::new("p", "i", None, &[Role::Platform], 0);
        assert!(!admits(&platform, &acme) && !admits(&platform, &beta));
        let everything = Principal::new("p", "i", Some(beta.clone()), &Role::ALL, 0);
        assert!(admits(&everything, &beta) && !admits(&everything, &acme));
    }

    #[test]
    fn platform_counts_for_no_role_inside_a_tenant() {
        let acme = tenant("acme");
        let only_platform = scope(Principal::new(
            "p",
            "i",
            Some(acme.clone()),
            &[Role::Platform],
            0,
        ));
        let e = only_platform.require_any(&[Role::Platform]).unwrap_err();
        assert_eq!(e.status, StatusCode::FORBIDDEN);
        let e = only_platform
            .require_any(&[Role::Platform, Role::Admin])
            .unwrap_err();
        assert_eq!(e.status, StatusCode::FORBIDDEN);
        assert!(only_platform.require_member().is_err());
        let mixed = scope(Principal::new(
            "p",
            "i",
            Some(acme),
            &[Role::Platform, Role::Admin],
            0,
        ));
        assert!(mixed.require_any(&[Role::Admin]).is_ok());
        assert!(mixed.require_member().is_ok());
        assert!(mixed.require_any(&[Role::Platform]).is_err());
        assert!(mixed.require_any(&[Role::Reviewer]).is_err());
    }
}
