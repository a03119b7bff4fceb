//! `pinfold serve`: open the database, build the app, listen, shut down
//! gracefully.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use jsonwebtoken::{Algorithm, DecodingKey};
use pinfold_core::ids::TenantId;
use pinfold_http::Authenticator;
use pinfold_http::auth::{ClaimMapping, IssuerConfig, KeySource};
use pinfold_tenancy::Policy;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::app::{self, AppContext};
use crate::config::Config;
use crate::devkeys::{DEV_AUDIENCE, DEV_ISSUER, DevKey};
use crate::metrics::Metrics;
use crate::protected_resource::ProtectedResource;
use crate::scrape::{ClientAddr, Scrapes};
use crate::store::Store;

/// The tenant dev mode creates for its printed tokens.
pub const DEV_TENANT: &str = "dev";

/// Tokens printed in dev mode.
#[derive(Debug, Clone)]
pub struct DevTokens {
    /// `platform` role, no tenant: creates tenants, and holds no role
    /// inside any.
    pub platform: String,
    /// All roles in the `dev` tenant.
    pub admin: String,
    /// `client` role in the `dev` tenant.
    pub client: String,
}

/// A server that is listening.
pub struct Running {
    /// The bound address.
    pub addr: SocketAddr,
    /// Dev tokens, when in dev mode.
    pub dev_tokens: Option<DevTokens>,
    /// The console offers the dev one-click sign-in (dev mode on loopback).
    pub console_dev_sign_in: bool,
    /// The database backend (`sqlite` or `postgres`).
    pub backend: &'static str,
    shutdown: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Running {
    /// Asks the server to stop accepting connections and waits until the
    /// in-flight requests have finished.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.task.await.context("server task panicked")?
    }

    /// Waits until the server stops (after a signal).
    pub async fn wait(self) -> anyhow::Result<()> {
        self.task.await.context("server task panicked")?
    }
}

/// Builds the authenticator from configuration (plus the dev issuer).
pub fn authenticator(
    cfg: &Config,
    dev_key: Option<&DevKey>,
    egress: &Arc<pinfold_egress::Egress>,
) -> anyhow::Result<Authenticator> {
    let mut issuers = issuer_configs(cfg)?;
    if let Some(key) = dev_key {
        // `Config::validate` refuses this too; the authenticator keys issuers
        // by name, so the dev issuer must never replace a configured one.
        if issuers.iter().any(|i| i.issuer == DEV_ISSUER) {
            bail!("auth.issuers: {DEV_ISSUER:?} is the dev issuer, which dev mode adds itself");
        }
        issuers.push(IssuerConfig {
            issuer: DEV_ISSUER.into(),
            audience: DEV_AUDIENCE.into(),
            algorithms: vec![Algorithm::EdDSA],
            keys: KeySource::Static(key.decoding_key()?),
            mapping: ClaimMapping::FromToken,
        });
    }
    Ok(Authenticator::new(
        issuers,
        cfg.auth.leeway_secs,
        crate::egress_wiring::jwks_fetch(cfg, egress),
    ))
}

/// The configured issuers (`[[auth.issuers]]`), keys and claim mappings
/// resolved.
pub fn issuer_configs(cfg: &Config) -> anyhow::Result<Vec<IssuerConfig>> {
    let mut issuers = Vec::new();
    for (i, iss) in cfg.auth.issuers.iter().enumerate() {
        let algorithms = iss
            .algorithms
            .iter()
            .map(|a| a.parse::<Algorithm>())
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("auth.issuers[{i}].algorithms"))?;
        let keys = if let Some(url) = &iss.jwks_url {
            KeySource::Jwks {
                url: url.clone(),
                min_refetch: Duration::from_secs(cfg.auth.jwks_min_refetch_secs),
            }
        } else if let Some(path) = &iss.public_key_file {
            let pem = std::fs::read(path).with_context(|| {
                format!(
                    "auth.issuers[{i}].public_key_file: cannot read {}",
                    path.display()
                )
            })?;
            KeySource::Static(DecodingKey::from_ed_pem(&pem).with_context(|| {
                format!("auth.issuers[{i}].public_key_file: not an Ed25519 public key PEM")
            })?)
        } else if let Some(secret) = &iss.hs256_secret {
            KeySource::Static(DecodingKey::from_secret(secret.as_bytes()))
        } else {
            bail!("auth.issuers[{i}]: no key source");
        };
        let mapping = if iss.rules.is_empty() {
            ClaimMapping::FromToken
        } else {
            let mut rules = Vec::new();
            for (j, rule) in iss.rules.iter().enumerate() {
                rules.push(
                    rule.rule()
                        .map_err(|e| anyhow::anyhow!("auth.issuers[{i}].rules[{j}].{e}"))?,
                );
            }
            ClaimMapping::Rules(rules)
        };
        issuers.push(IssuerConfig {
            issuer: iss.issuer.clone(),
            audience: iss.audience.clone(),
            algorithms,
            keys,
            mapping,
        });
    }
    Ok(issuers)
}

