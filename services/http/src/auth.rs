//! Bearer-token authentication.
//!
//! Every request that touches tenant data carries `Authorization: Bearer
//! <JWT>`. Verification is explicit and strict (ARCHITECTURE.md, "Auth"):
//!
//! - the header is at most 8 KiB and the token has exactly three segments;
//! - the issuer (`iss`) selects a configured issuer; its algorithm allow-list
//!   must contain the header's `alg` (so `none` and HS/RS/EdDSA confusion
//!   fail before any key is touched);
//! - `exp`, `iss`, `aud`, `sub` are required, `nbf` is validated, leeway is
//!   at most 30 seconds;
//! - keys come from configuration or the issuer's JWKS URL; `jku`, `x5u` and
//!   an embedded `jwk` in the token header are never followed;
//! - an unknown `kid` refetches the JWKS at most once per refetch interval
//!   (default 60 s), so a flood of forged `kid`s cannot hammer the provider;
//! - the tenant and roles come from the token's `tenant` and `roles` claims,
//!   or, for an issuer with a [`ClaimMapping::Rules`] (GitHub Actions, whose
//!   tokens name a repository and a workflow, not a tenant), from the first
//!   configured rule whose claims all match, and never from the token then.
//!
//! Verified tokens are cached so a repeat costs a keyed hash of the token
//! bytes (foldhash with a per-process random seed: a token of ~600 bytes
//! hashes in about a tenth of SipHash's time), a map lookup and a comparison
//! with the cached token itself (so a hash collision can only miss, never
//! admit another token, and only a verified token is ever cached); the
//! cached entry still honours `exp`. The cache is bounded by bytes, since it
//! holds the tokens. Tokens are never logged.

use std::collections::HashMap;
use std::hash::BuildHasher as _;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use pinfold_core::ids::TenantId;
use tokio::sync::Mutex;

use crate::bearer;
use crate::problem::ApiError;

/// Largest `Authorization` header accepted.
pub const MAX_AUTHORIZATION_BYTES: usize = 8 * 1024;
/// Largest leeway the configuration may set.
pub const MAX_LEEWAY_SECS: u64 = 30;

/// A role a token may carry (`roles` claim).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Manages tenants across the whole installation.
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

    fn bit(self) -> u8 {
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
    /// The tenant the token belongs to (absent for platform tokens).
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

/// Why a request is not authenticated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No bearer token was sent.
    #[error("a bearer token is required")]
    Missing,
    /// A token was sent but is not acceptable.
    #[error("invalid token: {0}")]
    Invalid(String),
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> Self {
        let (code, title, challenge) = match &e {
            AuthError::Missing => (
                "unauthenticated",
                "Authentication required",
                "Bearer realm=\"pinfold\"".to_owned(),
            ),
            AuthError::Invalid(why) => (
                "invalid_token",
                "Invalid bearer token",
                format!(
                    "Bearer realm=\"pinfold\", error=\"invalid_token\", error_description=\"{}\"",
                    why.replace(['"', '\\'], "'")
                ),
            ),
        };
        ApiError::new(StatusCode::UNAUTHORIZED, code, title)
            .detail(e.to_string())
            .header(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_str(&challenge)
                    .unwrap_or_else(|_| HeaderValue::from_static("Bearer realm=\"pinfold\"")),
            )
    }
}

/// Where an issuer's verification keys come from.
pub enum KeySource {
    /// One configured key (Ed25519 public key or HS256 secret); `kid` is ignored.
    Static(DecodingKey),
    /// A JWKS document fetched from a URL and cached by `kid`.
    Jwks {
        /// The JWKS URL.
        url: String,
        /// Minimum time between two fetches caused by unknown `kid`s.
        min_refetch: Duration,
    },
}

/// One trusted token issuer.
pub struct IssuerConfig {
    /// Expected `iss`.
    pub issuer: String,
    /// Expected `aud`.
    pub audience: String,
    /// Algorithms accepted from this issuer.
    pub algorithms: Vec<Algorithm>,
    /// Verification keys.
    pub keys: KeySource,
    /// How a verified token names its tenant and roles.
    pub mapping: ClaimMapping,
}

