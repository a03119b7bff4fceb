//! pinfold-tests: the harness behind the integration suite.
//!
//! Every test gets its own [`TestApp`]: a fresh database (a temporary SQLite
//! file, or a fresh PostgreSQL schema when `PINFOLD_TEST_DATABASE_URL` is
//! set), the real application router, and a fresh tenant. Tokens are minted
//! by a test issuer whose keys only this process knows.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair as _};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use base64::Engine as _;
use http_body_util::BodyExt as _;
use jsonwebtoken::{Algorithm, DecodingKey};
use pinfold_core::ids::TenantId;
use pinfold_http::Authenticator;
use pinfold_http::auth::{ClaimMapping, IssuerConfig, KeySource};
use pinfold_http::ratelimit::{Clock, RateLimiter};
use pinfold_registry::keys::Keyring;
use pinfold_server::app::{self, AppContext};
use pinfold_server::config::Config;
use pinfold_server::metrics::Metrics;
use pinfold_server::protected_resource::ProtectedResource;
use pinfold_server::services::Service;
use pinfold_server::store::Store;
use serde_json::{Value, json};
use tower::ServiceExt as _;

pub mod pgcluster;

/// Issuer of the test tokens.
pub const ISSUER: &str = "https://issuer.test";
/// Audience of the test tokens.
pub const AUDIENCE: &str = "pinfold-test";
/// Issuer of HS256 test tokens.
pub const HS_ISSUER: &str = "https://hs.issuer.test";
/// The HS256 issuer's shared secret.
pub const HS_SECRET: &str = "an-hs256-secret-of-at-least-32-bytes!!";

/// The process-wide test signing key.
pub struct TestKey {
    /// PKCS#8 document.
    pub pkcs8: Vec<u8>,
    /// Raw public key.
    pub public: Vec<u8>,
}

/// The Ed25519 key of [`ISSUER`].
pub fn test_key() -> &'static TestKey {
    static KEY: OnceLock<TestKey> = OnceLock::new();
    KEY.get_or_init(|| {
        let doc = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).expect("keygen");
        let pair = Ed25519KeyPair::from_pkcs8(doc.as_ref()).expect("key");
        TestKey {
            pkcs8: doc.as_ref().to_vec(),
            public: pair.public_key().as_ref().to_vec(),
        }
    })
}

/// base64url without padding.
pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Signs arbitrary header and claims JSON with the test Ed25519 key (no
/// validation of what is inside: for crafting bad tokens).
pub fn sign_raw(header: &Value, claims: &Value) -> String {
    let input = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    let pair = Ed25519KeyPair::from_pkcs8(&test_key().pkcs8).unwrap();
    let sig = pair.sign(input.as_bytes());
    format!("{input}.{}", b64(sig.as_ref()))
}

/// Standard valid claims for the test issuer.
pub fn claims(sub: &str, tenant: Option<&str>, roles: &[&str]) -> Value {
    let mut c = json!({
        "iss": ISSUER, "aud": AUDIENCE, "sub": sub, "roles": roles,
        "iat": now(), "nbf": now(), "exp": now() + 600,
    });
    if let Some(t) = tenant {
        c["tenant"] = json!(t);
    }
    c
}

/// A valid EdDSA token.
pub fn token(sub: &str, tenant: Option<&str>, roles: &[&str]) -> String {
    sign_raw(
        &json!({"alg": "EdDSA", "typ": "JWT"}),
        &claims(sub, tenant, roles),
    )
}

/// The issuers every test app trusts.
pub fn test_issuers() -> Vec<IssuerConfig> {
    vec![
        IssuerConfig {
            issuer: ISSUER.into(),
            audience: AUDIENCE.into(),
            algorithms: vec![Algorithm::EdDSA],
            keys: KeySource::Static(
                DecodingKey::from_ed_components(&b64(&test_key().public)).unwrap(),
            ),
            mapping: ClaimMapping::FromToken,
        },
        IssuerConfig {
            issuer: HS_ISSUER.into(),
            audience: AUDIENCE.into(),
            algorithms: vec![Algorithm::HS256],
            keys: KeySource::Static(DecodingKey::from_secret(HS_SECRET.as_bytes())),
            mapping: ClaimMapping::FromToken,
        },
    ]
}

/// Which database the suite runs against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// A temporary SQLite file per test.
    Sqlite,
    /// A fresh schema per test in this PostgreSQL database.
    Postgres(String),
}