/// Opens the database and applies (or checks) migrations.
pub async fn open_store(cfg: &Config) -> anyhow::Result<Store> {
    let store = Store::open(cfg).await?;
    if cfg.migrate_on_start {
        store
            .migrate(cfg.owner_url()?.as_deref())
            .await
            .context("applying migrations")?;
    } else {
        let pending = store.pending_migrations().await?;
        if !pending.is_empty() {
            bail!(
                "the database has {} pending migration(s) ({:?}) and migrate_on_start is off; run `pinfold migrate` first",
                pending.len(),
                pending
            );
        }
    }
    Ok(store)
}

/// Starts the server on `listener`, or on the configured address.
pub async fn start(cfg: Config, listener: Option<TcpListener>) -> anyhow::Result<Running> {
    let dev = cfg.dev_mode();
    let listen = cfg.listen_addr()?;
    if dev && !cfg.dev && !listen.ip().is_loopback() {
        bail!(
            "no token issuer is configured and {listen} is not a loopback address; configure [auth] issuers, or pass --dev to run with a generated development key"
        );
    }
    let store = open_store(&cfg).await?;
    let dev_key = if dev {
        Some(DevKey::load_or_create(&cfg.data_dir)?)
    } else {
        None
    };
    let egress = crate::egress_wiring::egress(&cfg);
    let authn = Arc::new(authenticator(&cfg, dev_key.as_ref(), &egress)?);
    let dev_tokens = match &dev_key {
        Some(key) => Some(ensure_dev_tenant(&store, key).await?),
        None => None,
    };
    // The console's one-click sign-in: dev mode on loopback only.
    let console_dev: Option<Arc<dyn pinfold_console::DevSignIn>> =
        if dev && listen.ip().is_loopback() {
            Some(Arc::new(crate::console_wiring::DevConsole {
                key: DevKey::load(&cfg.data_dir)?,
                tenant: DEV_TENANT.into(),
            }))
        } else {
            None
        };
    let console_signin = console_dev.is_some();
    let console = if cfg.console.enabled {
        Some(crate::console_wiring::ConsoleSetup {
            sessions: store.console(),
            settings: Arc::new(crate::console_wiring::settings(&cfg, console_dev, &egress)?),
        })
    } else {
        None
    };
    let keyring = Arc::new(crate::registry_wiring::keyring(&cfg)?);
    tracing::info!(
        current = keyring.current_kid(),
        old = ?keyring.old_kids().collect::<Vec<_>>(),
        "sealing secrets under the current encryption key; old keys only open"
    );
    let registry =
        crate::registry_wiring::registry_state(&store, keyring.clone(), cfg.limits.clone());
    let scope = crate::scope_wiring::scope_state(&store, &registry, keyring.clone(), &egress);
    let policies = crate::policy_cache::PolicyCache::new(store.tenants());
    let resolve =
        crate::resolve_wiring::resolve_state(&store, &registry, &cfg.resolve, &egress, &policies);
    let guard_endpoint = crate::guard_wiring::endpoint_state(
        &cfg,
        &store,
        &registry,
        keyring.clone(),
        &egress,
        &policies,
        &resolve,
    );
    let guard = crate::guard_wiring::guard_state(
        &store,
        &registry,
        keyring.clone(),
        &egress,
        &guard_endpoint,
    );
    crate::resolve_wiring::spawn_change_listener(&store, &registry, &resolve);
    let purge = crate::resolve_wiring::spawn_session_purge(&store, Duration::from_secs(600));
    let purge_states = crate::scope_wiring::spawn_state_purge(&store, Duration::from_secs(600));
    // Expired console sessions go even when nobody of their tenant signs
    // in again (run whether or not the console is served: rows of an
    // earlier run still expire).
    let purge_console =
        crate::console_wiring::spawn_session_purge(&store, Duration::from_secs(600));
    let scrape_access = cfg.metrics.access()?;
    if scrape_access.is_open() && !listen.ip().is_loopback() {
        tracing::warn!(
            "/metrics is served to any client: set [metrics] token (or token_file) and/or allow_from"
        );
    } else if !scrape_access.is_open() {
        tracing::info!(
            token = scrape_access.needs_token(),
            allow_from = %scrape_access
                .allow_from()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(","),
            "/metrics is protected"
        );
    }
    let ctx = AppContext {
        tenants: crate::policy_cache::Announcing::wrap(store.tenants(), &policies),
        registry,
        resolve,
        scope,
        guard,
        guard_endpoint,
        protected_resource: Arc::new(ProtectedResource::from_config(&cfg)),
        authn,
        metrics: Arc::new(Metrics::default()),
        scrapes: Arc::new(Scrapes::new(scrape_access)),
        body_limit: cfg.body_limit_bytes,
        request_timeout: Duration::from_secs(cfg.request_timeout_secs),
        rate_limiter: cfg
            .rate_limits
            .limiter(pinfold_http::ratelimit::Clock::system()),
        console,
    };
    let services = cfg.services()?;
    tracing::info!(
        services = %services.iter().map(|s| s.name()).collect::<Vec<_>>().join(","),
        "serving"
    );
    let router = app::build_for(ctx, &services);
    let listener = match listener {
        Some(l) => l,
        None => TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen} (is another process using it?)"))?,
    };
    let addr = listener.local_addr()?;
    // Registered now, before anyone can learn the address: a SIGTERM that
    // arrives right after startup still shuts down gracefully.
    let signals = shutdown_signal().context("installing the signal handlers")?;
    let (tx, rx) = oneshot::channel::<()>();
    let grace = Duration::from_secs(cfg.shutdown_grace_secs);
    let connections = cfg.connections.clone();
    let backend = store.kind();
    let task = tokio::spawn(async move {
        let (sig_tx, sig_rx) = oneshot::channel::<()>();
        let signal = async move {
            tokio::select! {
                _ = rx => {},
                _ = signals => {},
            }
            tracing::info!(
                grace_secs = grace.as_secs(),
                "shutting down: finishing in-flight requests"
            );
            let _ = sig_tx.send(());
        };
        let served = accept_loop(listener, router, connections, signal);
        let forced = async move {
            if sig_rx.await.is_ok() {
                tokio::time::sleep(grace).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        let result = tokio::select! {
            () = served => Ok(()),
            _ = forced => {
                tracing::warn!("grace period over; dropping the remaining connections");
                Ok(())
            }
        };
        purge.abort();
        purge_states.abort();
        purge_console.abort();
        store.close().await;
        result
    });
    Ok(Running {
        addr,
        dev_tokens,
        console_dev_sign_in: console_signin,
        backend,
        shutdown: Some(tx),
        task,
    })
}

/// Accepts connections until `shutdown`, then lets the open ones finish
/// their requests (HTTP/1.1 graceful shutdown: no new request on a
/// connection, the one in flight answered).
///
/// `axum::serve` would do the same but reads request headers with no time
/// limit, so a client sending a header a byte at a time (slowloris) holds
/// its connection for ever. Here:
///
/// - every connection must deliver each request's complete header section
///   within `header_read_timeout_secs` (the clock starts when the server
///   waits for a request, so an idle kept-alive connection is closed after
///   it too), else hyper closes it; the deadlines run on one timer per
///   connection ([`crate::conn_timer`]);
/// - at most `max_connections` are open at once: past that, the loop waits
///   for one to close before accepting (further clients queue in the
///   kernel's backlog, then are refused by it);
/// - a body is bounded by the edge (declared length over the limit → 413
///   at once, any body → at most the limit read) and in time by the request
///   timeout (408), which covers a body that stops arriving.
///
/// HTTP/1.1 only: HTTP/2 (which has no header read timeout in hyper) belongs
/// at the ingress in front of the replicas.
async fn accept_loop(
    listener: TcpListener,
    router: crate::fastpath::App,
    limits: crate::config::ConnectionSettings,
    shutdown: impl std::future::Future<Output = ()>,
) {
    use hyper_util::rt::TokioIo;
    use hyper_util::server::graceful::GracefulShutdown;
    use hyper_util::service::TowerToHyperService;

    let permits = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.header_read_timeout(Duration::from_secs(limits.header_read_timeout_secs));
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            biased;
            () = &mut shutdown => break,
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            biased;
            () = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors and the like: back off instead of
                    // spinning; a failed handshake of one client is not an
                    // error of the server.
                    if !matches!(
                        e.kind(),
                        std::io::ErrorKind::ConnectionAborted | std::io::ErrorKind::ConnectionReset
                    ) {
                        tracing::warn!(error = %e, "accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    continue;
                }
            },
        };
        // As `axum::serve` did not: small answers leave at once.
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(WithPeer {
            app: router.clone(),
            peer: ClientAddr(peer.ip()),
        });
        // One timer per connection for the header read timeout
        // (`conn_timer`: no trip through the timer wheel per request).
        let conn = graceful.watch(
            http.clone()
                .timer(crate::conn_timer::ConnTimer::new())
                .serve_connection(TokioIo::new(stream), service),
        );
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "connection closed with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// The application with the connection's peer address, which it hands to
/// the scrape route (its address allow-list, [`crate::scrape`]) and to no
/// other: the other routes' requests carry nothing more.
#[derive(Clone)]
struct WithPeer {
    app: crate::fastpath::App,
    peer: ClientAddr,
}

impl<B> tower::Service<axum::http::Request<B>> for WithPeer
where
    crate::fastpath::App: tower::Service<axum::http::Request<B>>,
{
    type Response = <crate::fastpath::App as tower::Service<axum::http::Request<B>>>::Response;
    type Error = <crate::fastpath::App as tower::Service<axum::http::Request<B>>>::Error;
    type Future = <crate::fastpath::App as tower::Service<axum::http::Request<B>>>::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.app.poll_ready(cx)
    }

    fn call(&mut self, mut req: axum::http::Request<B>) -> Self::Future {
        if req.uri().path() == crate::scrape::PATH {
            req.extensions_mut().insert(self.peer);
        }
        self.app.call(req)
    }
}