/// How an issuer's tokens name their tenant and roles.
#[derive(Debug, Clone, Default)]
pub enum ClaimMapping {
    /// The token's own `tenant` and `roles` claims: an issuer that mints
    /// tokens for Pinfold (dev mode, an IdP configured with these claims).
    #[default]
    FromToken,
    /// Configured rules over the token's claims, first match wins. The
    /// token's own `tenant` and `roles` are ignored, and a token no rule
    /// matches is refused: an issuer that serves many parties (GitHub
    /// Actions signs a token for every repository) decides nothing itself.
    Rules(Vec<ClaimRule>),
}

/// A claim value a rule requires: the exact string, or (written with a
/// trailing `*`) any string starting with the text before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimPattern {
    /// The claim equals this string.
    Exact(String),
    /// The claim starts with this (non-empty) string.
    Prefix(String),
}

impl ClaimPattern {
    /// Parses a pattern: a trailing `*` makes it a prefix; `*` anywhere else,
    /// an empty pattern and a bare `*` are refused.
    pub fn parse(s: &str) -> Result<ClaimPattern, String> {
        if s.is_empty() {
            return Err("must not be empty".into());
        }
        let (text, prefix) = match s.strip_suffix('*') {
            Some(t) => (t, true),
            None => (s, false),
        };
        if text.contains('*') {
            return Err(format!(
                "{s:?}: `*` may only end a pattern (a prefix match)"
            ));
        }
        if text.is_empty() {
            return Err(format!("{s:?}: a prefix pattern needs text before the `*`"));
        }
        Ok(if prefix {
            ClaimPattern::Prefix(text.to_owned())
        } else {
            ClaimPattern::Exact(text.to_owned())
        })
    }

    /// Whether `value` matches.
    pub fn matches(&self, value: &str) -> bool {
        match self {
            ClaimPattern::Exact(v) => value == v,
            ClaimPattern::Prefix(p) => value.starts_with(p.as_str()),
        }
    }
}

/// Claims that name who a token is for (the subject, the repository, its
/// owner, any numeric id): a rule may only pin them exactly, never by prefix.
fn is_identity_claim(claim: &str) -> bool {
    matches!(
        claim,
        "sub" | "repository" | "repository_owner" | "repository_id" | "repository_owner_id"
    ) || claim.ends_with("_id")
}

/// One rule of a [`ClaimMapping::Rules`]: when every listed claim of a
/// token is a string matching its pattern, the token acts in `tenant` with
/// `roles`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRule {
    matches: Vec<(String, ClaimPattern)>,
    tenant: TenantId,
    roles: Vec<Role>,
}

/// Why a rule is not acceptable: the field (`match.repository`, `tenant`,
/// `roles[1]`, ...) and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct RuleError {
    /// The offending field, relative to the rule.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl ClaimRule {
    /// Builds a rule from its configuration: at least one claim to match,
    /// a valid tenant id, and one or more tenant roles. `platform` is
    /// refused: a rule maps tokens of an outside issuer (a CI job, any
    /// repository of an organisation) into one tenant, and managing every
    /// tenant of the installation is not something such a token should get
    /// by matching a pattern; platform operators use the issuer that mints
    /// Pinfold's own claims.
    pub fn new<'a>(
        matches: impl IntoIterator<Item = (&'a str, &'a str)>,
        tenant: &str,
        roles: &[String],
    ) -> Result<ClaimRule, RuleError> {
        let err = |field: String, message: String| RuleError { field, message };
        let mut list = Vec::new();
        for (claim, pattern) in matches {
            if claim.is_empty() {
                return Err(err("match".into(), "a claim name must not be empty".into()));
            }
            let p = ClaimPattern::parse(pattern).map_err(|m| err(format!("match.{claim}"), m))?;
            if matches!(p, ClaimPattern::Prefix(_)) && is_identity_claim(claim) {
                return Err(err(
                    format!("match.{claim}"),
                    format!(
                        "{pattern:?}: {claim} names who the token is for and takes an exact value only \
                         (a prefix would also match other repositories or owners, e.g. `acme/files*` matches `acme/files-evil`)"
                    ),
                ));
            }
            list.push((claim.to_owned(), p));
        }
        if list.is_empty() {
            return Err(err(
                "match".into(),
                "name at least one claim to match (a rule matching every token of the issuer is refused)".into(),
            ));
        }
        let tenant = TenantId::parse(tenant).map_err(|e| {
            err(
                "tenant".into(),
                format!("{tenant:?} is not a tenant id: {e}"),
            )
        })?;
        if roles.is_empty() {
            return Err(err("roles".into(), "list at least one role".into()));
        }
        let mut parsed = Vec::new();
        for (i, r) in roles.iter().enumerate() {
            match Role::parse(r) {
                Some(Role::Platform) => {
                    return Err(err(
                        format!("roles[{i}]"),
                        "platform cannot be granted by a claim rule (tenant roles only)".into(),
                    ));
                }
                Some(role) => parsed.push(role),
                None => {
                    return Err(err(
                        format!("roles[{i}]"),
                        format!(
                            "unknown role {r:?} (tenant roles: admin, publisher, reviewer, reader, client)"
                        ),
                    ));
                }
            }
        }
        Ok(ClaimRule {
            matches: list,
            tenant,
            roles: parsed,
        })
    }

    /// Whether every listed claim is a string matching its pattern.
    pub fn matches(&self, claims: &serde_json::Map<String, serde_json::Value>) -> bool {
        self.matches.iter().all(|(claim, pattern)| {
            claims
                .get(claim)
                .and_then(serde_json::Value::as_str)
                .is_some_and(|v| pattern.matches(v))
        })
    }

    /// The tenant a matching token acts in.
    pub fn tenant(&self) -> &TenantId {
        &self.tenant
    }

    /// The roles a matching token holds.
    pub fn roles(&self) -> &[Role] {
        &self.roles
    }
}

