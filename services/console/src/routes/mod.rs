//! The console's routes, under `/console`, behind a layer that adds the
//! CSP and the other security headers to every answer:
//!
//! - `respond`: HTML answers, redirects, refusals as pages, the headers.
//! - `auth`: sign-in (the tenant's page, the dev one-click), sign-out, the
//!   session every other route runs under, the CSRF check.
//! - `oidc`: sign-in with the identity provider (authorization code with
//!   PKCE), its callback.
//! - `pages`: the queue, a version, the audit log, the ledger.
//! - `decide`: approve or reject, deprecate or revoke.

pub mod auth;
pub mod decide;
pub mod oidc;
pub mod pages;
pub mod respond;

use axum::Router;
use axum::extract::Query;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::assets::{STYLESHEET, STYLESHEET_PATH};
use crate::render::signin::tenant_choice_page;
use crate::state::ConsoleState;

/// `?tenant=` of the console's front page.
#[derive(Debug, Deserialize, Default)]
pub struct FrontQuery {
    /// The tenant to go to.
    #[serde(default)]
    pub tenant: Option<String>,
}

async fn front(Query(q): Query<FrontQuery>) -> Response {
    match q.tenant.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        Some(t) => respond::see_other(
            &format!("{}/sign-in", crate::render::layout::tenant_href(t)),
            &[],
        ),
        None => respond::html(StatusCode::OK, tenant_choice_page()),
    }
}

async fn stylesheet() -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/css; charset=utf-8"),
            ),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=3600"),
            ),
        ],
        STYLESHEET,
    )
        .into_response()
}

/// The console's router.
pub fn router(state: ConsoleState) -> Router {
    let t = "/console/t/{tenant}";
    let v = format!("{t}/servers/{{server}}/versions/{{version}}");
    Router::new()
        .route("/console", get(front))
        .route(STYLESHEET_PATH, get(stylesheet))
        .route("/console/callback", get(oidc::callback))
        .route(t, get(pages::tenant_root))
        .route(&format!("{t}/sign-in"), get(auth::sign_in_page))
        .route(&format!("{t}/sign-in/dev"), post(auth::dev_sign_in))
        .route(&format!("{t}/sign-in/oidc"), post(oidc::start))
        .route(&format!("{t}/sign-out"), post(auth::sign_out))
        .route(&format!("{t}/queue"), get(pages::queue))
        .route(&format!("{t}/audit"), get(pages::audit))
        .route(&format!("{t}/ledger"), get(pages::ledger))
        .route(&v, get(pages::version))
        .route(&format!("{v}/review"), post(decide::review))
        .route(&format!("{v}/status"), post(decide::status))
        .layer(axum::middleware::map_response(respond::security_headers))
        .with_state(state)
}
