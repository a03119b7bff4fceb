//! The HTTP application: operational routes, the service routers and the
//! OpenAPI document, behind the edge layer ([`crate::edge`]) every request
//! passes through.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pinfold_http::Authenticator;
use pinfold_http::problem::{ApiError, ProblemBody};
use pinfold_http::ratelimit::RateLimiter;
use pinfold_tenancy::{TenancyState, TenantStore};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use utoipa_swagger_ui::{Config as SwaggerConfig, SwaggerUi};

use crate::metrics::Metrics;
use crate::protected_resource::ProtectedResource;
use crate::scrape::{ClientAddr, Scrapes};
use crate::services::Service;

/// Everything the application needs at run time.
#[derive(Clone)]
pub struct AppContext {
    /// Tenants, policies, audit.
    pub tenants: Arc<dyn TenantStore>,
    /// The registry service.
    pub registry: pinfold_registry::RegistryState,
    /// The resolve service.
    pub resolve: pinfold_resolve::ResolveState,
    /// The scope service.
    pub scope: pinfold_scope::ScopeState,
    /// The guard's routes.
    pub guard: pinfold_guard::GuardState,
    /// The guard's MCP endpoint (`/t/{tenant}/mcp/{server}`).
    pub guard_endpoint: pinfold_guard::endpoint::EndpointState,
    /// What Pinfold says of itself as an OAuth protected resource.
    pub protected_resource: Arc<ProtectedResource>,
    /// Token verification.
    pub authn: Arc<Authenticator>,
    /// Request metrics.
    pub metrics: Arc<Metrics>,
    /// Who may scrape `/metrics`, and its one rendering at a time.
    pub scrapes: Arc<Scrapes>,
    /// Largest request body.
    pub body_limit: usize,
    /// Per-request timeout.
    pub request_timeout: Duration,
    /// Rate limits charged on tenant admission (`None`: off).
    pub rate_limiter: Option<Arc<RateLimiter>>,
    /// The review console at `/console` (`None`: not served), mounted
    /// beside the registry's routes.
    pub console: Option<crate::console_wiring::ConsoleSetup>,
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Pinfold",
        description = "Control plane for MCP servers: a registry of immutable capability signatures, \
a resolve cache and least-privilege scope planning. Errors are `application/problem+json` \
(RFC 9457) with a stable `code` and the request id. Authenticate with `Authorization: Bearer <JWT>`; \
in dev mode `pinfold serve` prints ready-made tokens.",
        license(name = "Apache-2.0"),
    ),
    modifiers(&BearerAuth),
    // Referenced by name from the policy overrides' hand-written map schema.
    components(schemas(pinfold_tenancy::model::ServerOverride)),
    tags(
        (name = "operations", description = "Health, readiness, metrics"),
        (name = "tenants", description = "Tenants, policies and the audit log"),
        (name = "registry", description = "Capability signatures: publish, review, read, diff, verify, attest"),
        (name = "subregistry", description = "The official MCP registry's read API (/v0.1) over a tenant's approved versions: use https://<pinfold>/t/<tenant> as the base URL of a private subregistry. Pinfold's digest, attestation, enforcement mode and worst-case tools are under _meta[\"io.github.pinfold/pinfold\"]; not-found answers are the official {\"error\": \"...\"}"),
        (name = "resolve", description = "Resolve sessions: tools/resolve and tools/annotations, fetched from the upstream once per session and checked against the signature"),
        (name = "scope", description = "OAuth scopes: the scope envelope of a version, least-privilege plans with their insufficient_scope challenge, provider profiles, and grants (PKCE S256, single-use state, RFC 8707 resource) with their ledger"),
        (name = "guard", description = "Guard routes: put a server behind the guard (where its upstream is, which approved version binds it, under which mode and calls policy); its upstream headers sealed, never returned"),
    )
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some("A JWT from a configured issuer (or a dev token)"))
                    .build(),
            ),
        );
    }
}

