//! `/v1/tenants/{tenant}/servers/{server}/guard`: put a server behind the
//! guard (create or replace its route), read the route, delete it.
//!
//! The upstream is checked as a resolve session's is (the URL pattern the
//! schema publishes, header names, the tenant's egress policy), its headers
//! sealed with the server's keyring for the route's server and never
//! returned; a write appends its audit event in the same transaction.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pinfold_core::audit::NewAuditEvent;
use pinfold_core::contain::Mode;
use pinfold_core::guard::CallsPolicy;
use pinfold_core::ids::{TenantId, Timestamp};
use pinfold_core::names::Version;
use pinfold_egress::EgressError;
use pinfold_http::auth::Role;
use pinfold_http::problem::{ApiError, FieldError, ProblemBody};
use pinfold_http::upstream::{check_headers, check_url, headers_schema, url_schema};
use pinfold_http::{StrictJson, TenantScope};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::json;
use utoipa::openapi::schema::{Object, ObjectBuilder, Type};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::model::{GuardRoute, VersionPin, headers_context};
use crate::state::{GuardState, PinnedServer};
use crate::store::StoreError;

/// The guard's routes, with their OpenAPI description.
pub fn router() -> OpenApiRouter<GuardState> {
    OpenApiRouter::new().routes(routes!(
        get_guard_route,
        put_guard_route,
        delete_guard_route
    ))
}

/// Path of a server's guard route.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct GuardPath {
    /// Tenant id.
    pub tenant: String,
    /// Server name, URL-encoded (`io.github.acme%2Fnotes`).
    pub server: String,
}

/// A member that may be absent but, when given, is never `null`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// The upstream a route forwards to.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RouteUpstreamBody {
    /// Its Streamable HTTP endpoint. Omitted: the one `streamable-http`
    /// remote of the approved card the version pin selects (a card with
    /// none, or with several, is `422 upstream_url_required`).
    #[serde(default, deserialize_with = "present")]
    #[schema(schema_with = url_schema)]
    pub url: Option<String>,
    /// Headers sent with every upstream request.
    #[serde(default)]
    #[schema(schema_with = headers_schema)]
    pub headers: BTreeMap<String, String>,
}

/// An enforcement mode of a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RouteMode {
    /// Anything outside the signature is refused.
    Strict,
    /// Served but flagged.
    Permissive,
    /// Informational only.
    Advisory,
}

impl From<RouteMode> for Mode {
    fn from(m: RouteMode) -> Mode {
        match m {
            RouteMode::Strict => Mode::Strict,
            RouteMode::Permissive => Mode::Permissive,
            RouteMode::Advisory => Mode::Advisory,
        }
    }
}

impl From<Mode> for RouteMode {
    fn from(m: Mode) -> RouteMode {
        match m {
            Mode::Strict => RouteMode::Strict,
            Mode::Permissive => RouteMode::Permissive,
            Mode::Advisory => RouteMode::Advisory,
        }
    }
}

/// Which calls a route lets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RouteCalls {
    /// Every call the signature allows.
    All,
    /// Calls whose annotations are not destructive.
    NonDestructive,
    /// Calls whose annotations are read-only.
    ReadOnly,
}

impl From<RouteCalls> for CallsPolicy {
    fn from(c: RouteCalls) -> CallsPolicy {
        match c {
            RouteCalls::All => CallsPolicy::All,
            RouteCalls::NonDestructive => CallsPolicy::NonDestructive,
            RouteCalls::ReadOnly => CallsPolicy::ReadOnly,
        }
    }
}

impl From<CallsPolicy> for RouteCalls {
    fn from(c: CallsPolicy) -> RouteCalls {
        match c {
            CallsPolicy::All => RouteCalls::All,
            CallsPolicy::NonDestructive => RouteCalls::NonDestructive,
            CallsPolicy::ReadOnly => RouteCalls::ReadOnly,
        }
    }
}

