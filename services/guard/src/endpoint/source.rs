//! What the guard endpoint needs from the rest of the server, as traits
//! the server implements: the approved signature a route pins and the
//! tenant's enforcement mode ([`Approved`]), and the per-call resolution
//! of a tool's annotations through the resolve engine ([`Resolver`]). The
//! keyring is the routes' [`crate::Sealer`].

use std::sync::Arc;

use async_trait::async_trait;
use pinfold_core::Mode;
use pinfold_core::annotations::Annotations;
use pinfold_core::ids::TenantId;
use pinfold_http::problem::ApiError;
use pinfold_resolve_check::PreparedSignature;
use serde_json::Value;

use super::upstream::Target;
use crate::model::VersionPin;

/// An approved version as the guard enforces it.
#[derive(Debug, Clone)]
pub struct ApprovedVersion {
    /// The server's canonical name.
    pub server: String,
    /// The exact version.
    pub version: String,
    /// The digest of its card.
    pub digest: String,
    /// The card document (immutable for a digest).
    pub card: Arc<Value>,
}

/// The registry and tenancy as the guard sees them. Errors are already
/// problem+json.
#[async_trait]
pub trait Approved: Send + Sync + 'static {
    /// The version `pin` selects among the approved ones (`latest`: the
    /// highest approved; deprecated versions still bind), or `None` when
    /// there is none (nothing approved yet, the pinned one pending,
    /// rejected or revoked).
    async fn approved(
        &self,
        tenant: &TenantId,
        server: &str,
        pin: &VersionPin,
    ) -> Result<Option<ApprovedVersion>, ApiError>;

    /// The tenant's enforcement mode for `server` (its override, else the
    /// tenant default).
    async fn mode(&self, tenant: &TenantId, server: &str) -> Result<Mode, ApiError>;
}

/// One `tools/call` whose annotations the route's `calls` policy needs
/// decided per call: the tool resolves them (SEP-1862, `tools/resolve`).
pub struct CallToResolve<'a> {
    /// The route's tenant.
    pub tenant: &'a TenantId,
    /// The route's server (canonical name).
    pub server: &'a str,
    /// The pinned version.
    pub version: &'a str,
    /// Whose answers may be shared: the same scope, the same upstream
    /// identity (the route and its pinned digest; the upstream session
    /// when the upstream has sessions). Answers are cached per scope.
    pub scope: &'a str,
    /// The pinned signature, prepared.
    pub signature: &'a Arc<PreparedSignature>,
    /// The route's enforcement mode.
    pub mode: Mode,
    /// The route's upstream.
    pub target: &'a Target,
    /// The tool.
    pub name: &'a str,
    /// The call's arguments.
    pub arguments: &'a serde_json::Value,
}

/// The resolve engine as the guard asks it: the annotations one call
/// resolves to, through the engine's cache under the tenant's
/// `resolve_cache` policy.
#[async_trait]
pub trait Resolver: Send + Sync + 'static {
    /// The annotations `call` resolves to, or `None` when there is no
    /// usable resolution (an answer outside the signature, an upstream
    /// that fails, a call that cannot be resolved at all): the call is
    /// then decided on the signature's worst case, never on something
    /// more permissive.
    async fn annotations(&self, call: CallToResolve<'_>) -> Option<Annotations>;
}