/// `PINFOLD_TEST_DATABASE_URL` (PostgreSQL) or SQLite.
pub fn backend() -> Backend {
    match std::env::var("PINFOLD_TEST_DATABASE_URL") {
        Ok(u) if !u.trim().is_empty() => Backend::Postgres(u),
        _ => Backend::Sqlite,
    }
}

/// A fresh, empty database: its URL and the guard keeping it alive.
pub struct FreshDb {
    /// URL for `database_url`. On PostgreSQL, the runtime login role
    /// [`RUNTIME_ROLE`] (a member of `pinfold_runtime`: no superuser, no
    /// `BYPASSRLS`, owns nothing), so the whole suite runs under row-level
    /// security.
    pub url: String,
    /// PostgreSQL: the owner's URL for the same schema (for
    /// `database_owner_url`: migrations, and tests that inspect as owner).
    pub owner_url: Option<String>,
    /// The data directory (SQLite file lives here).
    pub dir: tempfile::TempDir,
}

/// Creates a fresh database for one test.
pub async fn fresh_db() -> FreshDb {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = match backend() {
        Backend::Sqlite => format!("sqlite://{}", dir.path().join("pinfold.db").display()),
        Backend::Postgres(base) => {
            let pool = sqlx::PgPool::connect(&base)
                .await
                .unwrap_or_else(|e| panic!("PINFOLD_TEST_DATABASE_URL: cannot connect: {e}"));
            let stamp = now();
            // Sweep schemas left by runs more than two hours old.
            let old: Vec<String> = sqlx::query_scalar(
                "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'pinfold_t_%'",
            )
            .fetch_all(&pool)
            .await
            .unwrap_or_default();
            for s in old {
                let ts: u64 = s
                    .split('_')
                    .nth(2)
                    .and_then(|t| t.parse().ok())
                    .unwrap_or(u64::MAX);
                if ts + 7200 < stamp {
                    let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                        "DROP SCHEMA IF EXISTS {s} CASCADE"
                    )))
                    .execute(&pool)
                    .await;
                }
            }
            let schema = format!("pinfold_t_{stamp}_{}", uuid::Uuid::new_v4().simple());
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
                .execute(&pool)
                .await
                .expect("create schema");
            ensure_runtime_role(&pool).await;
            pool.close().await;
            let sep = if base.contains('?') { '&' } else { '?' };
            let owner = format!("{base}{sep}options=-c%20search_path%3D{schema}");
            let runtime = as_runtime_role(&owner);
            return FreshDb {
                url: runtime,
                owner_url: Some(owner),
                dir,
            };
        }
    };
    FreshDb {
        url,
        owner_url: None,
        dir,
    }
}

/// `PINFOLD_TEST_SCHEMA_MUTATION`: one SQL statement run as the owner on
/// each PostgreSQL test schema right after its migrations. Only
/// `scripts/rls-mutation-check.sh` sets it, to weaken the row-level
/// security of migration 0005 (drop a policy, disable FORCE) and prove
/// that the suite then fails.
async fn mutate_schema(db: &FreshDb) {
    let (Some(owner), Ok(sql)) = (
        db.owner_url.as_deref(),
        std::env::var("PINFOLD_TEST_SCHEMA_MUTATION"),
    ) else {
        return;
    };
    let pool = sqlx::PgPool::connect(owner)
        .await
        .expect("connect as owner");
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(&pool)
        .await
        .expect("PINFOLD_TEST_SCHEMA_MUTATION");
    pool.close().await;
}

/// The login role the suite serves PostgreSQL as (see [`FreshDb::url`]).
pub const RUNTIME_ROLE: &str = "pinfold_test_runtime";

