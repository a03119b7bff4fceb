//! What the console's routes need: the service layers they act through
//! (the registry's use cases, the tenancy, scope and resolve stores for the
//! audit log and the ledger), the session store, the authenticator that
//! verifies every token a session is opened with, and the sign-in settings.

use std::sync::Arc;
use std::time::Duration;

use pinfold_http::Authenticator;
use pinfold_registry::RegistryState;
use pinfold_resolve::SessionStore;
use pinfold_scope::ScopeStore;
use pinfold_tenancy::TenantStore;

use crate::oidc::OidcClient;
use crate::session::ConsoleStore;

/// The dev mode's one-click sign-in: tokens of dev identities, signed by
/// the dev key (implemented by the server, offered only in dev mode on
/// loopback). The console verifies them like any other token.
pub trait DevSignIn: Send + Sync + 'static {
    /// The identities offered in `tenant`, as `(value, label)`; empty when
    /// none is.
    fn identities(&self, tenant: &str) -> Vec<(&'static str, &'static str)>;

    /// A token of identity `value` in `tenant`, when it is offered there.
    fn token(&self, tenant: &str, value: &str) -> Option<String>;
}

/// How the console signs people in and keeps them signed in.
pub struct ConsoleSettings {
    /// Cookies carry `Secure` (off only when the server listens on loopback).
    pub secure_cookies: bool,
    /// The longest a session lives (never longer than its token).
    pub session_ttl: Duration,
    /// The dev one-click sign-in, in dev mode on loopback.
    pub dev: Option<Arc<dyn DevSignIn>>,
    /// The console's OAuth client at the identity provider.
    pub oidc: Option<Arc<OidcClient>>,
}

impl Default for ConsoleSettings {
    fn default() -> Self {
        ConsoleSettings {
            secure_cookies: true,
            session_ttl: Duration::from_secs(8 * 3600),
            dev: None,
            oidc: None,
        }
    }
}

/// The console routes' state.
#[derive(Clone)]
pub struct ConsoleState {
    /// The registry's state (its use cases are the only way to act).
    pub registry: RegistryState,
    /// Tenants and the audit log.
    pub tenants: Arc<dyn TenantStore>,
    /// Grants (the ledger).
    pub grants: Arc<dyn ScopeStore>,
    /// Resolve sessions (the ledger).
    pub resolve_sessions: Arc<dyn SessionStore>,
    /// Console sessions.
    pub sessions: Arc<dyn ConsoleStore>,
    /// Verifies the tokens sessions are opened with.
    pub authn: Arc<Authenticator>,
    /// Sign-in settings.
    pub settings: Arc<ConsoleSettings>,
}
