//! The review console wired into the server: its state over the services'
//! states and the store, its settings from `[console]`, and the dev mode's
//! one-click sign-in over the dev key.

use std::sync::Arc;
use std::time::Duration;

use pinfold_console::oidc::OidcClient;
use pinfold_console::{ConsoleSettings, ConsoleState, ConsoleStore, DevSignIn};
use pinfold_http::Authenticator;
use pinfold_tenancy::TenantStore;

use crate::config::{Config, ConsoleConfig};
use crate::devkeys::DevKey;

/// What the console needs beyond the application's context.
#[derive(Clone)]
pub struct ConsoleSetup {
    /// Where console sessions live.
    pub sessions: Arc<dyn ConsoleStore>,
    /// Sign-in settings.
    pub settings: Arc<ConsoleSettings>,
}

/// The dev one-click sign-in: `dev-reviewer` (reviewer, reader) and
/// `dev-admin` (the printed admin token's identity and roles) in the dev
/// tenant, in tokens signed by the dev key for five minutes (the console
/// verifies them at once).
pub struct DevConsole {
    /// The dev key.
    pub key: DevKey,
    /// The dev tenant.
    pub tenant: String,
}

impl DevSignIn for DevConsole {
    fn identities(&self, tenant: &str) -> Vec<(&'static str, &'static str)> {
        if tenant == self.tenant {
            vec![
                ("reviewer", "dev-reviewer (reviewer)"),
                ("admin", "dev-admin (admin, publisher, reviewer)"),
            ]
        } else {
            Vec::new()
        }
    }

    fn token(&self, tenant: &str, value: &str) -> Option<String> {
        if tenant != self.tenant {
            return None;
        }
        let (sub, roles): (&str, &[&str]) = match value {
            "reviewer" => ("dev-reviewer", &["reviewer", "reader"]),
            "admin" => (
                "dev-admin",
                &["admin", "publisher", "reviewer", "reader", "client"],
            ),
            _ => return None,
        };
        self.key
            .mint(sub, Some(&self.tenant), roles, Duration::from_secs(300))
            .ok()
    }
}

/// The console's settings from the configuration: `Secure` cookies unless
/// the server listens on loopback, the dev sign-in when `dev` is given
/// (dev mode on loopback only: the caller decides), the OIDC client.
pub fn settings(
    cfg: &Config,
    dev: Option<Arc<dyn DevSignIn>>,
    egress: &Arc<pinfold_egress::Egress>,
) -> anyhow::Result<ConsoleSettings> {
    let loopback = cfg.listen_addr().is_ok_and(|a| a.ip().is_loopback());
    let oidc = match &cfg.console.oidc {
        Some(o) => Some(Arc::new(OidcClient {
            name: o.name.clone(),
            issuer: o.issuer.clone(),
            client_id: o.client_id.clone(),
            client_secret: ConsoleConfig::client_secret(o)?,
            public_url: cfg.public_url.clone(),
            scopes: o.scopes.clone(),
            resource: o.resource.clone(),
            outbound: crate::egress_wiring::jwks_fetch(cfg, egress),
            endpoints: Default::default(),
        })),
        None => None,
    };
    Ok(ConsoleSettings {
        secure_cookies: !loopback,
        session_ttl: Duration::from_secs(cfg.console.session_ttl_secs),
        dev,
        oidc,
    })
}

/// The console's state over the services' states.
pub fn state(
    setup: &ConsoleSetup,
    registry: &pinfold_registry::RegistryState,
    tenants: &Arc<dyn TenantStore>,
    scope: &pinfold_scope::ScopeState,
    resolve: &pinfold_resolve::ResolveState,
    authn: &Arc<Authenticator>,
) -> ConsoleState {
    ConsoleState {
        registry: registry.clone(),
        tenants: tenants.clone(),
        grants: scope.store.clone(),
        resolve_sessions: resolve.store.clone(),
        sessions: setup.sessions.clone(),
        authn: authn.clone(),
        settings: setup.settings.clone(),
    }
}

/// Deletes expired console sessions of every tenant in the background, a
/// batch at a time, every `every` (an expired session is refused at once
/// whether or not its row is gone; the purge only keeps rows from
/// outliving it when nobody of its tenant signs in again).
pub fn spawn_session_purge(
    store: &crate::store::Store,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    let sessions = store.console();
    crate::purge::spawn("expired console sessions", every, move |limit| {
        let sessions = sessions.clone();
        async move { sessions.purge_expired_console_sessions(now(), limit).await }
    })
}

/// Milliseconds since the epoch, now.
fn now() -> pinfold_core::ids::Timestamp {
    pinfold_core::ids::Timestamp::from_millis(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0),
    )
}