impl ClaimMapping {
    /// The tenant and roles for verified `claims`.
    fn apply(
        &self,
        claims: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<(Option<TenantId>, Vec<Role>), AuthError> {
        let invalid = |s: &str| AuthError::Invalid(s.to_owned());
        match self {
            ClaimMapping::Rules(rules) => rules
                .iter()
                .find(|r| r.matches(claims))
                .map(|r| (Some(r.tenant.clone()), r.roles.clone()))
                .ok_or_else(|| invalid("no claim rule of this issuer matches the token")),
            ClaimMapping::FromToken => {
                let tenant = match claims.get("tenant") {
                    None | Some(serde_json::Value::Null) => None,
                    Some(serde_json::Value::String(t)) => Some(
                        TenantId::parse(t)
                            .map_err(|_| invalid("claim tenant is not a valid tenant id"))?,
                    ),
                    Some(_) => return Err(invalid("claim tenant must be a string")),
                };
                let roles: Vec<Role> = match claims.get("roles") {
                    None | Some(serde_json::Value::Null) => Vec::new(),
                    Some(serde_json::Value::Array(items)) => {
                        let mut roles = Vec::new();
                        for item in items {
                            let name = item.as_str().ok_or_else(|| {
                                invalid("claim roles must be an array of strings")
                            })?;
                            // Unknown roles are ignored: other systems may share the token.
                            roles.extend(Role::parse(name));
                        }
                        roles
                    }
                    Some(_) => return Err(invalid("claim roles must be an array of strings")),
                };
                Ok((tenant, roles))
            }
        }
    }
}

struct JwksState {
    keys: HashMap<String, Arc<DecodingKey>>,
    last_fetch: Option<Instant>,
    fetches: u64,
}

struct Issuer {
    config: IssuerConfig,
    jwks: Mutex<JwksState>,
}

/// The claims, read after validation as raw values: the crate
/// deserialises them *before* it validates, so a typed field would turn
/// "missing `exp`" into an opaque parse error; and a claim mapping may look
/// at any claim.
type Claims = serde_json::Map<String, serde_json::Value>;

/// A verified token and whom it names.
struct Verified {
    token: Box<[u8]>,
    principal: Arc<Principal>,
}

/// Bytes the token cache may hold (tokens and their principals).
const TOKEN_CACHE_BYTES: u64 = 64 * 1024 * 1024;
/// What an entry weighs besides its token.
const ENTRY_WEIGHT: u64 = 256;

/// Verifies bearer tokens against the configured issuers.
pub struct Authenticator {
    issuers: HashMap<String, Issuer>,
    leeway: u64,
    /// Keyed hash of the token bytes → the verified token.
    cache: crate::hot::HotCache<Arc<Verified>>,
    hasher: crate::hot::KeyHasher,
    http: reqwest::Client,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Authenticator {
    /// Builds an authenticator. `leeway_secs` is clamped to 30 seconds.
    pub fn new(issuers: Vec<IssuerConfig>, leeway_secs: u64) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Self {
            issuers: issuers
                .into_iter()
                .map(|c| {
                    (
                        c.issuer.clone(),
                        Issuer {
                            config: c,
                            jwks: Mutex::new(JwksState {
                                keys: HashMap::new(),
                                last_fetch: None,
                                fetches: 0,
                            }),
                        },
                    )
                })
                .collect(),
            leeway: leeway_secs.min(MAX_LEEWAY_SECS),
            cache: crate::hot::HotCache::new(TOKEN_CACHE_BYTES, Duration::from_secs(300)),
            hasher: crate::hot::KeyHasher::default(),
            http,
        }
    }

