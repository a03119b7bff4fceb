//! The RFC 8707 resource a new grant names: from the body, the plan's
//! server through the provider profile's `resources`, or the approved
//! card's one `streamable-http` remote; otherwise `422 resource_required`.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use pinfold_http::problem::ApiError;

use super::body::NewGrantBody;
use crate::model::{ProviderRow, field};
use crate::state::ScopeState;

/// Whether `uri` can be an RFC 8707 resource: an absolute URI without a
/// fragment (RFC 8707 §2), here an `http(s)` URL as an MCP server's is,
/// written only with the characters RFC 3986 allows (so not a template
/// such as `https://{tenant}.example/mcp`, which a URL parser accepts).
fn is_resource_uri(uri: &str) -> bool {
    let b = uri.as_bytes();
    let rfc3986 = b.iter().enumerate().all(|(i, c)| match c {
        b'%' => b
            .get(i + 1..i + 3)
            .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)),
        c => c.is_ascii_alphanumeric() || b"-._~:/?#[]@!$&'()*+,;=".contains(c),
    });
    rfc3986
        && url::Url::parse(uri).is_ok_and(|u| {
            matches!(u.scheme(), "http" | "https") && u.has_host() && u.fragment().is_none()
        })
}

/// The URI `resources` lists under the server name `server` (server names
/// compare without regard to ASCII case, as the registry's do).
fn listed_for<'a>(resources: &'a BTreeMap<String, String>, server: &str) -> Option<&'a String> {
    resources.get(server).or_else(|| {
        resources
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(server))
            .map(|(_, uri)| uri)
    })
}

/// `422 resource_required`, pointing at `/resource`, with what to add.
fn resource_required(why: String) -> ApiError {
    let message = format!(
        "{why}; add `resource` to the body: the MCP server's URL (or the server name the \
         provider profile lists it under in `resources`)"
    );
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "resource_required",
        "Resource required",
    )
    .detail(format!(
        "{message}. The MCP authorization specification requires the RFC 8707 `resource` in \
         both the authorization and the token request, so a grant that cannot name it is not \
         started"
    ))
    .with_errors(vec![field("/resource", "resource_required", message)])
}

/// The RFC 8707 resource of a new grant, which the MCP authorization
/// specification requires in both the authorization request and the token
/// request. In order:
///
/// 1. the body's `resource`: a URI the provider profile's `resources`
///    lists, or the server name it lists one under (else `422
///    unknown_resource`);
/// 2. the plan's `server`, through the profile's `resources`;
/// 3. the one `streamable-http` remote URL of the plan's version's card in
///    the registry (`latest` when the plan names no version), when that
///    version is approved (or deprecated) and its card lists exactly one
///    such URL;
///
/// otherwise `422 resource_required`, saying what to add.
pub(super) async fn grant_resource(
    st: &ScopeState,
    tenant: &pinfold_core::ids::TenantId,
    row: &ProviderRow,
    body: &NewGrantBody,
) -> Result<String, ApiError> {
    let resources = &row.profile.resources;
    if let Some(r) = &body.resource {
        if let Some(uri) = listed_for(resources, r) {
            return Ok(uri.clone());
        }
        if resources.values().any(|u| u == r) {
            return Ok(r.clone());
        }
        return Err(ApiError::validation(vec![field(
            "/resource",
            "unknown_resource",
            "not a resource (or server name) the provider's `resources` lists",
        )]));
    }
    let Some(plan) = &body.plan else {
        return Err(resource_required(
            "these scopes name no MCP server, so the resource the token is for is unknown".into(),
        ));
    };
    let Some(server) = plan.server.as_deref() else {
        return Err(resource_required(
            "the plan names no `server`, so the resource the token is for is unknown".into(),
        ));
    };
    if let Some(uri) = listed_for(resources, server) {
        return Ok(uri.clone());
    }
    let version = plan.version.as_deref().unwrap_or("latest");
    let unlisted = format!(
        "provider profile {:?} does not list {server} in its `resources`",
        row.name
    );
    let card = match st.signatures.remotes(tenant, server, version).await {
        Ok(card) => card,
        Err(e) if e.status == StatusCode::NOT_FOUND => {
            return Err(resource_required(format!(
                "{unlisted}, and the registry has no trusted card of {server} {version} to read \
                 a remote URL from"
            )));
        }
        Err(e) => return Err(e),
    };
    let what = format!("{} {}", card.server, card.version);
    let why = match card.streamable_http.as_slice() {
        _ if !card.trusted => format!("{what} is not approved, so its card does not count"),
        [] => format!("the card of {what} lists no streamable-http remote"),
        [one] if is_resource_uri(one) => return Ok(one.clone()),
        [one] => format!(
            "the streamable-http remote of {what}, {one:?}, is not an absolute URL without a \
             fragment (a template?)"
        ),
        many => format!(
            "the card of {what} lists {} streamable-http remotes, so which one is meant is \
             unknown",
            many.len()
        ),
    };
    Err(resource_required(format!("{unlisted}, and {why}")))
}