/// `latest` or an exact version, as a JSON Schema `pattern`.
const VERSION_PIN_PATTERN: &str = concat!(
    r"^(?:latest|(?:0|[1-9][0-9]{0,18})\.(?:0|[1-9][0-9]{0,18})\.(?:0|[1-9][0-9]{0,18})",
    r"(?:-(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*)?)$"
);

/// The schema of `version`: `latest` or what [`Version::parse`] accepts.
fn version_pin_schema() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(VERSION_PIN_PATTERN))
        .max_length(Some(255))
        .description(Some(
            "Which approved version binds the route: `latest` (the default: the highest \
             approved version, followed as versions are approved or revoked) or an exact \
             semantic version.",
        ))
        .examples(["latest"])
        .build()
}

/// Body of `PUT .../guard`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"upstream": {"url": "https://notes.example.com/mcp", "headers": {"Authorization": "Bearer upstream-token"}}, "version": "latest", "mode": "strict", "calls": "read_only"}))]
pub struct PutRouteBody {
    /// The upstream MCP server.
    pub upstream: RouteUpstreamBody,
    /// Which approved version binds the route: `latest` (the default: the
    /// highest approved version, followed as versions are approved or
    /// revoked) or an exact version.
    #[serde(default, deserialize_with = "present")]
    #[schema(schema_with = version_pin_schema)]
    pub version: Option<String>,
    /// The enforcement mode; omitted, the route follows the tenant policy
    /// (its per-server override, else its mode).
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false)]
    pub mode: Option<RouteMode>,
    /// Which calls go upstream at all (default `all`).
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false)]
    pub calls: Option<RouteCalls>,
}

/// A route's upstream as it is shown: header names, never values.
#[derive(Debug, Serialize, ToSchema)]
pub struct RouteUpstreamView {
    /// The upstream endpoint; `null` when the route uses the approved card's
    /// one `streamable-http` remote.
    pub url: Option<String>,
    /// The names of the headers sent upstream (their values are sealed and
    /// never returned).
    pub header_names: Vec<String>,
}

/// A guard route.
#[derive(Debug, Serialize, ToSchema)]
pub struct GuardRouteView {
    /// The server (canonical name).
    pub server: String,
    /// The upstream.
    pub upstream: RouteUpstreamView,
    /// `latest` or the exact version that binds the route.
    pub version: String,
    /// The enforcement mode; `null`: the tenant policy's.
    pub mode: Option<RouteMode>,
    /// Which calls go upstream.
    pub calls: RouteCalls,
    /// Bumped by every write; the `ETag` is `"r<revision>"`.
    pub revision: i64,
    /// When the route was created.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
    /// When it was last written.
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: Timestamp,
    /// Who last wrote it (token `sub`).
    pub updated_by: String,
}

impl From<&GuardRoute> for GuardRouteView {
    fn from(r: &GuardRoute) -> Self {
        GuardRouteView {
            server: r.server.clone(),
            upstream: RouteUpstreamView {
                url: r.upstream_url.clone(),
                header_names: r.header_names.clone(),
            },
            version: r.version.as_str().to_owned(),
            mode: r.mode.map(RouteMode::from),
            calls: r.calls.into(),
            revision: r.revision,
            created_at: r.created_at,
            updated_at: r.updated_at,
            updated_by: r.updated_by.clone(),
        }
    }
}

fn now() -> Timestamp {
    Timestamp::from_millis(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0),
    )
}

/// Maps a store error to the HTTP edge, logging what the client must not see.
fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::PreconditionFailed { current } => precondition_failed()
            .detail(
                "the route changed since you read it (or does not exist); read it again and retry",
            )
            .with("current_revision", current),
        StoreError::Unavailable(cause) => {
            tracing::error!(error = %cause, "database unavailable");
            ApiError::database_unavailable()
        }
        StoreError::Other(cause) => {
            tracing::error!(error = %cause, "database error");
            ApiError::internal()
        }
    }
}