    /// How many JWKS fetches an issuer has made (for tests and metrics).
    pub async fn jwks_fetches(&self, issuer: &str) -> u64 {
        match self.issuers.get(issuer) {
            Some(i) => i.jwks.lock().await.fetches,
            None => 0,
        }
    }

    /// Verifies the value of an `Authorization` header.
    pub async fn verify_header(
        &self,
        value: Option<&HeaderValue>,
    ) -> Result<Arc<Principal>, AuthError> {
        let Some(value) = value else {
            return Err(AuthError::Missing);
        };
        if value.len() > MAX_AUTHORIZATION_BYTES {
            return Err(AuthError::Invalid("authorization header too large".into()));
        }
        // Bytes first: a cached token is found without checking the header
        // character by character (a cached token was checked when cached,
        // and a hit compares equal to it).
        let token = match bearer::split_authorization(value.as_bytes()) {
            bearer::Credentials::Bearer(token) => token,
            bearer::Credentials::OtherScheme => {
                if value.to_str().is_err() {
                    return Err(AuthError::Invalid(
                        "authorization header is not ASCII".into(),
                    ));
                }
                return Err(AuthError::Missing);
            }
        };
        if let Some(hit) = self.cached(token) {
            return hit;
        }
        let token = std::str::from_utf8(token)
            .ok()
            .filter(|_| value.to_str().is_ok())
            .ok_or_else(|| AuthError::Invalid("authorization header is not ASCII".into()))?;
        self.verify_and_cache(token).await
    }

    /// The principal of an `Authorization` header whose bearer token was
    /// verified before and has not expired; `None` for anything else
    /// (absent from the cache, expired, another scheme, malformed), which
    /// [`Authenticator::verify_header`] then answers properly. For paths
    /// that answer without awaiting (the server's conditional-read fast
    /// path).
    pub fn cached_header(&self, value: &HeaderValue) -> Option<Arc<Principal>> {
        if value.len() > MAX_AUTHORIZATION_BYTES {
            return None;
        }
        let bearer::Credentials::Bearer(token) = bearer::split_authorization(value.as_bytes())
        else {
            return None;
        };
        // Read only: an expired entry is left for the full path to drop
        // and answer.
        let (_, hit) = self.lookup(token)?;
        self.unexpired(&hit).then(|| hit.principal.clone())
    }

    /// The cache entry of `token` (and its key): only an entry of this very
    /// token, never one that merely shares its keyed hash.
    fn lookup(&self, token: &[u8]) -> Option<(u64, Arc<Verified>)> {
        let key = self.hasher.hash_one(token);
        let hit = self.cache.get(key)?;
        (*hit.token == *token).then_some((key, hit))
    }

    /// Whether a cached token is still within its `exp` (with the leeway).
    fn unexpired(&self, hit: &Verified) -> bool {
        now_secs() <= hit.principal.expires_at + self.leeway
    }

    /// Verifies a compact JWT.
    pub async fn verify(&self, token: &str) -> Result<Arc<Principal>, AuthError> {
        if let Some(hit) = self.cached(token.as_bytes()) {
            return hit;
        }
        self.verify_and_cache(token).await
    }

    /// The cached answer for `token`, if it was verified before.
    fn cached(&self, token: &[u8]) -> Option<Result<Arc<Principal>, AuthError>> {
        // Another token with the same keyed hash is a miss: verify this one.
        let (key, hit) = self.lookup(token)?;
        if self.unexpired(&hit) {
            return Some(Ok(hit.principal.clone()));
        }
        self.cache.invalidate(key);
        Some(Err(AuthError::Invalid("token expired".into())))
    }

    async fn verify_and_cache(&self, token: &str) -> Result<Arc<Principal>, AuthError> {
        let principal = Arc::new(self.verify_uncached(token).await?);
        self.cache.insert(
            self.hasher.hash_one(token.as_bytes()),
            Arc::new(Verified {
                token: token.as_bytes().into(),
                principal: principal.clone(),
            }),
            token.len() as u64 + ENTRY_WEIGHT,
        );
        Ok(principal)
    }