/// Creates `pinfold_runtime` (as migration 0006 would) and the login role
/// [`RUNTIME_ROLE`] in it, once per database cluster. Test processes run in
/// parallel: an advisory lock serialises them, and what exists is kept.
async fn ensure_runtime_role(pool: &sqlx::PgPool) {
    static DONE: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    DONE.get_or_init(|| async {
        let mut conn = pool.acquire().await.expect("acquire");
        // Any fixed key: only this setup takes it.
        sqlx::query("SELECT pg_advisory_lock(7135218901)")
            .execute(&mut *conn)
            .await
            .expect("advisory lock");
        let setup = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DO $$
             BEGIN
                 IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pinfold_runtime') THEN
                     CREATE ROLE pinfold_runtime NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
                 END IF;
                 IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{RUNTIME_ROLE}') THEN
                     CREATE ROLE {RUNTIME_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE
                         PASSWORD '{RUNTIME_ROLE}';
                 END IF;
                 IF NOT pg_has_role('{RUNTIME_ROLE}', 'pinfold_runtime', 'MEMBER') THEN
                     GRANT pinfold_runtime TO {RUNTIME_ROLE};
                 END IF;
             END
             $$"
        )))
        .execute(&mut *conn)
        .await;
        let _ = sqlx::query("SELECT pg_advisory_unlock(7135218901)")
            .execute(&mut *conn)
            .await;
        setup.expect("create the runtime roles");
    })
    .await;
}

/// `owner_url` with [`RUNTIME_ROLE`] (and its test password) as the user.
fn as_runtime_role(owner_url: &str) -> String {
    let mut u = url::Url::parse(owner_url).expect("PINFOLD_TEST_DATABASE_URL is a URL");
    u.set_username(RUNTIME_ROLE).expect("a URL with a host");
    u.set_password(Some(RUNTIME_ROLE))
        .expect("a URL with a host");
    u.to_string()
}

/// A configuration pointing at `db`.
pub fn config_for(db: &FreshDb) -> Config {
    Config {
        data_dir: db.dir.path().to_path_buf(),
        database_url: db.url.clone(),
        database_owner_url: db.owner_url.clone(),
        // Off unless a test turns them on (`tests/.../limits.rs`): the
        // suite's own bursts are not what it checks.
        rate_limits: pinfold_server::config::RateLimitSettings {
            enabled: false,
            ..Default::default()
        },
        // The suite's upstreams and identity providers run on loopback,
        // which the egress policy refuses unless the operator allows it:
        // said here, not left to dev mode (`tests/.../egress.rs` turns it
        // off again).
        egress: pinfold_server::config::EgressSettings {
            allow_loopback: Some(true),
            ..Default::default()
        },
        ..Config::default()
    }
}

/// One test's application.
pub struct TestApp {
    /// The router, called in-process.
    pub router: pinfold_server::fastpath::App,
    /// The store underneath.
    pub store: Store,
    /// A fresh tenant created for this test.
    pub tenant: TenantId,
    /// The authenticator (to inspect JWKS fetches and such).
    pub authn: Arc<Authenticator>,
    /// The database (kept alive).
    pub db: FreshDb,
    /// The current encryption key (base64) sealing every stored secret:
    /// `encryption_key` of the configuration, or a fixed test key.
    pub encryption_key: String,
    /// The old encryption keys (base64), which only open:
    /// `encryption_keys_old` of the configuration.
    pub encryption_keys_old: Vec<String>,
    /// The rate limiter (`None` unless the configuration enables it), on a
    /// manual clock: tests advance it instead of sleeping.
    pub rate_limiter: Option<Arc<RateLimiter>>,
}

/// A response, read whole.
#[derive(Debug)]
pub struct Resp {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: axum::http::HeaderMap,
    /// Raw body.
    pub bytes: Vec<u8>,
}

impl Resp {
    /// The body as JSON (panics with the body text when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes)
            .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&self.bytes)))
    }

    /// A header as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    }

    /// Asserts a problem+json response with this status and code; returns the body.
    #[track_caller]
    pub fn problem(&self, status: u16, code: &str) -> Value {
        assert_eq!(
            self.status.as_u16(),
            status,
            "body: {}",
            String::from_utf8_lossy(&self.bytes)
        );
        assert_eq!(
            self.header("content-type").as_deref(),
            Some("application/problem+json")
        );
        let body = self.json();
        assert_eq!(body["code"], code, "body: {body}");
        assert_eq!(body["status"], status);
        let rid = self.header("x-request-id").expect("x-request-id header");
        assert_eq!(body["request_id"], rid.as_str());
        body
    }
}