async fn ensure_dev_tenant(store: &Store, key: &DevKey) -> anyhow::Result<DevTokens> {
    let tenant = TenantId::parse(DEV_TENANT).expect("valid constant");
    let tenants = store.tenants();
    if tenants.tenant(&tenant).await?.is_none() {
        match tenants
            .create_tenant(
                &tenant,
                "Development",
                &Policy::default(),
                "pinfold-dev",
                pinfold_tenancy::routes::now(),
            )
            .await
        {
            Ok(_) | Err(pinfold_tenancy::StoreError::Conflict(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let ttl = Duration::from_secs(12 * 3600);
    Ok(DevTokens {
        platform: key.mint("dev-platform", None, &["platform"], ttl)?,
        admin: key.mint(
            "dev-admin",
            Some(DEV_TENANT),
            &["admin", "publisher", "reviewer", "reader", "client"],
            ttl,
        )?,
        client: key.mint("dev-client", Some(DEV_TENANT), &["client"], ttl)?,
    })
}

/// Resolves on SIGINT or SIGTERM. The handlers are installed when this is
/// called, not when the future is first polled.
#[cfg(unix)]
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()> + Send> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => {},
            _ = term.recv() => {},
        }
    })
}

/// Resolves on Ctrl-C.
#[cfg(not(unix))]
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()> + Send> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}