    async fn verify_uncached(&self, token: &str) -> Result<Principal, AuthError> {
        let invalid = |s: &str| AuthError::Invalid(s.to_owned());
        let [_, payload, _] = bearer::jwt_segments(token).map_err(invalid)?;
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| invalid("malformed token header or unsupported algorithm"))?;
        let payload = bearer::payload_claims(payload).map_err(invalid)?;
        let iss = bearer::issuer(&payload).map_err(invalid)?;
        let issuer = self
            .issuers
            .get(iss)
            .ok_or_else(|| invalid("untrusted issuer"))?;
        let cfg = &issuer.config;
        if !cfg.algorithms.contains(&header.alg) {
            return Err(invalid("algorithm not allowed for this issuer"));
        }
        let jwks_key;
        let key: &DecodingKey = match &cfg.keys {
            KeySource::Static(k) => k,
            KeySource::Jwks { url, min_refetch } => {
                let kid = header
                    .kid
                    .as_deref()
                    .ok_or_else(|| invalid("token header has no kid"))?;
                jwks_key = self.jwks_key(issuer, url, *min_refetch, kid).await?;
                &jwks_key
            }
        };
        let mut validation = Validation::new(header.alg);
        validation.algorithms = vec![header.alg];
        validation.set_issuer(&[&cfg.issuer]);
        validation.set_audience(&[&cfg.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = true;
        validation.leeway = self.leeway;
        let data = jsonwebtoken::decode::<Claims>(token, key, &validation).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind as K;
            AuthError::Invalid(match e.kind() {
                K::InvalidSignature => "bad signature".into(),
                K::ExpiredSignature => "token expired".into(),
                K::ImmatureSignature => "token not valid yet (nbf)".into(),
                K::InvalidIssuer => "wrong issuer".into(),
                K::InvalidAudience => "wrong audience".into(),
                K::MissingRequiredClaim(c) => format!("missing required claim {c}"),
                K::InvalidClaimFormat(c) => format!("claim {c} has the wrong type"),
                K::InvalidAlgorithm => "algorithm does not match the key".into(),
                _ => "token rejected".into(),
            })
        })?;
        let claims = data.claims;
        let sub = claims
            .get("sub")
            .and_then(serde_json::Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| invalid("claim sub must be a non-empty string"))?;
        let exp = claims
            .get("exp")
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| invalid("claim exp has the wrong type"))?;
        let (tenant, roles) = cfg.mapping.apply(&claims)?;
        Ok(Principal::new(sub, &cfg.issuer, tenant, &roles, exp))
    }

    async fn jwks_key(
        &self,
        issuer: &Issuer,
        url: &str,
        min_refetch: Duration,
        kid: &str,
    ) -> Result<DecodingKey, AuthError> {
        let mut state = issuer.jwks.lock().await;
        if let Some(k) = state.keys.get(kid) {
            return Ok((**k).clone());
        }
        let due = state.last_fetch.is_none_or(|t| t.elapsed() >= min_refetch);
        if !due {
            return Err(AuthError::Invalid("unknown key id".into()));
        }
        state.last_fetch = Some(Instant::now());
        state.fetches += 1;
        match self.fetch_jwks(url).await {
            Ok(keys) => state.keys = keys,
            Err(e) => {
                tracing::warn!(jwks.url = url, error = %e, "JWKS fetch failed");
                return Err(AuthError::Invalid("signing keys unavailable".into()));
            }
        }
        state
            .keys
            .get(kid)
            .map(|k| (**k).clone())
            .ok_or_else(|| AuthError::Invalid("unknown key id".into()))
    }

    async fn fetch_jwks(&self, url: &str) -> Result<HashMap<String, Arc<DecodingKey>>, String> {
        let resp = self.http.get(url).send().await.map_err(|e| e.to_string())?;
        if !resp.status().is_success() {
            return Err(format!("status {}", resp.status()));
        }
        let bytes = resp.bytes().await.map_err(|e| e.to_string())?;
        if bytes.len() > 256 * 1024 {
            return Err("JWKS document too large".into());
        }
        let set: JwkSet = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
        let mut keys = HashMap::new();
        for jwk in &set.keys {
            let Some(kid) = jwk.common.key_id.clone() else {
                continue;
            };
            if let Ok(k) = DecodingKey::from_jwk(jwk) {
                keys.insert(kid, Arc::new(k));
            }
        }
        Ok(keys)
    }
}

