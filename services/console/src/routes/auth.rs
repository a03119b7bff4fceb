//! Signing in and out, and the session every other console route runs
//! under: the session cookie to a stored session, the session to a
//! [`TenantScope`] by the API's own admission rule, and the CSRF check of
//! every state-changing form.

use std::sync::Arc;

use axum::Form;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use pinfold_core::ids::{TenantId, Timestamp};
use pinfold_http::TenantScope;
use pinfold_http::auth::{Principal, Role};
use pinfold_http::ratelimit::{Charge, Limited};
use serde::Deserialize;

use super::respond::{html, not_found, refusal, see_other};
use crate::render::layout::{Nav, Shell, tenant_href};
use crate::render::signin::{SignIn, signin_page};
use crate::session::{
    ConsoleSession, PRE_COOKIE, SESSION_COOKIE, cookie, csrf_token, hash_secret, new_secret,
    parse_session_cookie, random_token, same_token, session_cookie_value, set_cookie,
};
use crate::state::ConsoleState;

/// Milliseconds since the epoch, now.
pub(crate) fn now() -> Timestamp {
    Timestamp::from_millis(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0),
    )
}

/// A request of a signed-in user, admitted to the tenant of its path.
pub struct Signed {
    /// The admission, as the API's handlers hold it.
    pub scope: TenantScope,
    /// The stored session.
    pub session: ConsoleSession,
    /// The session's CSRF token.
    pub csrf: String,
    /// The roles, as the shell shows them.
    pub roles: String,
}

impl Signed {
    /// The shell of a page of this session.
    pub fn shell<'a>(&'a self, title: &'a str, nav: Nav) -> Shell<'a> {
        Shell {
            title,
            tenant: self.scope.tenant().as_str(),
            user: Some((self.session.subject.as_str(), self.roles.as_str())),
            csrf: Some(self.csrf.as_str()),
            nav,
        }
    }
}

fn cookie_header(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::COOKIE).and_then(|v| v.to_str().ok())
}

/// The rate-limit charge the server's edge attached to this request (the
/// `console` class of its route), taken by [`signed_in`] once the session
/// is admitted to its tenant, as `TenantScope` does for the API: a request
/// without a session, or of another tenant, charges nothing.
pub struct Charged(Option<Charge>);

impl<S: Send + Sync> FromRequestParts<S> for Charged {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Charged(parts.extensions.remove::<Charge>()))
    }
}

/// The page of a request over its rate limit: `429` with `Retry-After`;
/// nothing was done.
fn limited_page(shell: &Shell<'_>, limited: Limited) -> Response {
    let secs = limited.retry_after_secs();
    let mut resp = refusal(
        shell,
        StatusCode::TOO_MANY_REQUESTS,
        "Too many requests",
        &format!(
            "The console's {} rate limit is reached; nothing was done. Try again in {secs} s.",
            limited.scope.name()
        ),
    );
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    resp
}

/// The signed-in session of this request for the tenant `raw`: a GET
/// without one is sent to the sign-in page, a POST refused; a session of
/// another tenant answers 404, as the API does for another tenant's token.
/// An admitted request is charged to the rate limiter (`charge`); over its
/// limit it answers `429` and the handler does nothing.
pub async fn signed_in(
    st: &ConsoleState,
    headers: &HeaderMap,
    charge: Charged,
    raw: &str,
    post: bool,
) -> Result<Signed, Response> {
    let Ok(tenant) = TenantId::parse(raw) else {
        return Err(not_found(raw));
    };
    let signin = format!("{}/sign-in", tenant_href(tenant.as_str()));
    let absent = || {
        if post {
            let shell = Shell {
                title: "Not signed in",
                tenant: tenant.as_str(),
                user: None,
                csrf: None,
                nav: Nav::Other,
            };
            refusal(
                &shell,
                StatusCode::FORBIDDEN,
                "Not signed in",
                "This form needs a signed-in session; nothing was changed.",
            )
        } else {
            see_other(&signin, &[])
        }
    };
    let Some((cookie_tenant, secret)) =
        cookie(cookie_header(headers), SESSION_COOKIE).and_then(parse_session_cookie)
    else {
        return Err(absent());
    };
    if cookie_tenant != tenant.as_str() {
        return Err(not_found(tenant.as_str()));
    }
    let session = match st
        .sessions
        .console_session(&tenant, &hash_secret(secret), now())
        .await
    {
        Ok(Some(s)) => s,
        Ok(None) => return Err(absent()),
        Err(e) => {
            tracing::warn!(error = %e, "console: session lookup failed");
            let shell = Shell {
                title: "Unavailable",
                tenant: tenant.as_str(),
                user: None,
                csrf: None,
                nav: Nav::Other,
            };
            return Err(refusal(
                &shell,
                StatusCode::SERVICE_UNAVAILABLE,
                "Unavailable",
                "The database is not answering; try again in a moment.",
            ));
        }
    };
    let scope = TenantScope::admit(session.principal(&tenant), tenant.as_str())
        .map_err(|_| not_found(tenant.as_str()))?;
    let roles = session.roles_text();
    let signed = Signed {
        scope,
        csrf: csrf_token(secret),
        session,
        roles,
    };
    if let Charged(Some(charge)) = charge
        && let Err(limited) = charge.limiter.check(
            signed.scope.tenant(),
            signed.scope.principal(),
            charge.class,
        )
    {
        return Err(limited_page(
            &signed.shell("Too many requests", Nav::Other),
            limited,
        ));
    }
    Ok(signed)
}

