//! The scope service's storage contract: provider profiles, grants and the
//! single-use states of pending grants.

use async_trait::async_trait;
use pinfold_core::ids::{TenantId, Timestamp};

use crate::model::{GrantRow, GrantStatus, Profile, ProviderRow, StateRow};

/// An audit event the scope service asks its store to append (kinds:
/// `provider.updated`, `grant.created`, `grant.exchanged`, `grant.failed`;
/// never a secret, a code, a state or a token in `data`).
pub use pinfold_core::audit::NewAuditEvent as AuditNote;

/// Store failures.
#[derive(Debug, thiserror::Error)]
pub enum ScopeStoreError {
    /// The tenant does not exist.
    #[error("tenant not found")]
    TenantNotFound,
    /// The write's precondition does not hold (`current` is the stored
    /// revision, `None` when there is no such provider).
    #[error("precondition failed")]
    PreconditionFailed {
        /// The stored revision.
        current: Option<i64>,
    },
    /// A provider exists and the write named no revision.
    #[error("precondition required")]
    PreconditionRequired {
        /// The stored revision.
        current: i64,
    },
    /// A row with this key exists already.
    #[error("conflict")]
    Conflict,
    /// The database could not be reached or timed out.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// Anything else.
    #[error("database error: {0}")]
    Other(String),
}

/// What a provider write expects to find (HTTP preconditions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// `If-None-Match: *`: only create.
    Absent,
    /// No precondition: create when absent; an existing provider needs a
    /// revision (so a blind write cannot undo someone else's change).
    CreateOnly,
    /// `If-Match`: only replace this revision.
    Revision(i64),
}

/// A provider write.
#[derive(Debug, Clone)]
pub struct ProviderWrite<'a> {
    /// The new profile.
    pub profile: &'a Profile,
    /// The new sealed secret; `None` keeps the stored one.
    pub client_secret_sealed: Option<&'a str>,
    /// When.
    pub at: Timestamp,
    /// Who.
    pub by: &'a str,
}

/// What an exchange ended with.
#[derive(Debug, Clone)]
pub struct GrantOutcome {
    /// `Exchanged` or `Failed`.
    pub status: GrantStatus,
    /// Granted scopes (exchanged).
    pub granted: Option<Vec<String>>,
    /// The provider's error code (failed).
    pub error: Option<String>,
    /// When.
    pub at: Timestamp,
}

/// Scope rows. Every method takes the tenant first.
#[async_trait]
pub trait ScopeStore: Send + Sync + 'static {
    /// One provider.
    async fn provider(
        &self,
        tenant: &TenantId,
        name: &str,
    ) -> Result<Option<ProviderRow>, ScopeStoreError>;

    /// Every provider of the tenant, by name (at most `limit`).
    async fn providers(
        &self,
        tenant: &TenantId,
        limit: u32,
    ) -> Result<Vec<ProviderRow>, ScopeStoreError>;

    /// Creates or replaces a provider under `expect` and appends `audit` in
    /// the same transaction; the stored row and whether it was created.
    async fn put_provider(
        &self,
        tenant: &TenantId,
        name: &str,
        write: &ProviderWrite<'_>,
        expect: Expect,
        audit: &AuditNote,
    ) -> Result<(ProviderRow, bool), ScopeStoreError>;

    /// Stores a new pending grant with its state, and `audit`.
    async fn insert_grant(
        &self,
        tenant: &TenantId,
        grant: &GrantRow,
        state: &StateRow,
        audit: &AuditNote,
    ) -> Result<(), ScopeStoreError>;

    /// One grant.
    async fn grant(&self, tenant: &TenantId, id: &str)
    -> Result<Option<GrantRow>, ScopeStoreError>;

    /// Takes (deletes and returns) the state of grant `id` if its hash is
    /// `state_hash`: atomic, so a state is used at most once even by
    /// concurrent requests on any replica.
    async fn take_state(
        &self,
        tenant: &TenantId,
        id: &str,
        state_hash: &str,
    ) -> Result<Option<StateRow>, ScopeStoreError>;

    /// Records the outcome of a pending grant's exchange, and `audit`.
    async fn finish_grant(
        &self,
        tenant: &TenantId,
        id: &str,
        outcome: &GrantOutcome,
        audit: &AuditNote,
    ) -> Result<(), ScopeStoreError>;

    /// Deletes at most `limit` single-use states that expired before
    /// `before`, in every tenant (the background purge: an expired state
    /// can never be exchanged, and its sealed PKCE verifier should not
    /// outlive it). Returns how many were deleted.
    async fn purge_expired_states(
        &self,
        before: Timestamp,
        limit: u32,
    ) -> Result<u64, ScopeStoreError>;

    /// A page of grants ordered by id (oldest first), after `after`.
    async fn grants(
        &self,
        tenant: &TenantId,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<GrantRow>, ScopeStoreError>;
}