/// State of the operational routes (shared behind one `Arc`: axum clones
/// a route's state for every request, `/healthz` included).
struct OpsState {
    tenants: Arc<dyn TenantStore>,
    metrics: Arc<Metrics>,
    scrapes: Arc<Scrapes>,
    resolve: pinfold_resolve::ResolveState,
    guard: pinfold_guard::endpoint::EndpointState,
    protected_resource: Arc<ProtectedResource>,
    rate_limiter: Option<Arc<RateLimiter>>,
}

fn ops_router() -> OpenApiRouter<Arc<OpsState>> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
        .routes(routes!(protected_resource_metadata))
}

/// The OpenAPI document of the whole API, generated from the real handlers.
/// Every process serves it whole, whatever its `--services`: behind a
/// path-routing proxy the split roles together answer all of it.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    doc.merge(ops_router().into_openapi());
    for service in Service::ALL {
        if let Some(api) = openapi_for(service) {
            doc.merge(api);
        }
    }
    crate::contract::complete(&mut doc);
    doc
}

/// The OpenAPI paths of one service (`None` while it has no routes): what a
/// process started with `--services <service>` answers besides the
/// operational routes. A new service's router is added here and in
/// `service_router`, nowhere else.
pub fn openapi_for(service: Service) -> Option<utoipa::openapi::OpenApi> {
    match service {
        Service::Tenancy => Some(pinfold_tenancy::router().into_openapi()),
        Service::Registry => Some(pinfold_registry::router().into_openapi()),
        Service::Resolve => Some(pinfold_resolve::routes::router().into_openapi()),
        Service::Scope => Some(pinfold_scope::routes::router().into_openapi()),
        Service::Guard => Some(pinfold_guard::router().into_openapi()),
    }
}

/// The routes of one service, with their state.
fn service_router(ctx: &AppContext, service: Service) -> Router {
    match service {
        Service::Tenancy => {
            pinfold_tenancy::router()
                .split_for_parts()
                .0
                .with_state(TenancyState {
                    store: ctx.tenants.clone(),
                    hooks: Arc::new(crate::registry_wiring::RegistryTenantHooks(
                        ctx.registry.clone(),
                    )),
                })
        }
        Service::Registry => pinfold_registry::router()
            .split_for_parts()
            .0
            .with_state(ctx.registry.clone()),
        Service::Resolve => pinfold_resolve::routes::router()
            .split_for_parts()
            .0
            .with_state(ctx.resolve.clone()),
        Service::Scope => pinfold_scope::routes::router()
            .split_for_parts()
            .0
            .with_state(ctx.scope.clone()),
        Service::Guard => pinfold_guard::router()
            .split_for_parts()
            .0
            .with_state(ctx.guard.clone())
            .merge(pinfold_guard::endpoint::router().with_state(ctx.guard_endpoint.clone())),
    }
}

/// The OpenAPI document as pretty JSON with a trailing newline (what
/// `pinfold openapi` prints and `openapi/openapi.json` holds).
pub fn openapi_json() -> String {
    let mut s = openapi().to_pretty_json().unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}

/// Liveness: the process is up.
#[utoipa::path(get, path = "/healthz", tag = "operations", operation_id = "healthz",
    responses((status = 200, description = "Alive", content_type = "application/json", example = json!({"status": "ok"}))))]
async fn healthz() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        r#"{"status":"ok"}"#,
    )
        .into_response()
}

/// Readiness: the database answers.
#[utoipa::path(get, path = "/readyz", tag = "operations", operation_id = "readyz",
    responses(
        (status = 200, description = "Ready", content_type = "application/json", example = json!({"status": "ready"})),
        (status = 503, description = "Database unavailable", body = ProblemBody, content_type = "application/problem+json"),
    ))]