/// The refusal of a form whose CSRF token is not this session's (403:
/// the handler changes nothing); `None` when the token is the session's.
pub fn csrf_refusal(signed: &Signed, sent: Option<&str>) -> Option<Response> {
    match sent {
        Some(t) if same_token(t, &signed.csrf) => None,
        _ => Some(refusal(
            &signed.shell("Refused", Nav::Other),
            StatusCode::FORBIDDEN,
            "Refused",
            "The form's CSRF token is missing or belongs to another session; nothing was changed. Reload the page and try again.",
        )),
    }
}

/// `?signed_out`, `?error` of the sign-in page.
#[derive(Debug, Deserialize, Default)]
pub struct SignInQuery {
    /// Set after a sign-out.
    #[serde(default)]
    pub signed_out: Option<String>,
}

/// The sign-in page of a tenant; sets the pre-session token its forms
/// double-submit.
pub async fn sign_in_page(
    State(st): State<ConsoleState>,
    Path(tenant): Path<String>,
    Query(q): Query<SignInQuery>,
) -> Response {
    if TenantId::parse(&tenant).is_err() {
        return not_found(&tenant);
    }
    sign_in_answer(
        &st,
        &tenant,
        StatusCode::OK,
        q.signed_out.is_some().then_some("You have signed out."),
    )
    .await
}

