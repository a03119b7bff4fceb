//! Provider profiles: read and write (role `admin`), with revisions.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pinfold_http::auth::Role;
use pinfold_http::problem::{ApiError, FieldError, ProblemBody};
use pinfold_http::{StrictJson, TenantScope};
use serde::Deserialize;
use serde_json::json;
use utoipa::IntoParams;

use crate::error::{provider_not_found, store_error};
use crate::model::{
    EndpointSource, Profile, ProviderBody, ProviderView, check_scopes, field, is_provider_name,
    is_scope_token, ptr,
};
use crate::oauth::{DiscoveryError, Outbound, discover, provider_url};
use crate::state::{ScopeState, now, secret_context};
use crate::store::{AuditNote, Expect, ProviderWrite};

/// Path of a provider.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ProviderPath {
    /// Tenant id.
    pub tenant: String,
    /// Provider name: `[a-z0-9][a-z0-9_-]{0,62}`.
    pub provider: String,
}

const MAX_URL: usize = 2048;
const MAX_LIST: usize = 100;
const MAX_HIERARCHY: usize = 2000;

fn etag(rev: i64) -> HeaderValue {
    HeaderValue::from_str(&format!("\"r{rev}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("\"r0\""))
}

/// Read a provider profile (role `admin`). Never returns the client
/// secret: `client_secret_set` says whether one is stored.
#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/providers/{provider}",
    tag = "scope",
    operation_id = "get_provider",
    params(ProviderPath),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The profile", body = ProviderView, headers(("ETag" = String, description = "Revision"))),
        (status = 401, description = "Missing or invalid token", body = ProblemBody, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such tenant or provider", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn get_provider(
    State(st): State<ScopeState>,
    scope: TenantScope,
    Path(p): Path<ProviderPath>,
) -> Result<Response, ApiError> {
    scope.require_any(&[Role::Admin])?;
    if !is_provider_name(&p.provider) {
        return Err(provider_not_found());
    }
    let row = st
        .store
        .provider(scope.tenant(), &p.provider)
        .await
        .map_err(store_error)?
        .ok_or_else(provider_not_found)?;
    Ok((
        [
            (header::ETAG, etag(row.revision)),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("private, no-cache"),
            ),
        ],
        Json(ProviderView::from(&row)),
    )
        .into_response())
}

/// The write's precondition from `If-Match` / `If-None-Match`.
fn expectation(headers: &HeaderMap) -> Result<Expect, ApiError> {
    let bad = |what: &str| {
        ApiError::new(
            StatusCode::PRECONDITION_FAILED,
            "precondition_failed",
            "Precondition failed",
        )
        .detail(what.to_owned())
    };
    let if_match = headers.get(header::IF_MATCH);
    let if_none = headers.get(header::IF_NONE_MATCH);
    match (if_match, if_none) {
        (Some(_), Some(_)) => Err(bad(
            "send If-Match (replace) or If-None-Match: * (create), not both",
        )),
        (None, Some(v)) => match v.to_str().map(str::trim) {
            Ok("*") => Ok(Expect::Absent),
            _ => Err(bad("If-None-Match on a provider write must be *")),
        },
        (Some(v), None) => v
            .to_str()
            .ok()
            .map(str::trim)
            .and_then(|s| s.strip_prefix("\"r"))
            .and_then(|r| r.strip_suffix('"'))
            .and_then(|n| n.parse::<i64>().ok())
            .map(Expect::Revision)
            .ok_or_else(|| bad("If-Match must be the provider's ETag, for example \"r3\"")),
        (None, None) => Ok(Expect::CreateOnly),
    }
}

fn check_url(pointer: &str, raw: &str, errors: &mut Vec<FieldError>) -> bool {
    if raw.len() > MAX_URL {
        errors.push(field(
            pointer,
            "too_long",
            format!("at most {MAX_URL} bytes"),
        ));
        return false;
    }
    match url::Url::parse(raw) {
        Err(e) => {
            errors.push(field(
                pointer,
                "invalid_url",
                format!("not an absolute URI: {e}"),
            ));
            false
        }
        Ok(u) if u.fragment().is_some() => {
            errors.push(field(pointer, "invalid_url", "must not have a fragment"));
            false
        }
        Ok(u) if u.cannot_be_a_base() && u.scheme() != "urn" => {
            errors.push(field(pointer, "invalid_url", "not a hierarchical URI"));
            false
        }
        Ok(_) => true,
    }
}