fn precondition_failed() -> ApiError {
    ApiError::new(
        StatusCode::PRECONDITION_FAILED,
        "precondition_failed",
        "Precondition failed",
    )
}

/// 404 `guard_route_not_found`.
fn route_not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "guard_route_not_found",
        "Guard route not found",
    )
    .detail("this server has no guard route")
}

fn etag(revision: i64) -> HeaderValue {
    HeaderValue::from_str(&format!("\"r{revision}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("\"r0\""))
}

/// The revision `If-Match` names (`None`: absent or `*`).
fn parse_if_match(headers: &HeaderMap) -> Result<Option<i64>, ApiError> {
    let Some(v) = headers.get(header::IF_MATCH) else {
        return Ok(None);
    };
    let bad =
        || precondition_failed().detail("If-Match must be the route's ETag, for example \"r3\"");
    let s = v.to_str().map_err(|_| bad())?.trim();
    if s == "*" {
        return Ok(None);
    }
    s.strip_prefix("\"r")
        .and_then(|r| r.strip_suffix('"'))
        .and_then(|n| n.parse::<i64>().ok())
        .map(Some)
        .ok_or_else(bad)
}

fn field(pointer: &str, code: &str, message: impl Into<String>) -> FieldError {
    FieldError {
        pointer: pointer.into(),
        code: code.into(),
        message: message.into(),
    }
}

/// 422 `upstream_url_required`: no URL given and the card does not name
/// exactly one streamable-http remote.
fn url_required(detail: String) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "upstream_url_required",
        "Upstream URL required",
    )
    .detail(detail)
}

/// The upstream URL a route without one uses: the approved card's one
/// streamable-http remote.
fn card_url(pinned: &PinnedServer, pin: &VersionPin) -> Result<String, ApiError> {
    let Some(remotes) = &pinned.approved_remotes else {
        return Err(url_required(format!(
            "`upstream.url` is omitted, and the pin {:?} selects no approved version whose card \
             could name the upstream; give `upstream.url`",
            pin.as_str()
        )));
    };
    match remotes.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(url_required(
            "`upstream.url` is omitted, and the approved card lists no streamable-http remote; \
             give `upstream.url`"
                .into(),
        )),
        more => Err(url_required(format!(
            "`upstream.url` is omitted, and the approved card lists {} streamable-http remotes; \
             give `upstream.url` to choose one",
            more.len()
        ))),
    }
}

/// Read a server's guard route (roles `admin`, `reviewer`, `client`).
///
/// Those who manage, review or connect through the guard read where it
/// forwards; publishers and readers of the registry do not. The upstream's
/// header names are shown, never their values. The `ETag` is the route's
/// revision; send it in `If-Match` when replacing it.
#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/servers/{server}/guard",
    tag = "guard",
    operation_id = "get_guard_route",
    params(GuardPath),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The route", body = GuardRouteView, headers(("ETag" = String, description = "The route's revision"))),
        (status = 403, description = "Role missing", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such tenant or server (`server_not_found`), or the server has no route (`guard_route_not_found`)", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn get_guard_route(
    State(st): State<GuardState>,
    scope: TenantScope,
    Path(p): Path<GuardPath>,
) -> Result<Response, ApiError> {
    scope.require_any(&[Role::Admin, Role::Reviewer, Role::Client])?;
    let tenant = scope.tenant();
    let server = st.servers.canonical(tenant, &p.server).await?;
    let route = st
        .store
        .route(tenant, &server)
        .await
        .map_err(store_error)?
        .ok_or_else(route_not_found)?;
    Ok((
        [(header::ETAG, etag(route.revision))],
        Json(GuardRouteView::from(&route)),
    )
        .into_response())
}