/// The sign-in page with a fresh pre-session token and `message`; with an
/// identity provider, its CSP lets the form lead on to the provider.
pub(crate) async fn sign_in_answer(
    st: &ConsoleState,
    tenant: &str,
    status: StatusCode,
    message: Option<&str>,
) -> Response {
    let token = random_token(24);
    let dev = st
        .settings
        .dev
        .as_ref()
        .map(|d| d.identities(tenant))
        .unwrap_or_default();
    let page = signin_page(
        tenant,
        &SignIn {
            provider: st.settings.oidc.as_ref().map(|o| o.name.as_str()),
            dev,
            token: &token,
            error: message,
        },
    );
    let mut resp = html(status, page);
    if let Ok(v) = set_cookie(PRE_COOKIE, &token, 1800, st.settings.secure_cookies).parse() {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
    if let Some(oidc) = &st.settings.oidc {
        let origin = oidc.authorization_origin().await;
        if let Ok(v) = crate::assets::content_security_policy_to(&origin).parse() {
            resp.headers_mut()
                .insert(header::CONTENT_SECURITY_POLICY, v);
        }
    }
    resp
}

/// Whether the form's pre-session token is the one its cookie holds (the
/// first part of the cookie: a sign-in in progress appends its own).
pub(crate) fn pre_token_ok(headers: &HeaderMap, sent: Option<&str>) -> bool {
    let held =
        cookie(cookie_header(headers), PRE_COOKIE).map(|v| v.split('.').next().unwrap_or(""));
    matches!((held, sent), (Some(h), Some(s)) if !h.is_empty() && same_token(h, s))
}

/// The dev one-click sign-in form.
#[derive(Debug, Deserialize)]
pub struct DevForm {
    /// The pre-session token.
    #[serde(default)]
    pub token: Option<String>,
    /// The identity.
    #[serde(rename = "as", default)]
    pub identity: Option<String>,
}

/// Signs in as a dev identity (dev mode on loopback only): a token signed
/// by the dev key, verified like any other.
pub async fn dev_sign_in(
    State(st): State<ConsoleState>,
    Path(tenant): Path<String>,
    headers: HeaderMap,
    Form(form): Form<DevForm>,
) -> Response {
    if TenantId::parse(&tenant).is_err() {
        return not_found(&tenant);
    }
    if !pre_token_ok(&headers, form.token.as_deref()) {
        return sign_in_answer(
            &st,
            &tenant,
            StatusCode::FORBIDDEN,
            Some("The sign-in form expired or came from elsewhere; try again."),
        )
        .await;
    }
    let token = st
        .settings
        .dev
        .as_ref()
        .and_then(|d| d.token(&tenant, form.identity.as_deref().unwrap_or("")));
    let Some(token) = token else {
        return sign_in_answer(
            &st,
            &tenant,
            StatusCode::FORBIDDEN,
            Some("No such dev identity here."),
        )
        .await;
    };
    match st.authn.verify(&token).await {
        Ok(principal) => open_session(&st, &tenant, principal).await,
        Err(_) => {
            sign_in_answer(
                &st,
                &tenant,
                StatusCode::FORBIDDEN,
                Some("The dev token did not verify."),
            )
            .await
        }
    }
}

/// Opens a session for `principal` (verified from a token) in `tenant`,
/// when the token belongs there and holds a tenant role; its expiry is the
/// token's at the latest. Answers the redirect to the queue with the
/// session cookie, or the sign-in page saying why not.
pub(crate) async fn open_session(
    st: &ConsoleState,
    tenant: &str,
    principal: Arc<Principal>,
) -> Response {
    let Ok(scope) = TenantScope::admit(principal.clone(), tenant) else {
        return sign_in_answer(
            st,
            tenant,
            StatusCode::FORBIDDEN,
            Some("Your token does not belong to this tenant."),
        )
        .await;
    };
    if scope.require_member().is_err() {
        return sign_in_answer(
            st,
            tenant,
            StatusCode::FORBIDDEN,
            Some("Your token holds no role in this tenant."),
        )
        .await;
    }
    let tenant_id = scope.tenant().clone();
    let at = now();
    let ttl = i64::try_from(st.settings.session_ttl.as_millis()).unwrap_or(i64::MAX);
    let token_end = i64::try_from(principal.expires_at)
        .unwrap_or(i64::MAX / 1000)
        .saturating_mul(1000);
    let expires = at.millis().saturating_add(ttl).min(token_end);
    if expires <= at.millis() {
        return sign_in_answer(
            st,
            tenant,
            StatusCode::FORBIDDEN,
            Some("Your token has expired."),
        )
        .await;
    }
    let roles: Vec<&str> = principal.roles().into_iter().map(Role::as_str).collect();
    let secret = new_secret();
    let session = ConsoleSession {
        id_hash: hash_secret(&secret),
        subject: principal.sub.clone(),
        issuer: principal.issuer.clone(),
        roles: roles.join(","),
        created_at: at,
        expires_at: Timestamp::from_millis(expires),
    };
    if let Err(e) = st.sessions.purge_console_sessions(&tenant_id, at).await {
        tracing::warn!(error = %e, "console: purging expired sessions failed");
    }
    if let Err(e) = st
        .sessions
        .insert_console_session(&tenant_id, &session)
        .await
    {
        tracing::warn!(error = %e, "console: storing a session failed");
        return sign_in_answer(
            st,
            tenant,
            StatusCode::SERVICE_UNAVAILABLE,
            Some("The database is not answering; try again in a moment."),
        )
        .await;
    }
    let secure = st.settings.secure_cookies;
    let max_age = (expires - at.millis()) / 1000;
    see_other(
        &format!("{}/queue", tenant_href(tenant)),
        &[
            set_cookie(
                SESSION_COOKIE,
                &session_cookie_value(&tenant_id, &secret),
                max_age,
                secure,
            ),
            set_cookie(PRE_COOKIE, "", 0, secure),
        ],
    )
}

/// A form carrying only the CSRF token.
#[derive(Debug, Deserialize)]
pub struct CsrfForm {
    /// The session's CSRF token.
    #[serde(default)]
    pub csrf: Option<String>,
}

/// Signs out: the session ends in the database (on every replica at
/// once) and its cookie is cleared.
pub async fn sign_out(
    State(st): State<ConsoleState>,
    Path(tenant): Path<String>,
    charge: Charged,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Response {
    let signed = match signed_in(&st, &headers, charge, &tenant, true).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    if let Some(r) = csrf_refusal(&signed, form.csrf.as_deref()) {
        return r;
    }
    if let Err(e) = st
        .sessions
        .end_console_session(signed.scope.tenant(), &signed.session.id_hash)
        .await
    {
        tracing::warn!(error = %e, "console: ending a session failed");
        return refusal(
            &signed.shell("Unavailable", Nav::Other),
            StatusCode::SERVICE_UNAVAILABLE,
            "Unavailable",
            "The database is not answering; you are still signed in. Try again in a moment.",
        );
    }
    see_other(
        &format!("{}/sign-in?signed_out=1", tenant_href(&tenant)),
        &[set_cookie(
            SESSION_COOKIE,
            "",
            0,
            st.settings.secure_cookies,
        )],
    )
}