/// The keyring of `current` and `old` (base64 each), as `pinfold serve`
/// builds it from `encryption_key` and `encryption_keys_old`.
pub fn keyring_of(current: &str, old: &[String]) -> Keyring {
    pinfold_server::registry_wiring::with_old_keys(
        Keyring::from_base64(current).expect("encryption key"),
        old,
    )
    .expect("old encryption keys")
}

/// The real application router over `store`, as `pinfold serve` builds it,
/// serving `services` (and the operational routes).
fn app_router(
    cfg: &Config,
    store: &Store,
    egress: &Arc<pinfold_egress::Egress>,
    authn: &Arc<Authenticator>,
    keyring: Keyring,
    services: &[Service],
    rate_limiter: Option<Arc<RateLimiter>>,
) -> pinfold_server::fastpath::App {
    let keyring = Arc::new(keyring);
    let registry =
        pinfold_server::registry_wiring::registry_state(store, keyring.clone(), cfg.limits.clone());
    let policies = pinfold_server::policy_cache::PolicyCache::new(store.tenants());
    let resolve = pinfold_server::resolve_wiring::resolve_state(
        store,
        &registry,
        &cfg.resolve,
        egress,
        &policies,
    );
    let guard_endpoint = pinfold_server::guard_wiring::endpoint_state(
        cfg,
        store,
        &registry,
        keyring.clone(),
        egress,
        &policies,
        &resolve,
    );
    let guard = pinfold_server::guard_wiring::guard_state(
        store,
        &registry,
        keyring.clone(),
        egress,
        &guard_endpoint,
    );
    let scope = pinfold_server::scope_wiring::scope_state(store, &registry, keyring, egress);
    pinfold_server::resolve_wiring::spawn_change_listener(store, &registry, &resolve);
    app::build_for(
        AppContext {
            tenants: pinfold_server::policy_cache::Announcing::wrap(store.tenants(), &policies),
            registry,
            resolve,
            scope,
            guard,
            guard_endpoint,
            protected_resource: Arc::new(ProtectedResource::from_config(cfg)),
            authn: authn.clone(),
            metrics: Arc::new(Metrics::default()),
            scrapes: Arc::new(pinfold_server::scrape::Scrapes::new(
                cfg.metrics.access().expect("[metrics]"),
            )),
            body_limit: cfg.body_limit_bytes,
            request_timeout: Duration::from_secs(cfg.request_timeout_secs),
            rate_limiter,
            console: Some(pinfold_server::console_wiring::ConsoleSetup {
                sessions: store.console(),
                settings: Arc::new(
                    pinfold_server::console_wiring::settings(
                        cfg,
                        Some(Arc::new(TestSignIn)),
                        egress,
                    )
                    .expect("[console]"),
                ),
            }),
        },
        services,
    )
}

/// The console's one-click sign-in in the suite: `as=<sub>:<role>+<role>`
/// signs in as that subject with those roles in the tenant of the form's
/// path, in a token of the test issuer (verified like any other).
pub struct TestSignIn;

impl pinfold_console::DevSignIn for TestSignIn {
    fn identities(&self, _tenant: &str) -> Vec<(&'static str, &'static str)> {
        vec![("reviewer:reviewer", "reviewer")]
    }

    fn token(&self, tenant: &str, value: &str) -> Option<String> {
        let (sub, roles) = value.split_once(':')?;
        let roles: Vec<&str> = roles.split('+').collect();
        Some(token(sub, Some(tenant), &roles))
    }
}

impl TestApp {
    /// A new app on a fresh database, with a fresh tenant.
    pub async fn new() -> TestApp {
        Self::with_issuers(test_issuers()).await
    }

    /// A new app trusting exactly `issuers`.
    pub async fn with_issuers(issuers: Vec<IssuerConfig>) -> TestApp {
        Self::build(issuers, |_| {}).await
    }