/// The authenticated principal of a request (401 when absent or invalid).
///
/// Reads only the `Authorization` header: tokens in query strings are ignored.
#[derive(Debug, Clone)]
pub struct Auth(pub Arc<Principal>);

impl<S: Send + Sync> FromRequestParts<S> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        if let Some(p) = parts.extensions.get::<Auth>() {
            return Ok(p.clone());
        }
        let Some(authn) = parts.extensions.get::<Arc<Authenticator>>() else {
            tracing::error!("no Authenticator installed in request extensions");
            return Err(ApiError::internal());
        };
        let principal = authn
            .verify_header(parts.headers.get(header::AUTHORIZATION))
            .await?;
        let auth = Auth(principal);
        parts.extensions.insert(auth.clone());
        Ok(auth)
    }
}

#[cfg(test)]
mod tests {
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::{Value, json};

    use super::*;

    const SECRET: &[u8] = b"a-shared-secret-of-at-least-32-bytes!!";
    const ISS: &str = "https://token.actions.example";

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    fn rule(matches: &[(&str, &str)], tenant: &str, roles: &[&str]) -> ClaimRule {
        ClaimRule::new(matches.iter().copied(), tenant, &strings(roles)).unwrap()
    }

    fn rule_err(matches: &[(&str, &str)], tenant: &str, roles: &[&str]) -> String {
        ClaimRule::new(matches.iter().copied(), tenant, &strings(roles))
            .unwrap_err()
            .to_string()
    }

    fn authn(mapping: ClaimMapping) -> Authenticator {
        Authenticator::new(
            vec![IssuerConfig {
                issuer: ISS.into(),
                audience: "pinfold".into(),
                algorithms: vec![Algorithm::HS256],
                keys: KeySource::Static(DecodingKey::from_secret(SECRET)),
                mapping,
            }],
            0,
        )
    }

