//! Console sessions, kept on the server: the model, the store contract the
//! database crates implement, and the secrets a browser holds.
//!
//! A browser holds a session cookie `‹tenant›.‹secret›` (32 random bytes,
//! base64url). The database keeps only the secret's SHA-256 with the
//! principal of the verified token the session was opened with (subject,
//! issuer, roles) and its expiry, never later than the token's own: so any
//! replica serves the session, sign-out ends it everywhere at once, and a
//! database read never yields a usable cookie. The CSRF token of a session
//! is derived from its secret (SHA-256 under a fixed label), so it differs
//! per session and needs no storage.

use std::sync::Arc;

use async_trait::async_trait;
use aws_lc_rs::rand::{SecureRandom as _, SystemRandom};
use base64::Engine as _;
use pinfold_core::ids::{TenantId, Timestamp};
use pinfold_http::auth::{Principal, Role};
use sha2::{Digest as _, Sha256};

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "pinfold_console";
/// The pre-session cookie's name (the sign-in forms' double-submitted
/// token, and a sign-in in progress with an identity provider).
pub const PRE_COOKIE: &str = "pinfold_console_pre";

/// A stored console session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSession {
    /// The SHA-256 of the session secret (hex).
    pub id_hash: String,
    /// The token's subject.
    pub subject: String,
    /// The token's issuer.
    pub issuer: String,
    /// The token's roles (claim spelling, comma-separated).
    pub roles: String,
    /// When it was opened.
    pub created_at: Timestamp,
    /// When it ends (never after the token's expiry).
    pub expires_at: Timestamp,
}

impl ConsoleSession {
    /// The principal the session acts as: exactly the roles of the token it
    /// was opened with, in the tenant of the session.
    pub fn principal(&self, tenant: &TenantId) -> Arc<Principal> {
        let roles: Vec<Role> = self.roles.split(',').filter_map(Role::parse).collect();
        Arc::new(Principal::new(
            &self.subject,
            &self.issuer,
            Some(tenant.clone()),
            &roles,
            u64::try_from(self.expires_at.seconds()).unwrap_or(0),
        ))
    }

    /// Its roles, as the shell shows them.
    pub fn roles_text(&self) -> String {
        self.roles.replace(',', ", ")
    }
}

/// Why a console store call failed.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleStoreError {
    /// The database cannot be reached.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

/// Where console sessions live (implemented by both database crates).
/// Every method takes the tenant first.
#[async_trait]
pub trait ConsoleStore: Send + Sync + 'static {
    /// Stores a new session.
    async fn insert_console_session(
        &self,
        tenant: &TenantId,
        session: &ConsoleSession,
    ) -> Result<(), ConsoleStoreError>;

    /// The session with this secret hash, unless it has expired by `now`.
    async fn console_session(
        &self,
        tenant: &TenantId,
        id_hash: &str,
        now: Timestamp,
    ) -> Result<Option<ConsoleSession>, ConsoleStoreError>;

    /// Ends a session (sign-out); `true` when there was one.
    async fn end_console_session(
        &self,
        tenant: &TenantId,
        id_hash: &str,
    ) -> Result<bool, ConsoleStoreError>;

    /// Deletes the tenant's sessions that expired before `now`; returns how
    /// many.
    async fn purge_console_sessions(
        &self,
        tenant: &TenantId,
        now: Timestamp,
    ) -> Result<u64, ConsoleStoreError>;

    /// Deletes at most `limit` sessions that expired before `before`, in
    /// every tenant (the server's background purge, so that an expired
    /// session's row goes even when nobody of its tenant signs in again;
    /// on PostgreSQL under the purge binding, which row-level security lets
    /// read and delete expired rows only). Returns how many were deleted.
    async fn purge_expired_console_sessions(
        &self,
        before: Timestamp,
        limit: u32,
    ) -> Result<u64, ConsoleStoreError>;
}

/// `n` random bytes as base64url.
pub fn random_token(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system random source works");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A new session secret.
pub fn new_secret() -> String {
    random_token(32)
}

/// The stored hash of a session secret.
pub fn hash_secret(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// The CSRF token of the session with this secret.
pub fn csrf_token(secret: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"pinfold-console-csrf\0");
    h.update(secret.as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(h.finalize())
}

/// Whether two tokens are equal, in time independent of where they differ.
pub fn same_token(a: &str, b: &str) -> bool {
    aws_lc_rs::constant_time::verify_slices_are_equal(a.as_bytes(), b.as_bytes()).is_ok()
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie<'a>(header: Option<&'a str>, name: &str) -> Option<&'a str> {
    header?.split(';').find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == name).then_some(v)
    })
}

/// The session cookie's value: `‹tenant›.‹secret›`.
pub fn session_cookie_value(tenant: &TenantId, secret: &str) -> String {
    format!("{}.{secret}", tenant.as_str())
}

/// Splits a session cookie's value into its tenant and secret.
pub fn parse_session_cookie(value: &str) -> Option<(&str, &str)> {
    let (tenant, secret) = value.split_once('.')?;
    (!secret.is_empty() && secret.len() <= 64).then_some((tenant, secret))
}

/// A `Set-Cookie` value: `HttpOnly`, `SameSite=Lax`, path `/console`,
/// `Secure` unless `secure` is off (loopback), for `max_age` seconds (0
/// deletes it).
pub fn set_cookie(name: &str, value: &str, max_age: i64, secure: bool) -> String {
    format!(
        "{name}={value}; Path=/console; HttpOnly; SameSite=Lax; Max-Age={}{}",
        max_age.max(0),
        if secure { "; Secure" } else { "" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csrf_tokens_differ_per_session_and_compare_exactly() {
        let (a, b) = (new_secret(), new_secret());
        assert_ne!(csrf_token(&a), csrf_token(&b));
        assert!(same_token(&csrf_token(&a), &csrf_token(&a)));
        assert!(!same_token(&csrf_token(&a), &csrf_token(&b)));
        assert!(!same_token(&csrf_token(&a), ""));
        assert_ne!(hash_secret(&a), a);
    }

    #[test]
    fn cookies_are_read_by_exact_name() {
        let h = Some("a=1; pinfold_console_pre=x; pinfold_console=acme.s3cret");
        assert_eq!(cookie(h, SESSION_COOKIE), Some("acme.s3cret"));
        assert_eq!(cookie(h, PRE_COOKIE), Some("x"));
        assert_eq!(
            parse_session_cookie("acme.s3cret"),
            Some(("acme", "s3cret"))
        );
        assert_eq!(parse_session_cookie("acme."), None);
        assert!(set_cookie("n", "v", 60, true).ends_with("; Secure"));
        assert!(!set_cookie("n", "v", 60, false).contains("Secure"));
    }

    #[test]
    fn a_session_holds_exactly_its_tokens_roles_in_its_tenant() {
        let s = ConsoleSession {
            id_hash: "h".into(),
            subject: "alice".into(),
            issuer: "https://idp".into(),
            roles: "reviewer,platform,bogus".into(),
            created_at: Timestamp::from_millis(0),
            expires_at: Timestamp::from_millis(60_000),
        };
        let tenant = TenantId::parse("acme").unwrap();
        let p = s.principal(&tenant);
        assert_eq!(p.roles(), [Role::Platform, Role::Reviewer]);
        assert_eq!(p.tenant.as_ref(), Some(&tenant));
        assert_eq!(p.expires_at, 60);
    }
}