/// Put a server behind the guard: create or replace its route (role
/// `admin`).
///
/// The upstream is checked as a session's is: its URL (or, when omitted,
/// the approved card's one `streamable-http` remote) against the tenant's
/// egress policy (`422 upstream_not_allowed`, nothing stored), its header
/// names (reserved ones refused, a name given twice in different cases
/// `duplicate_header`). Header values are sealed at rest and never
/// returned. With `If-Match`, the write only happens if the route is still
/// at that revision (else `412`). `201` when the route is new, `200` when
/// it replaced one.
#[utoipa::path(
    put,
    path = "/v1/tenants/{tenant}/servers/{server}/guard",
    tag = "guard",
    operation_id = "put_guard_route",
    params(
        GuardPath,
        ("If-Match" = Option<String>, Header, description = "The ETag of the route you read"),
    ),
    request_body = PutRouteBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Replaced", body = GuardRouteView, headers(("ETag" = String, description = "The route's revision"))),
        (status = 201, description = "Created", body = GuardRouteView, headers(("ETag" = String, description = "The route's revision"))),
        (status = 403, description = "Role missing", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such tenant or server (`server_not_found`), or an exact version the server does not have (`version_not_found`)", body = ProblemBody, content_type = "application/problem+json"),
        (status = 412, description = "`If-Match` does not name the route's current revision", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Invalid body; `upstream_not_allowed`: the egress policy refuses the upstream; `upstream_url_required`: no `upstream.url`, and the approved card the pin selects does not list exactly one streamable-http remote", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn put_guard_route(
    State(st): State<GuardState>,
    scope: TenantScope,
    Path(p): Path<GuardPath>,
    headers: HeaderMap,
    StrictJson(body): StrictJson<PutRouteBody>,
) -> Result<Response, ApiError> {
    scope.require_any(&[Role::Admin])?;
    let expected = parse_if_match(&headers)?;
    let tenant = scope.tenant();
    let mut errors = Vec::new();
    let version = body.version.as_deref().unwrap_or("latest");
    if version != "latest" && Version::parse(version).is_err() {
        errors.push(field(
            "/version",
            "invalid_version",
            "`latest` or an exact semantic version without build metadata",
        ));
    }
    // The egress policy first, as a session does: a URL whose host the
    // policy refuses, in any spelling a URL parser reads as an address, is
    // `upstream_not_allowed` whatever else is wrong with the body.
    let rules = st.egress.rules(tenant).await?;
    let given = body
        .upstream
        .url
        .as_deref()
        .and_then(|u| url::Url::parse(u).ok());
    if let Some(url) = &given
        && let Err(e @ EgressError::NotAllowed) = st.egress.egress.admit(&rules, url, false)
    {
        return Err(pinfold_http::egress::not_allowed("/upstream/url", &e));
    }
    if let Some(url) = &body.upstream.url {
        check_url(url, "/upstream/url", &mut errors);
    }
    check_headers(&body.upstream.headers, "/upstream/headers", &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    let pin = VersionPin::parse(version);
    let pinned = st.servers.pinned(tenant, &p.server, &pin).await?;
    // The URL the guard will connect to: the one given, else the card's.
    let target = match &body.upstream.url {
        Some(u) => u.clone(),
        None => card_url(&pinned, &pin)?,
    };
    let url = url::Url::parse(&target).map_err(|_| {
        pinfold_http::egress::not_allowed("/upstream/url", &EgressError::InvalidUrl)
    })?;
    st.egress
        .egress
        .check(&rules, &url, !body.upstream.headers.is_empty())
        .await
        .map_err(|e| pinfold_http::egress::not_allowed("/upstream/url", &e))?;
    let header_names: Vec<String> = body.upstream.headers.keys().cloned().collect();
    let headers_sealed = if body.upstream.headers.is_empty() {
        None
    } else {
        let pairs: Vec<(&String, &String)> = body.upstream.headers.iter().collect();
        let plain = serde_json::to_vec(&pairs).map_err(|_| ApiError::internal())?;
        Some(
            st.sealer
                .seal(tenant, &headers_context(&pinned.server), &plain)
                .map_err(|e| {
                    tracing::error!(error = %e, "sealing guard upstream headers failed");
                    ApiError::internal()
                })?,
        )
    };
    let at = now();
    let route = GuardRoute {
        server: pinned.server.clone(),
        upstream_url: body.upstream.url,
        header_names,
        headers_sealed,
        version: pin,
        mode: body.mode.map(Mode::from),
        calls: body.calls.map(CallsPolicy::from).unwrap_or_default(),
        revision: 0,
        created_at: at,
        updated_at: at,
        updated_by: scope.actor().to_owned(),
    };
    let event = put_event(&route, scope.actor(), at);
    let stored = st
        .store
        .put_route(tenant, &route, expected, &event)
        .await
        .map_err(store_error)?;
    if let Some(told) = &st.on_write {
        told.route_written(tenant, &stored.server);
    }
    let status = if stored.revision == 1 {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        [(header::ETAG, etag(stored.revision))],
        Json(GuardRouteView::from(&stored)),
    )
        .into_response())
}

/// The audit event of a route written: what it says, header names only.
fn put_event(route: &GuardRoute, actor: &str, at: Timestamp) -> NewAuditEvent {
    NewAuditEvent {
        server: Some(route.server.clone()),
        ..NewAuditEvent::new(
            "guard.route.put",
            actor,
            at,
            json!({
                "upstream_url": route.upstream_url,
                "upstream_headers": route.header_names,
                "version": route.version.as_str(),
                "mode": route.mode.map(Mode::as_str),
                "calls": route.calls.as_str(),
            }),
        )
    }
}

/// Take a server from behind the guard: delete its route (role `admin`).
#[utoipa::path(
    delete,
    path = "/v1/tenants/{tenant}/servers/{server}/guard",
    tag = "guard",
    operation_id = "delete_guard_route",
    params(GuardPath),
    security(("bearer" = [])),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, description = "Role missing", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such tenant or server (`server_not_found`), or the server has no route (`guard_route_not_found`)", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn delete_guard_route(
    State(st): State<GuardState>,
    scope: TenantScope,
    Path(p): Path<GuardPath>,
) -> Result<StatusCode, ApiError> {
    scope.require_any(&[Role::Admin])?;
    let tenant: &TenantId = scope.tenant();
    let server = st.servers.canonical(tenant, &p.server).await?;
    let event = NewAuditEvent {
        server: Some(server.clone()),
        ..NewAuditEvent::new("guard.route.deleted", scope.actor(), now(), json!({}))
    };
    if st
        .store
        .delete_route(tenant, &server, &event)
        .await
        .map_err(store_error)?
    {
        if let Some(told) = &st.on_write {
            told.route_written(tenant, &server);
        }
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(route_not_found())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_pin_pattern_is_the_core_version_pattern_or_latest() {
        let core = pinfold_core::names::VERSION_PATTERN;
        assert_eq!(
            VERSION_PIN_PATTERN,
            format!(
                "^(?:latest|{})$",
                core.trim_start_matches('^').trim_end_matches('$')
            )
        );
        // The schema's literal is the same.
        let schema =
            serde_json::to_value(<PutRouteBody as utoipa::PartialSchema>::schema()).unwrap();
        assert_eq!(
            schema["properties"]["version"]["pattern"],
            VERSION_PIN_PATTERN
        );
    }

    #[test]
    fn if_match_is_a_revision_etag() {
        let mut h = HeaderMap::new();
        assert_eq!(parse_if_match(&h).unwrap(), None);
        h.insert(header::IF_MATCH, HeaderValue::from_static("\"r7\""));
        assert_eq!(parse_if_match(&h).unwrap(), Some(7));
        h.insert(header::IF_MATCH, HeaderValue::from_static("*"));
        assert_eq!(parse_if_match(&h).unwrap(), None);
        h.insert(header::IF_MATCH, HeaderValue::from_static("r7"));
        assert!(parse_if_match(&h).is_err());
    }
}