    /// A GitHub-Actions-shaped token, with `extra` claims merged in.
    fn token(extra: Value) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let mut claims = json!({
            "iss": ISS, "aud": "pinfold", "exp": now + 300, "iat": now,
            "sub": "repo:acme/infra:ref:refs/heads/main",
            "repository": "acme/infra", "repository_owner": "acme",
            "repository_id": "123456",
            "job_workflow_ref": "acme/infra/.github/workflows/pinfold.yml@refs/heads/main",
            "ref": "refs/heads/main",
        });
        for (k, v) in extra.as_object().unwrap() {
            claims[k] = v.clone();
        }
        jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(SECRET),
        )
        .unwrap()
    }

    #[test]
    fn patterns_are_exact_or_a_trailing_star_prefix() {
        assert_eq!(
            ClaimPattern::parse("acme").unwrap(),
            ClaimPattern::Exact("acme".into())
        );
        let p =
            ClaimPattern::parse("acme/infra/.github/workflows/pinfold.yml@refs/tags/*").unwrap();
        assert!(p.matches("acme/infra/.github/workflows/pinfold.yml@refs/tags/v1.2.0"));
        assert!(!p.matches("acme/infra/.github/workflows/pinfold.yml@refs/heads/main"));
        assert!(ClaimPattern::parse("acme").unwrap().matches("acme"));
        assert!(!ClaimPattern::parse("acme").unwrap().matches("acme-evil"));
        assert!(!ClaimPattern::parse("acme").unwrap().matches("Acme"));
        for bad in ["", "*", "a*b", "**", "*acme"] {
            assert!(ClaimPattern::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn rules_name_the_offending_field() {
        let m = [("repository_owner", "acme")];
        assert!(
            rule_err(&[], "acme", &["publisher"]).starts_with("match: name at least one claim")
        );
        assert!(rule_err(&[("", "x")], "acme", &["publisher"]).starts_with("match: "));
        assert!(
            rule_err(&[("ref", "refs/*/main")], "acme", &["publisher"]).starts_with("match.ref: ")
        );
        assert!(rule_err(&m, "Not A Tenant", &["publisher"]).starts_with("tenant: "));
        assert!(rule_err(&m, "acme", &[]).starts_with("roles: list at least one"));
        let e = rule_err(&m, "acme", &["reader", "platform"]);
        assert!(e.starts_with("roles[1]: platform cannot"), "{e}");
        for claim in [
            "sub",
            "repository",
            "repository_owner",
            "repository_id",
            "repository_owner_id",
            "actor_id",
        ] {
            let e = rule_err(&[(claim, "acme*")], "acme", &["publisher"]);
            assert!(
                e.starts_with(&format!("match.{claim}: \"acme*\": {claim} names who")),
                "{e}"
            );
            // The exact value is fine.
            rule(&[(claim, "acme")], "acme", &["publisher"]);
        }
        // Refs and workflow refs keep their prefix patterns.
        rule(&[("ref", "refs/tags/v*")], "acme", &["publisher"]);
        let e = rule_err(&m, "acme", &["wizard"]);
        assert!(e.starts_with("roles[0]: unknown role \"wizard\""), "{e}");
        let r = rule(&m, "acme", &["publisher", "reader"]);
        assert_eq!(r.tenant().as_str(), "acme");
        assert_eq!(r.roles(), &[Role::Publisher, Role::Reader]);
    }

    #[test]
    fn every_claim_of_a_rule_must_be_a_matching_string() {
        let r = rule(
            &[("repository_owner", "acme"), ("ref", "refs/heads/main")],
            "acme",
            &["publisher"],
        );
        let claims = |v: Value| v.as_object().unwrap().clone();
        assert!(r.matches(&claims(
            json!({"repository_owner": "acme", "ref": "refs/heads/main"})
        )));
        assert!(!r.matches(&claims(
            json!({"repository_owner": "acme", "ref": "refs/heads/dev"})
        )));
        assert!(!r.matches(&claims(json!({"repository_owner": "acme"}))));
        // Claims must be strings: a number or an array never matches.
        let id = rule(&[("repository_id", "123")], "acme", &["reader"]);
        assert!(!id.matches(&claims(json!({"repository_id": 123}))));
        assert!(!id.matches(&claims(json!({"repository_id": ["123"]}))));
        assert!(id.matches(&claims(json!({"repository_id": "123"}))));
    }

    #[tokio::test]
    async fn the_first_matching_rule_decides_tenant_and_roles() {
        let a = authn(ClaimMapping::Rules(vec![
            rule(
                &[
                    ("repository_owner", "acme"),
                    (
                        "job_workflow_ref",
                        "acme/infra/.github/workflows/pinfold.yml@refs/heads/main",
                    ),
                ],
                "acme",
                &["publisher"],
            ),
            rule(&[("repository_owner", "acme")], "acme-ro", &["reader"]),
        ]));
        let p = a.verify(&token(json!({}))).await.unwrap();
        assert_eq!(p.tenant.as_ref().unwrap().as_str(), "acme");
        assert_eq!(p.roles(), vec![Role::Publisher]);
        assert_eq!(p.sub, "repo:acme/infra:ref:refs/heads/main");
        // Another workflow of the same owner falls through to the second rule.
        let other = token(
            json!({"job_workflow_ref": "acme/infra/.github/workflows/other.yml@refs/heads/main"}),
        );
        let p = a.verify(&other).await.unwrap();
        assert_eq!(p.tenant.as_ref().unwrap().as_str(), "acme-ro");
        assert_eq!(p.roles(), vec![Role::Reader]);
        // Another owner matches nothing: refused.
        let stranger = token(json!({"repository_owner": "evil", "repository": "evil/infra"}));
        assert_eq!(
            a.verify(&stranger).await.unwrap_err(),
            AuthError::Invalid("no claim rule of this issuer matches the token".into())
        );
    }

    #[tokio::test]
    async fn an_issuer_with_rules_ignores_the_tokens_own_tenant_and_roles() {
        let a = authn(ClaimMapping::Rules(vec![rule(
            &[("repository_owner", "acme")],
            "acme",
            &["reader"],
        )]));
        let claims_itself = token(json!({"tenant": "other", "roles": ["platform", "admin"]}));
        let p = a.verify(&claims_itself).await.unwrap();
        assert_eq!(p.tenant.as_ref().unwrap().as_str(), "acme");
        assert_eq!(p.roles(), vec![Role::Reader]);
        assert!(!p.has(Role::Platform) && !p.has(Role::Admin));
        // Without rules the same issuer would have taken them from the token.
        let p = authn(ClaimMapping::FromToken)
            .verify(&claims_itself)
            .await
            .unwrap();
        assert_eq!(p.tenant.as_ref().unwrap().as_str(), "other");
        assert_eq!(p.roles(), vec![Role::Platform, Role::Admin]);
    }
}
