//! Who a verified token names: the roles a token may carry ([`Role`]) and
//! the identity behind a request ([`Principal`]: subject, issuer, tenant,
//! roles as a bit set, expiry), which handlers check roles on.

use pinfold_core::ids::TenantId;

use crate::problem::ApiError;

/// A role a token may carry (`roles` claim).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Manages the installation's tenants on the platform routes (creating
    /// them); holds nothing inside a tenant (`crate::tenant`).
    Platform,
    /// Everything within one tenant.
    Admin,
    /// Publishes signatures.
    Publisher,
    /// Reviews and approves versions.
    Reviewer,
    /// Reads the registry.
    Reader,
    /// Clients and gateways: read, resolve, plan scopes.
    Client,
}

impl Role {
    /// All roles, in a fixed order.
    pub const ALL: [Role; 6] = [
        Role::Platform,
        Role::Admin,
        Role::Publisher,
        Role::Reviewer,
        Role::Reader,
        Role::Client,
    ];

    /// Every role that belongs to a tenant (all but `platform`).
    pub const TENANT: [Role; 5] = [
        Role::Admin,
        Role::Publisher,
        Role::Reviewer,
        Role::Reader,
        Role::Client,
    ];

    /// The claim spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Platform => "platform",
            Role::Admin => "admin",
            Role::Publisher => "publisher",
            Role::Reviewer => "reviewer",
            Role::Reader => "reader",
            Role::Client => "client",
        }
    }

    /// Parses the claim spelling.
    pub fn parse(s: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == s)
    }

    pub(super) fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// The verified identity behind a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The token's subject.
    pub sub: String,
    /// The token's issuer.
    pub issuer: String,
    /// The tenant the token belongs to, where its tenant roles act (absent
    /// for a token that only holds `platform`).
    pub tenant: Option<TenantId>,
    roles: u8,
    /// Expiry (seconds since the epoch).
    pub expires_at: u64,
}

impl Principal {
    /// Builds a principal (used by verification and by tests).
    pub fn new(
        sub: &str,
        issuer: &str,
        tenant: Option<TenantId>,
        roles: &[Role],
        expires_at: u64,
    ) -> Self {
        Self {
            sub: sub.to_owned(),
            issuer: issuer.to_owned(),
            tenant,
            roles: roles.iter().fold(0, |acc, r| acc | r.bit()),
            expires_at,
        }
    }

    /// Whether the principal holds `role`.
    pub fn has(&self, role: Role) -> bool {
        self.roles & role.bit() != 0
    }

    /// Whether the principal holds any of `roles`.
    pub fn has_any(&self, roles: &[Role]) -> bool {
        roles.iter().any(|r| self.has(*r))
    }

    /// The roles held, in [`Role::ALL`] order.
    pub fn roles(&self) -> Vec<Role> {
        Role::ALL.into_iter().filter(|r| self.has(*r)).collect()
    }

    /// `Ok` when the principal holds one of `roles`, else 403 `forbidden_role`.
    pub fn require_any(&self, roles: &[Role]) -> Result<(), ApiError> {
        if self.has_any(roles) {
            Ok(())
        } else {
            let names: Vec<&str> = roles.iter().map(|r| r.as_str()).collect();
            Err(ApiError::forbidden_role(&names))
        }
    }
}