async fn readyz(State(st): State<Arc<OpsState>>) -> Result<Response, ApiError> {
    match tokio::time::timeout(Duration::from_secs(2), st.tenants.ping()).await {
        Ok(Ok(())) => Ok((
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            r#"{"status":"ready"}"#,
        )
            .into_response()),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness check failed");
            Err(ApiError::database_unavailable().detail("the database is not answering"))
        }
        Err(_) => {
            tracing::warn!("readiness check timed out");
            Err(ApiError::database_unavailable()
                .detail("the database did not answer within 2 seconds"))
        }
    }
}

/// OAuth 2.0 protected resource metadata (RFC 9728): Pinfold's resource
/// identifier and the authorization servers whose tokens it accepts.
#[utoipa::path(get, path = "/.well-known/oauth-protected-resource", tag = "operations",
    operation_id = "protected_resource_metadata",
    responses((status = 200, description = "RFC 9728 metadata", content_type = "application/json",
        example = json!({"resource": "https://pinfold.example", "authorization_servers": ["https://idp.example"],
            "bearer_methods_supported": ["header"], "resource_name": "Pinfold",
            "resource_documentation": "https://pinfold.example/docs"}))))]
async fn protected_resource_metadata(
    State(st): State<Arc<OpsState>>,
    headers: axum::http::HeaderMap,
) -> Response {
    let pr = &st.protected_resource;
    let base = pr.base(headers.get(header::HOST));
    let mut doc = serde_json::json!({
        "resource": base,
        "bearer_methods_supported": ["header"],
        "resource_name": "Pinfold",
        "resource_documentation": format!("{base}/docs"),
    });
    if !pr.authorization_servers.is_empty() {
        doc["authorization_servers"] = serde_json::json!(pr.authorization_servers);
    }
    (
        [
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("max-age=300"),
            ),
            (header::VARY, HeaderValue::from_static("Host")),
        ],
        axum::Json(doc),
    )
        .into_response()
}

/// RFC 9728 metadata of one guard endpoint (not in the OpenAPI document,
/// as the endpoint itself is not: it speaks MCP).
async fn guard_resource_metadata(
    State(st): State<Arc<OpsState>>,
    axum::extract::Path((tenant, server)): axum::extract::Path<(String, String)>,
    headers: axum::http::HeaderMap,
) -> Response {
    match crate::protected_resource::guard_metadata(
        &st.protected_resource,
        headers.get(header::HOST),
        &tenant,
        &server,
    ) {
        Some(doc) => (
            [
                (
                    header::CACHE_CONTROL,
                    HeaderValue::from_static("max-age=300"),
                ),
                (header::VARY, HeaderValue::from_static("Host")),
            ],
            axum::Json(doc),
        )
            .into_response(),
        None => fallback().await.into_response(),
    }
}

/// Prometheus metrics (text exposition format 0.0.4).
///
/// Protected when `[metrics]` says so: a client address outside
/// `allow_from` gets `403 address_not_allowed`, then a scrape without the
/// configured bearer token `401` (`Authorization: Bearer <token>`). One
/// scrape at a time renders; scrapes arriving meanwhile answer the same
/// bytes.
#[utoipa::path(get, path = "/metrics", tag = "operations", operation_id = "metrics",
    responses(
        (status = 200, description = "Metrics", content_type = "text/plain; version=0.0.4"),
        (status = 401, description = "A scrape token is configured and this request does not carry it (`unauthenticated`) or carries another (`invalid_token`)",
            body = ProblemBody, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"pinfold-metrics\"` (RFC 6750)"))),
        (status = 403, description = "The client address is outside `[metrics] allow_from` (`address_not_allowed`)",
            body = ProblemBody, content_type = "application/problem+json"),
    ))]
async fn metrics(
    State(st): State<Arc<OpsState>>,
    req: axum::extract::Request,
) -> Result<Response, ApiError> {
    let client = req.extensions().get::<ClientAddr>().map(|c| c.0);
    st.scrapes
        .admit(client, req.headers().get(header::AUTHORIZATION))?;
    let ops = st.clone();
    let text = st
        .scrapes
        .flight
        .run(move || render_metrics(&ops))
        .await
        .ok_or_else(ApiError::internal)?;
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        text,
    )
        .into_response())
}