    /// A new app with a configuration tweak.
    pub async fn build(issuers: Vec<IssuerConfig>, tweak: impl FnOnce(&mut Config)) -> TestApp {
        let db = fresh_db().await;
        let mut cfg = config_for(&db);
        tweak(&mut cfg);
        if cfg.database_url != db.url && cfg.database_owner_url == db.owner_url {
            // The tweak points the app at another database (a throwaway
            // cluster, say): this schema's owner does not migrate that one.
            cfg.database_owner_url = None;
        }
        let store = pinfold_server::serve::open_store(&cfg)
            .await
            .expect("open store");
        mutate_schema(&db).await;
        let egress = pinfold_server::egress_wiring::egress(&cfg);
        let authn = Arc::new(Authenticator::new(
            issuers,
            cfg.auth.leeway_secs,
            pinfold_server::egress_wiring::jwks_fetch(&cfg, &egress),
        ));
        let encryption_key = cfg
            .encryption_key
            .clone()
            .unwrap_or_else(|| base64::engine::general_purpose::STANDARD.encode([42u8; 32]));
        let encryption_keys_old = cfg.encryption_keys_old.clone();
        let rate_limiter = cfg.rate_limits.limiter(Clock::manual());
        let router = app_router(
            &cfg,
            &store,
            &egress,
            &authn,
            keyring_of(&encryption_key, &encryption_keys_old),
            &Service::ALL,
            rate_limiter.clone(),
        );
        let mut app = TestApp {
            router,
            store,
            tenant: TenantId::parse("placeholder").unwrap(),
            authn,
            db,
            encryption_key,
            encryption_keys_old,
            rate_limiter,
        };
        app.await_listening().await;
        app.tenant = app.new_tenant().await;
        app
    }

    /// On PostgreSQL, waits until this app's change listener has handled
    /// every notification committed so far, its own writes' included (each
    /// evicts what it names from the ETag index, even when this app has
    /// since read it afresh): a test that warms a cache after a write and
    /// then counts what that cache answered settles first. A no-op on
    /// SQLite.
    pub async fn settle(&self) {
        if let Store::Postgres(pg) = &self.store {
            pg.notification_barrier(Duration::from_secs(10))
                .await
                .expect("the change listener handles a barrier within 10 s");
        }
    }

    /// On PostgreSQL, waits until the registry change listener's `LISTEN`
    /// is in effect. Its first `LISTEN` reports the gap before it, which
    /// empties the registry's caches; waiting here keeps that from emptying
    /// a cache a test has just warmed, at a moment that depends on the
    /// machine's load.
    async fn await_listening(&self) {
        if let Some(mut listener) = self.registry_listener() {
            tokio::time::timeout(Duration::from_secs(10), listener.wait_for(|s| s.listening))
                .await
                .expect("the registry listener listens within 10 s")
                .expect("the registry listener runs");
        }
    }

    /// A second application ("replica") over the same database, with its own
    /// caches, as another Pinfold process would be.
    pub async fn replica(&self) -> TestApp {
        self.with_encryption_keys(&self.encryption_key, &self.encryption_keys_old)
            .await
    }

    /// Stops this app as a stopped replica ends: its router (with every
    /// task its services hold), its authenticator and its store's pool are
    /// dropped. The database is returned, so replicas still serving it
    /// keep it.
    pub async fn stop(self) -> FreshDb {
        let TestApp {
            router, store, db, ..
        } = self;
        drop(router);
        store.close().await;
        db
    }

    /// This app's keyring (current and old encryption keys).
    pub fn keyring(&self) -> Keyring {
        keyring_of(&self.encryption_key, &self.encryption_keys_old)
    }

    /// A replica ([`TestApp::replica`]) configured with other encryption
    /// keys: `current` (base64) and the old keys `old`, as a process
    /// restarted with a rotated key would be.
    pub async fn with_encryption_keys(&self, current: &str, old: &[String]) -> TestApp {
        let cfg = config_for(&self.db);
        let store = pinfold_server::serve::open_store(&cfg)
            .await
            .expect("open store");
        let egress = pinfold_server::egress_wiring::egress(&cfg);
        let authn = Arc::new(Authenticator::new(
            test_issuers(),
            cfg.auth.leeway_secs,
            pinfold_server::egress_wiring::jwks_fetch(&cfg, &egress),
        ));
        let router = app_router(
            &cfg,
            &store,
            &egress,
            &authn,
            keyring_of(current, old),
            &Service::ALL,
            None,
        );
        let replica = TestApp {
            router,
            store,
            tenant: self.tenant.clone(),
            authn,
            db: FreshDb {
                url: self.db.url.clone(),
                owner_url: self.db.owner_url.clone(),
                dir: tempfile::tempdir().expect("tempdir"),
            },
            encryption_key: current.to_owned(),
            encryption_keys_old: old.to_vec(),
            rate_limiter: None,
        };
        replica.await_listening().await;
        replica
    }