/// The official registry's server-name rule.
fn valid_server_name(s: &str) -> bool {
    let Some((ns, name)) = s.split_once('/') else {
        return false;
    };
    (3..=200).contains(&s.len())
        && !ns.is_empty()
        && !name.is_empty()
        && ns
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'))
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn printable(s: &str) -> bool {
    s.bytes().all(|b| (0x20..0x7f).contains(&b))
}

/// Checks a profile body; every problem is reported. A cycle in the
/// hierarchy is reported with its path (also as the problem's `cycle`).
pub fn validate(out: &Outbound, body: &ProviderBody) -> Result<(), ApiError> {
    let mut errors = Vec::new();
    if let Some(iss) = &body.issuer
        && check_url("/issuer", iss, &mut errors)
    {
        match provider_url(out, iss) {
            Err(e) => errors.push(field("/issuer", "url_refused", e)),
            Ok(u) if u.query().is_some() => errors.push(field(
                "/issuer",
                "invalid_url",
                "an issuer has no query (RFC 8414 §2)",
            )),
            Ok(_) => {}
        }
    }
    for (name, v) in [
        ("/authorization_endpoint", &body.authorization_endpoint),
        ("/token_endpoint", &body.token_endpoint),
    ] {
        if let Some(v) = v
            && check_url(name, v, &mut errors)
            && let Err(e) = provider_url(out, v)
        {
            errors.push(field(name, "url_refused", e));
        }
    }
    match (&body.authorization_endpoint, &body.token_endpoint) {
        (Some(_), None) => errors.push(field(
            "/token_endpoint",
            "missing",
            "give both endpoints, or neither (to discover them from the issuer)",
        )),
        (None, Some(_)) => errors.push(field(
            "/authorization_endpoint",
            "missing",
            "give both endpoints, or neither (to discover them from the issuer)",
        )),
        (None, None) if body.client_id.is_some() && body.issuer.is_none() => errors.push(field(
            "/issuer",
            "missing",
            "a client needs endpoints: give them, or an issuer to discover them from",
        )),
        _ => {}
    }
    if let Some(id) = &body.client_id
        && (id.is_empty() || id.len() > 256 || !printable(id))
    {
        errors.push(field(
            "/client_id",
            "invalid_client_id",
            "1 to 256 printable ASCII characters",
        ));
    }
    if let Some(s) = &body.client_secret {
        // The value is a secret: never echo it.
        if s.is_empty() || s.len() > 1024 || !printable(s) {
            errors.push(field(
                "/client_secret",
                "invalid_client_secret",
                "1 to 1,024 printable ASCII characters",
            ));
        }
        if body.client_id.is_none() {
            errors.push(field(
                "/client_id",
                "missing",
                "a client secret needs a client id",
            ));
        }
    }
    if body.redirect_uris.len() > MAX_LIST {
        errors.push(field(
            "/redirect_uris",
            "too_many",
            format!("at most {MAX_LIST}"),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, r) in body.redirect_uris.iter().enumerate() {
        let p = format!("/redirect_uris/{i}");
        if check_url(&p, r, &mut errors) && !seen.insert(r) {
            errors.push(field(p, "duplicate", "listed twice"));
        }
    }
    if body.default_scopes.len() > MAX_LIST {
        errors.push(field(
            "/default_scopes",
            "too_many",
            format!("at most {MAX_LIST}"),
        ));
    }
    check_scopes("/default_scopes", &body.default_scopes, &mut errors);
    let edges: usize = body.hierarchy.values().map(Vec::len).sum();
    if body.hierarchy.len() > MAX_HIERARCHY || edges > MAX_HIERARCHY * 4 {
        errors.push(field(
            "/hierarchy",
            "too_large",
            format!(
                "at most {MAX_HIERARCHY} scopes and {} edges",
                MAX_HIERARCHY * 4
            ),
        ));
    }
    for (scope, covered) in &body.hierarchy {
        let p = ptr("/hierarchy", scope);
        if !is_scope_token(scope) {
            errors.push(field(&p, "invalid_scope", "not an RFC 6749 scope token"));
        }
        check_scopes(&p, covered, &mut errors);
    }
    if body.resources.len() > MAX_LIST {
        errors.push(field(
            "/resources",
            "too_many",
            format!("at most {MAX_LIST}"),
        ));
    }
    for (server, uri) in &body.resources {
        let p = ptr("/resources", server);
        if !valid_server_name(server) {
            errors.push(field(
                &p,
                "invalid_server_name",
                "server names are reverse-DNS with one '/' (io.github.acme/files)",
            ));
        }
        check_url(&p, uri, &mut errors);
    }
    let mut err = None;
    if errors.is_empty()
        && let Err(e) = crate::model::hierarchy_spec(body.preset, &body.hierarchy).build()
    {
        match e {
            pinfold_core::scope::HierarchyError::Cycle { cycle } => {
                let via = if body.preset.is_some() {
                    " (with the preset's entries)"
                } else {
                    ""
                };
                errors.push(field(
                    ptr("/hierarchy", &cycle[0]),
                    "hierarchy_cycle",
                    format!("the hierarchy has a cycle{via}: {}", cycle.join(" → ")),
                ));
                err = Some(cycle);
            }
            other => errors.push(field("/hierarchy", "invalid_hierarchy", other.to_string())),
        }
    }
    if errors.is_empty() {
        return Ok(());
    }
    let mut e = ApiError::validation(errors);
    if let Some(cycle) = err {
        e = e.with("cycle", json!(cycle));
    }
    Err(e)
}

/// Create or replace a provider profile (role `admin`).
///
/// Create with `If-None-Match: *` (or no precondition, for a new one);
/// replace with `If-Match` set to the `ETag` you read: a concurrent change
/// makes the write fail with `412`, and replacing without `If-Match` is
/// `428`. When only `issuer` is given, the endpoints are discovered from
/// RFC 8414 metadata, then OpenID Connect discovery; metadata that does
/// not list `S256` in `code_challenge_methods_supported` is refused. The
/// client secret is sealed at rest and never returned; omitted, the stored
/// one is kept.
#[utoipa::path(
    put,
    path = "/v1/tenants/{tenant}/providers/{provider}",
    tag = "scope",
    operation_id = "put_provider",
    params(
        ProviderPath,
        ("If-Match" = Option<String>, Header, description = "The ETag you read (replace)"),
        ("If-None-Match" = Option<String>, Header, description = "`*`: create only"),
    ),
    request_body = ProviderBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Replaced", body = ProviderView, headers(("ETag" = String, description = "Revision"))),
        (status = 201, description = "Created", body = ProviderView, headers(("ETag" = String, description = "Revision"))),
        (status = 400, description = "Malformed JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "Missing or invalid token", body = ProblemBody, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such tenant", body = ProblemBody, content_type = "application/problem+json"),
        (status = 412, description = "Changed since read, or exists (If-None-Match)", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Invalid profile, or discovery failed", body = ProblemBody, content_type = "application/problem+json"),
        (status = 428, description = "Replacing without If-Match", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn put_provider(
    State(st): State<ScopeState>,
    scope: TenantScope,
    Path(p): Path<ProviderPath>,
    headers: HeaderMap,
    StrictJson(body): StrictJson<ProviderBody>,
) -> Result<Response, ApiError> {
    scope.require_any(&[Role::Admin])?;
    if !is_provider_name(&p.provider) {
        return Err(ApiError::validation(vec![field(
            "",
            "invalid_provider_name",
            "provider names are [a-z0-9][a-z0-9_-]{0,62} (the path segment)",
        )]));
    }
    let expect = expectation(&headers)?;
    let tenant = scope.tenant();
    let out = st.outbound(tenant).await?;
    validate(&out, &body)?;
    let mut profile = Profile {
        issuer: body.issuer.clone(),
        authorization_endpoint: body.authorization_endpoint.clone(),
        token_endpoint: body.token_endpoint.clone(),
        endpoints_from: body
            .authorization_endpoint
            .as_ref()
            .map(|_| EndpointSource::Configured),
        client_id: body.client_id.clone(),
        redirect_uris: body.redirect_uris.clone(),
        default_scopes: body.default_scopes.clone(),
        preset: body.preset,
        hierarchy: body.hierarchy.clone(),
        resources: body.resources.clone(),
    };
    if profile.authorization_endpoint.is_none()
        && let Some(issuer) = &body.issuer
    {
        let found = discover(&out, issuer).await.map_err(|e| {
            let code = match e {
                DiscoveryError::NoS256(_) => "pkce_s256_unsupported",
                DiscoveryError::NotFound(_) => "discovery_failed",
                DiscoveryError::Invalid(_) => "invalid_metadata",
            };
            ApiError::validation(vec![field("/issuer", code, e.to_string())])
        })?;
        profile.authorization_endpoint = Some(found.authorization_endpoint);
        profile.token_endpoint = Some(found.token_endpoint);
        profile.endpoints_from = Some(found.source);
    }
    let sealed = match &body.client_secret {
        Some(secret) => Some(
            st.sealer
                .seal(tenant, &secret_context(&p.provider), secret.as_bytes())
                .map_err(|e| {
                    tracing::error!(error = %e, "sealing a client secret failed");
                    ApiError::internal()
                })?,
        ),
        None => None,
    };
    let at = now();
    let audit = AuditNote::new(
        "provider.updated",
        scope.actor(),
        at,
        json!({
            "provider": p.provider,
            "client_secret": if body.client_secret.is_some() { "set" } else { "unchanged" },
            "endpoints_from": profile.endpoints_from,
            "preset": profile.preset,
        }),
    );
    let write = ProviderWrite {
        profile: &profile,
        client_secret_sealed: sealed.as_deref(),
        at,
        by: scope.actor(),
    };
    let (row, created) = st
        .store
        .put_provider(tenant, &p.provider, &write, expect, &audit)
        .await
        .map_err(store_error)?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let location = HeaderValue::from_str(&format!("/v1/tenants/{tenant}/providers/{}", p.provider))
        .unwrap_or_else(|_| HeaderValue::from_static("/"));
    Ok((
        status,
        [
            (header::ETAG, etag(row.revision)),
            (header::LOCATION, location),
        ],
        Json(ProviderView::from(&row)),
    )
        .into_response())
}
