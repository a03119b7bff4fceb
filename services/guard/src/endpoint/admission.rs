//! Who may reach the endpoint: a browser's `Origin`, the bearer token's
//! tenant and role, and the `401` that tells a client where to sign in.

#![allow(clippy::result_large_err)]

use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pinfold_core::ids::TenantId;
use pinfold_http::auth::{Auth, Principal, Role};
use pinfold_http::problem::ApiError;

use super::rpc::transport_error;

use super::context::EndpointState;

/// `401` with the challenge naming this endpoint's RFC 9728 metadata.
pub(super) fn unauthorized(
    st: &EndpointState,
    headers: &HeaderMap,
    tenant: &str,
    server: &str,
) -> Response {
    let base =
        match &st.0.config.public_url {
            Some(u) => u.trim_end_matches('/').to_owned(),
            None => format!(
                "http://{}",
                headers
                    .get(header::HOST)
                    .and_then(|h| h.to_str().ok())
                    .filter(|h| h.bytes().all(|b| b.is_ascii_alphanumeric()
                        || matches!(b, b'.' | b'-' | b':' | b'[' | b']')))
                    .unwrap_or("localhost")
            ),
        };
    let url = format!("{base}/.well-known/oauth-protected-resource/t/{tenant}/mcp/{server}");
    let mut err = ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "Unauthorized")
        .detail("a bearer token of the tenant is required");
    if let Ok(v) = HeaderValue::from_str(&format!(
        "Bearer error=\"invalid_token\", resource_metadata=\"{url}\""
    )) {
        err = err.header(header::WWW_AUTHENTICATE, v);
    }
    err.into_response()
}

/// Whether a browser's `Origin` may reach the endpoint. Without one the
/// caller is not a browser and nothing is decided here. With one, it must
/// be `public_url`'s origin when Pinfold has one; without, a loopback origin
/// naming the host the request was sent to. A page that rebinds its own
/// name to Pinfold's address sends its own origin, so it is refused: the
/// transport asks servers to check this (DNS rebinding).
pub(super) fn origin_allowed(st: &EndpointState, headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let Some(origin) = origin
        .to_str()
        .ok()
        .and_then(|o| reqwest::Url::parse(o).ok())
    else {
        return false;
    };
    if let Some(public) =
        st.0.config
            .public_url
            .as_deref()
            .and_then(|u| reqwest::Url::parse(u).ok())
    {
        return origin.origin() == public.origin();
    }
    let loopback = match origin.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    let authority = match (origin.host_str(), origin.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_owned(),
        _ => return false,
    };
    loopback
        && headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .is_some_and(|h| h.eq_ignore_ascii_case(&authority))
}

/// The caller, admitted to `tenant` with `client` or `admin`, from an
/// origin that may reach the endpoint.
pub(super) fn admit(
    st: &EndpointState,
    headers: &HeaderMap,
    auth: Result<Auth, ApiError>,
    tenant: &str,
    server: &str,
) -> Result<(TenantId, Arc<Principal>), Response> {
    if !origin_allowed(st, headers) {
        return Err(transport_error(
            StatusCode::FORBIDDEN,
            -32600,
            "Forbidden: the request's Origin is not this server's",
        ));
    }
    let principal = match auth {
        Ok(Auth(p)) => p,
        Err(e) => {
            let resp = e.into_response();
            if resp.status() == StatusCode::UNAUTHORIZED {
                return Err(unauthorized(st, headers, tenant, server));
            }
            return Err(resp);
        }
    };
    let not_found = || pinfold_http::tenant::tenant_not_found().into_response();
    let tenant = TenantId::parse(tenant).map_err(|_| not_found())?;
    if principal.tenant.as_ref() != Some(&tenant) {
        return Err(not_found());
    }
    if !(principal.has(Role::Client) || principal.has(Role::Admin)) {
        return Err(ApiError::forbidden_role(&["client", "admin"]).into_response());
    }
    Ok((tenant, principal))
}