    /// This app's database, tenant and tokens behind a router serving only
    /// `services` (and the operational routes), as `pinfold serve
    /// --services ...` builds it.
    pub fn serving(&self, services: &[Service]) -> TestApp {
        let cfg = config_for(&self.db);
        let router = app_router(
            &cfg,
            &self.store,
            &pinfold_server::egress_wiring::egress(&cfg),
            &self.authn,
            self.keyring(),
            services,
            self.rate_limiter.clone(),
        );
        TestApp {
            router,
            store: self.store.clone(),
            tenant: self.tenant.clone(),
            authn: self.authn.clone(),
            db: FreshDb {
                url: self.db.url.clone(),
                owner_url: self.db.owner_url.clone(),
                dir: tempfile::tempdir().expect("tempdir"),
            },
            encryption_key: self.encryption_key.clone(),
            encryption_keys_old: self.encryption_keys_old.clone(),
            rate_limiter: self.rate_limiter.clone(),
        }
    }

    /// A pool connected as the schema's owner (PostgreSQL only; `None` on
    /// SQLite): for tests that inspect or arrange rows across tenants, which
    /// the runtime role behind [`TestApp::store`] cannot see.
    pub async fn owner_pool(&self) -> Option<sqlx::PgPool> {
        let url = self.db.owner_url.as_deref()?;
        Some(
            sqlx::postgres::PgPoolOptions::new()
                .max_connections(2)
                .connect(url)
                .await
                .expect("connect as owner"),
        )
    }

    /// The PostgreSQL registry change listener of this app (`None` on
    /// SQLite, which runs as one process and needs none): wait on it for
    /// `LISTEN` to be in effect, or for notifications to arrive.
    pub fn registry_listener(
        &self,
    ) -> Option<tokio::sync::watch::Receiver<pinfold_store_postgres::ListenerStatus>> {
        match &self.store {
            Store::Postgres(pg) => Some(pg.listener_status()),
            Store::Sqlite(_) => None,
        }
    }

    /// Creates another tenant through the API.
    pub async fn new_tenant(&self) -> TenantId {
        let id = format!("t-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let r = self
            .send(
                "POST",
                "/v1/tenants",
                Some(&self.platform()),
                Some(json!({"id": id, "name": "Test tenant"})),
            )
            .await;
        assert_eq!(
            r.status,
            StatusCode::CREATED,
            "{}",
            String::from_utf8_lossy(&r.bytes)
        );
        TenantId::parse(&id).unwrap()
    }

    /// A platform token.
    pub fn platform(&self) -> String {
        token("platform-op", None, &["platform"])
    }

    /// A token in this test's tenant with `roles`.
    pub fn as_roles(&self, sub: &str, roles: &[&str]) -> String {
        token(sub, Some(self.tenant.as_str()), roles)
    }

    /// The value of an unlabelled sample `name` in `/metrics` (panics when
    /// it is absent).
    pub async fn metric(&self, name: &str) -> f64 {
        let r = self.send("GET", "/metrics", None, None).await;
        let text = String::from_utf8(r.bytes).expect("/metrics is text");
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} not in /metrics"))
            .parse()
            .unwrap_or_else(|_| panic!("{name} is not a number"))
    }

    /// Replaces the tenant's policy with `policy` (conditionally on its
    /// current ETag, as an admin); panics unless it is accepted.
    pub async fn put_policy(&self, policy: &Value) {
        let path = format!("/v1/tenants/{}/policy", self.tenant);
        let etag = self
            .get(&path, &self.admin())
            .await
            .header("etag")
            .expect("the policy's ETag")
            .to_owned();
        let r = self
            .send_raw(
                "PUT",
                &path,
                Some(&self.admin()),
                Some(policy.to_string().as_bytes()),
                &[("if-match", &etag)],
            )
            .await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    }

    /// An admin token in this test's tenant.
    pub fn admin(&self) -> String {
        self.as_roles("alice-admin", &["admin"])
    }

