//! How the console answers: an HTML page, a redirect, a refusal as a page
//! (never problem+json: the server's edge leaves a console answer as it
//! is), and the headers every console answer carries.

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pinfold_http::problem::{ApiError, NotAProblem};

use crate::assets::{CONTENT_SECURITY_POLICY, SECURITY_HEADERS};
use crate::render::layout::{Nav, Shell};
use crate::render::signin::message_page;

/// An HTML page with `status`.
pub fn html(status: StatusCode, body: String) -> Response {
    let mut resp = (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        body,
    )
        .into_response();
    if !status.is_success() {
        resp.extensions_mut().insert(NotAProblem);
    }
    resp
}

/// `303 See Other` to `location`, setting `cookies`.
pub fn see_other(location: &str, cookies: &[String]) -> Response {
    let mut resp = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(location) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    for c in cookies {
        if let Ok(v) = HeaderValue::from_str(c) {
            resp.headers_mut().append(header::SET_COOKIE, v);
        }
    }
    resp
}

/// A refusal or failure as a page of the tenant (the shell without a
/// signed-in user unless `shell` has one).
pub fn refusal(shell: &Shell<'_>, status: StatusCode, title: &str, message: &str) -> Response {
    html(status, message_page(shell, title, message, None))
}

/// The page of a service error: its status, its title and detail.
pub fn service_error(shell: &Shell<'_>, e: &ApiError) -> Response {
    if e.status.is_server_error() {
        tracing::warn!(code = e.code, "console: service error");
    }
    let message = e.detail.clone().unwrap_or_else(|| e.title.to_owned());
    html(e.status, message_page(shell, e.title, &message, None))
}

/// 404 as the API answers for another tenant's or a missing resource.
pub fn not_found(tenant: &str) -> Response {
    let shell = Shell {
        title: "Not found",
        tenant,
        user: None,
        csrf: None,
        nav: Nav::Other,
    };
    refusal(
        &shell,
        StatusCode::NOT_FOUND,
        "Not found",
        "There is nothing here.",
    )
}

/// Adds the CSP and the other security headers to every console answer.
pub async fn security_headers(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    // A page that set its own (only ever narrower than this plus one
    // origin its form leads on to) keeps it.
    if !h.contains_key(header::CONTENT_SECURITY_POLICY) {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        );
    }
    for (name, value) in SECURITY_HEADERS {
        let name = HeaderName::from_static(name);
        if name == header::CACHE_CONTROL && h.contains_key(&name) {
            continue;
        }
        h.insert(name, HeaderValue::from_static(value));
    }
    resp
}