/// The whole `/metrics` text (run on the blocking pool, one at a time).
fn render_metrics(st: &OpsState) -> axum::body::Bytes {
    let mut text = st.metrics.render();
    if let Some(limiter) = &st.rate_limiter {
        crate::metrics::render_rate_limited(limiter, &mut text);
    }
    // The cache counts lazily: settle pending evictions first, so the
    // figures are those of now.
    st.resolve.engine.run_pending_tasks();
    crate::metrics::render_resolve(&st.resolve.engine.stats(), &mut text);
    crate::metrics::render_guard(st.guard.stats(), &mut text);
    crate::metrics::render_scrapes(
        st.scrapes.admitted(),
        st.scrapes.flight.renders(),
        &mut text,
    );
    text.into()
}

async fn fallback() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "route_not_found", "Not found").detail("no such route")
}

/// Builds the application serving every service.
pub fn build(ctx: AppContext) -> crate::fastpath::App {
    build_for(ctx, &Service::ALL)
}

/// Builds the application serving the operational routes and the routes of
/// `services` (duplicates are ignored). A path of a service not in the list
/// answers 404 `route_not_found`, as any unknown path does. With the
/// registry among them, unchanged version records are answered before
/// routing ([`crate::fastpath`]).
pub fn build_for(ctx: AppContext, services: &[Service]) -> crate::fastpath::App {
    let ops = ops_router()
        .split_for_parts()
        .0
        .route(
            crate::protected_resource::GUARD_METADATA_PATH,
            axum::routing::get(guard_resource_metadata),
        )
        .with_state(Arc::new(OpsState {
            tenants: ctx.tenants.clone(),
            metrics: ctx.metrics.clone(),
            scrapes: ctx.scrapes.clone(),
            resolve: ctx.resolve.clone(),
            guard: ctx.guard_endpoint.clone(),
            protected_resource: ctx.protected_resource.clone(),
            rate_limiter: ctx.rate_limiter.clone(),
        }));
    let docs: Router = SwaggerUi::new("/docs")
        .url("/openapi.json", openapi())
        .config(SwaggerConfig::default().validator_url("none"))
        .into();
    let mut services = services.to_vec();
    services.sort();
    services.dedup();
    // Plans through a resolve session need the resolve service here.
    let mut ctx = ctx;
    if services.contains(&Service::Resolve) {
        ctx.scope = ctx
            .scope
            .with_sessions(Arc::new(crate::scope_wiring::ResolveSessions(
                ctx.resolve.clone(),
            )));
    }
    let mut app = Router::new().merge(ops).merge(docs);
    for service in &services {
        app = app.merge(service_router(&ctx, *service));
    }
    if let Some(setup) = ctx
        .console
        .as_ref()
        .filter(|_| services.contains(&Service::Registry))
    {
        app = app.merge(pinfold_console::router(crate::console_wiring::state(
            setup,
            &ctx.registry,
            &ctx.tenants,
            &ctx.scope,
            &ctx.resolve,
            &ctx.authn,
        )));
    }
    let edge = crate::edge::EdgeLayer::new(
        ctx.metrics.clone(),
        ctx.authn.clone(),
        ctx.body_limit,
        ctx.request_timeout,
        ctx.protected_resource.clone(),
        ctx.rate_limiter.clone(),
    );
    let router = app.fallback(fallback).layer(edge.clone());
    let app = if services.contains(&Service::Registry) {
        crate::fastpath::App::with_fast_path(
            router,
            ctx.registry,
            ctx.authn.clone(),
            ctx.metrics,
            ctx.rate_limiter,
        )
    } else {
        crate::fastpath::App::routed(router)
    };
    if services.contains(&Service::Guard) {
        app.with_guard_fast_path(ctx.guard_endpoint, ctx.authn, edge)
    } else {
        app
    }
}