    /// Sends a JSON request.
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Resp {
        let bytes = body.map(|b| b.to_string().into_bytes());
        self.send_raw(method, path, token, bytes.as_deref(), &[])
            .await
    }

    /// Sends raw bytes (as `application/json`) with extra headers.
    pub async fn send_raw(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&[u8]>,
        headers: &[(&str, &str)],
    ) -> Resp {
        let mut req = Request::builder().method(method).uri(path);
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        if body.is_some()
            && !headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        {
            req = req.header("content-type", "application/json");
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req
            .body(
                body.map(|b| Body::from(b.to_vec()))
                    .unwrap_or_else(Body::empty),
            )
            .unwrap();
        let resp = self.router.clone().oneshot(req).await.expect("infallible");
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec();
        Resp {
            status,
            headers,
            bytes,
        }
    }

    /// `GET` with a token.
    pub async fn get(&self, path: &str, token: &str) -> Resp {
        self.send("GET", path, Some(token), None).await
    }
}

/// Reads a `pinfold serve` child's stdout up to the end of its startup
/// banner (the line `Press Ctrl-C to stop.`): the server is listening from
/// then on. Panics, with what was read, if the child exits first.
pub fn read_banner(reader: &mut impl std::io::BufRead) -> String {
    let mut banner = String::new();
    loop {
        let mut line = String::new();
        let n = reader.read_line(&mut line).unwrap();
        assert!(n > 0, "pinfold serve exited before listening: {banner}");
        banner.push_str(&line);
        if line.starts_with("Press Ctrl-C to stop.") {
            return banner;
        }
    }
}

/// Runs the calling test alone in a child process (this test binary, with
/// `--exact NAME`), for tests that install process-wide or thread-local
/// tracing state: `cargo test` runs every test of the binary in one process,
/// where other tests' subscribers and cached callsite interest would make
/// such tests flaky. Returns `true` in the child (run the body there) and
/// `false` in the parent, after asserting the child passed.
pub fn in_own_process(name: &str) -> bool {
    const CHILD: &str = "PINFOLD_TEST_CHILD";
    if std::env::var_os(CHILD).is_some() {
        return true;
    }
    let exe = std::env::current_exe().expect("test binary");
    let out = std::process::Command::new(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("run the test in a child process");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{name} failed in its own process:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    false
}

/// The realdata folder (`$PINFOLD_REALDATA` or `../shared/realdata` from the
/// workspace root), or `None` with a printed notice.
pub fn realdata() -> Option<std::path::PathBuf> {
    let p = std::env::var_os("PINFOLD_REALDATA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/realdata")
        });
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!(
            "notice: realdata not found at {}; skipping real-data checks",
            p.display()
        );
        None
    }
}

/// What a test can serve over TCP: a test double's router, or the real
/// application ([`TestApp::router`]).
pub trait Served:
    tower::Service<
        axum::extract::Request,
        Response = axum::response::Response,
        Error = std::convert::Infallible,
        Future: Send,
    > + Clone
    + Send
    + 'static
{
}

impl<S> Served for S where
    S: tower::Service<
            axum::extract::Request,
            Response = axum::response::Response,
            Error = std::convert::Infallible,
            Future: Send,
        > + Clone
        + Send
        + 'static
{
}

/// Serves `service` on `listener` in the background, for the rest of the
/// test.
pub fn serve_on(listener: tokio::net::TcpListener, service: impl Served) {
    tokio::spawn(async move {
        let _ = axum::serve(listener, tower::make::Shared::new(service)).await;
    });
}

/// Serves `service` on a fresh loopback port for the rest of the test; its
/// base URL.
pub async fn serve_local(service: impl Served) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    serve_on(listener, service);
    format!("http://{addr}")
}

/// The live (not zombie) processes of process group `pgid`, as
/// "pid comm state", read from `/proc` (Linux).
pub fn process_group_members(pgid: i32) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid pgrp ...": comm may hold spaces and ')'.
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let (Some(state), Some(pgrp)) = (fields.first(), fields.get(2)) else {
            continue;
        };
        if *state != "Z" && pgrp.parse::<i32>().ok() == Some(pgid) {
            let comm = head.split_once('(').map_or("", |(_, c)| c);
            out.push(format!("{pid} {comm} {state}"));
        }
    }
    out
}
