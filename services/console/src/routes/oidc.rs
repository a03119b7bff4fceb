//! Sign-in with the identity provider: authorization code with PKCE S256.
//!
//! `start` (a form double-submitting the pre-session token) makes a state,
//! a PKCE verifier and a nonce, keeps them in the pre-session cookie (the
//! verifier sealed under the tenant's key for this state, so the cookie
//! alone never yields it) and sends the browser to the provider. The
//! provider sends it back to `/console/callback` with a code; the state
//! must be the cookie's (compared in constant time), the code is exchanged
//! with the verifier, and the access token is verified by the same
//! authenticator the API uses: its issuer, audience, tenant and roles are
//! the API's to judge. A session opens only for the tenant the sign-in
//! started in, and only with the roles that token holds.

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use pinfold_core::ids::TenantId;
use serde::Deserialize;

use super::auth::{open_session, pre_token_ok, sign_in_answer};
use super::respond::{not_found, see_other};
use crate::session::{PRE_COOKIE, cookie, random_token, same_token, set_cookie};
use crate::state::ConsoleState;

/// The sealing context of a sign-in's PKCE verifier.
fn context(state: &str) -> String {
    format!("console-signin:{state}")
}

/// The sign-in form.
#[derive(Debug, Deserialize)]
pub struct StartForm {
    /// The pre-session token.
    #[serde(default)]
    pub token: Option<String>,
}

/// Starts a sign-in with the identity provider.
pub async fn start(
    State(st): State<ConsoleState>,
    Path(tenant): Path<String>,
    headers: HeaderMap,
    Form(form): Form<StartForm>,
) -> Response {
    let Ok(tenant_id) = TenantId::parse(&tenant) else {
        return not_found(&tenant);
    };
    let Some(oidc) = st.settings.oidc.clone() else {
        return not_found(&tenant);
    };
    if !pre_token_ok(&headers, form.token.as_deref()) {
        return sign_in_answer(
            &st,
            &tenant,
            StatusCode::FORBIDDEN,
            Some("The sign-in form expired or came from elsewhere; try again."),
        )
        .await;
    }
    let (state, verifier, nonce) = (random_token(24), random_token(32), random_token(24));
    let sealed =
        match st
            .registry
            .keyring
            .seal_bound(&tenant_id, &context(&state), verifier.as_bytes())
        {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "console: sealing a PKCE verifier failed");
                return sign_in_answer(
                    &st,
                    &tenant,
                    StatusCode::INTERNAL_SERVER_ERROR,
                    Some("Sign-in is unavailable."),
                )
                .await;
            }
        };
    match oidc.authorization_url(&state, &verifier, &nonce).await {
        Ok(url) => {
            let token = form.token.unwrap_or_default();
            let value = format!("{token}.{tenant}.{state}.{sealed}");
            see_other(
                &url,
                &[set_cookie(
                    PRE_COOKIE,
                    &value,
                    600,
                    st.settings.secure_cookies,
                )],
            )
        }
        Err(e) => {
            tracing::warn!(error = %e, "console: sign-in with the identity provider failed");
            sign_in_answer(
                &st,
                &tenant,
                StatusCode::BAD_GATEWAY,
                Some("The identity provider is unavailable; try again in a moment."),
            )
            .await
        }
    }
}

/// The provider's redirect back.
#[derive(Debug, Deserialize, Default)]
pub struct CallbackQuery {
    /// The authorization code.
    #[serde(default)]
    pub code: Option<String>,
    /// The state.
    #[serde(default)]
    pub state: Option<String>,
    /// The provider's error, if it refused.
    #[serde(default)]
    pub error: Option<String>,
}

/// Finishes a sign-in: the state checked, the code exchanged, the token
/// verified, the session opened.
pub async fn callback(
    State(st): State<ConsoleState>,
    Query(q): Query<CallbackQuery>,
    headers: HeaderMap,
) -> Response {
    let held = cookie(
        headers.get(header::COOKIE).and_then(|v| v.to_str().ok()),
        PRE_COOKIE,
    );
    let parts: Vec<&str> = held.map(|v| v.splitn(4, '.').collect()).unwrap_or_default();
    let [_, tenant, state, sealed] = parts[..] else {
        return not_found("");
    };
    let Ok(tenant_id) = TenantId::parse(tenant) else {
        return not_found("");
    };
    let Some(oidc) = st.settings.oidc.clone() else {
        return not_found(tenant);
    };
    if !q.state.as_deref().is_some_and(|s| same_token(s, state)) {
        return sign_in_answer(
            &st,
            tenant,
            StatusCode::FORBIDDEN,
            Some("The sign-in did not come back as it left; try again."),
        )
        .await;
    }
    if let Some(e) = &q.error {
        tracing::info!(error = %e, "console: the identity provider refused a sign-in");
        return sign_in_answer(
            &st,
            tenant,
            StatusCode::FORBIDDEN,
            Some("The identity provider did not sign you in."),
        )
        .await;
    }
    let Some(code) = q.code.as_deref() else {
        return sign_in_answer(
            &st,
            tenant,
            StatusCode::FORBIDDEN,
            Some("The identity provider sent no code."),
        )
        .await;
    };
    let verifier = match st
        .registry
        .keyring
        .open_bound(&tenant_id, &context(state), sealed)
    {
        Ok(v) => String::from_utf8(v).unwrap_or_default(),
        Err(_) => {
            return sign_in_answer(
                &st,
                tenant,
                StatusCode::FORBIDDEN,
                Some("The sign-in did not come back as it left; try again."),
            )
            .await;
        }
    };
    let token = match oidc.exchange(code, &verifier).await {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(error = %e, "console: the code exchange failed");
            return sign_in_answer(
                &st,
                tenant,
                StatusCode::FORBIDDEN,
                Some("The identity provider did not complete the sign-in."),
            )
            .await;
        }
    };
    match st.authn.verify(&token).await {
        Ok(principal) if principal.issuer == oidc.issuer => {
            open_session(&st, tenant, principal).await
        }
        Ok(_) => {
            sign_in_answer(
                &st,
                tenant,
                StatusCode::FORBIDDEN,
                Some("The token came from another issuer."),
            )
            .await
        }
        Err(e) => {
            tracing::info!(error = %e, "console: the provider's access token did not verify");
            sign_in_answer(&st, tenant, StatusCode::FORBIDDEN, Some("Pinfold does not accept the token your identity provider issued (see docs/CONSOLE.md).")).await
        }
    }
}
