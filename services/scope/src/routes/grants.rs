//! Grants: the authorization request (PKCE S256, single-use `state`,
//! RFC 8707 `resource`), the code exchange, and the ledger.

use std::borrow::Cow;
use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pinfold_core::ids::Timestamp;
use pinfold_http::auth::Role;
use pinfold_http::pagination::{PageQuery, finish_page};
use pinfold_http::problem::{ApiError, ProblemBody};
use pinfold_http::{StrictJson, TenantScope};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::openapi::schema::{
    AdditionalProperties, AllOfBuilder, AnyOfBuilder, ArrayBuilder, ObjectBuilder, OneOfBuilder,
    Schema, SchemaType, Type,
};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{IntoParams, PartialSchema, ToSchema};

use crate::error::{grant_not_found, store_error};
use crate::model::{
    GrantRow, GrantStatus, GrantView, PROVIDER_NAME_PATTERN, ProviderRow, StateRow, check_scopes,
    field, is_grant_id, is_provider_name, new_grant_id, normalise,
};
use crate::oauth::{self, ClientConfig, ExchangeError};
use crate::planning::scope_token_schema;
use crate::state::{ScopeState, now, secret_context, verifier_context};
use crate::store::{AuditNote, GrantOutcome};
use pinfold_core::scope::Hierarchy;

/// The plan a grant implements: the response of `POST .../scopes/plan`,
/// passed through whole or in part (its `required` scopes are what the
/// calls need; its `request`, what is still missing, is what the
/// authorization request asks for; its `server` and `version` name the MCP
/// server whose resource the grant is for when the body gives no
/// `resource`). The schema is written out below ([`PartialSchema`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanInput {
    /// The minimal antichain covering every call (the need).
    pub required: Vec<String>,
    /// What to request (`required` minus what is already granted);
    /// `required` when absent.
    #[serde(default)]
    pub request: Option<Vec<String>>,
    /// The server planned against: with no `resource` in the body, the
    /// grant's resource is found from it.
    #[serde(default)]
    pub server: Option<String>,
    /// The exact version planned against (`latest` when absent).
    #[serde(default)]
    pub version: Option<String>,
    /// The provider whose hierarchy was used (informative).
    #[serde(default)]
    pub provider: Option<String>,
    /// `exact` or `bounded` (informative).
    #[serde(default)]
    pub strategy: Option<String>,
    /// Per-call choices (informative).
    #[serde(default)]
    pub calls: Option<Vec<Value>>,
    /// The challenge string (informative).
    #[serde(default)]
    pub www_authenticate: Option<String>,
    /// `_meta` (informative).
    #[serde(default, rename = "_meta")]
    pub meta: Option<Value>,
    /// Notices about the tools' declarations (informative).
    #[serde(default)]
    pub notices: Option<Vec<Value>>,
}

/// The most scopes a grant may request.
pub const MAX_REQUESTED: usize = 100;

fn nullable(types: Type, description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([types, Type::Null]))
        .description(Some(description))
}

fn any(description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(SchemaType::AnyValue)
        .description(Some(description))
}

/// A list of distinct scope tokens.
fn scope_list(types: SchemaType, description: &str) -> ArrayBuilder {
    ArrayBuilder::new()
        .schema_type(types)
        .items(scope_token_schema())
        .unique_items(true)
        .description(Some(description))
}

fn requested_list(types: SchemaType, description: &str) -> ArrayBuilder {
    scope_list(types, description)
        .min_items(Some(1))
        .max_items(Some(MAX_REQUESTED))
}

impl PartialSchema for PlanInput {
    /// The members, and `anyOf`: a non-empty `request`, or (when it is
    /// absent) a non-empty `required`, since that is what is requested;
    /// either way at most 100 scopes.
    fn schema() -> RefOr<Schema> {
        let array_or_null = || SchemaType::from_iter([Type::Array, Type::Null]);
        let members = ObjectBuilder::new()
            .schema_type(Type::Object)
            .property(
                "required",
                scope_list(
                    SchemaType::Type(Type::Array),
                    "The minimal antichain covering every call (the need).",
                ),
            )
            .property(
                "request",
                requested_list(
                    array_or_null(),
                    "What to request (`required` minus what is already granted); `required` \
                     when absent or `null`. 1 to 100 scopes.",
                ),
            )
            .property(
                "server",
                nullable(
                    Type::String,
                    "The server planned against: without `resource` in the body, the grant's \
                     RFC 8707 resource is the URI the provider profile's `resources` lists for \
                     it, else the one streamable-http remote URL of its approved card.",
                ),
            )
            .property(
                "version",
                nullable(
                    Type::String,
                    "The version planned against (`latest` when absent).",
                ),
            )
            .property(
                "provider",
                nullable(
                    Type::String,
                    "The provider whose hierarchy was used (informative).",
                ),
            )
            .property(
                "strategy",
                nullable(Type::String, "`exact` or `bounded` (informative)."),
            )
            .property(
                "calls",
                ArrayBuilder::new()
                    .schema_type(array_or_null())
                    .items(any("A call's choice."))
                    .description(Some("Per-call choices (informative).")),
            )
            .property(
                "www_authenticate",
                nullable(Type::String, "The challenge string (informative)."),
            )
            .property("_meta", any("`_meta` (informative)."))
            .property(
                "notices",
                ArrayBuilder::new()
                    .schema_type(array_or_null())
                    .items(any("A notice."))
                    .description(Some("Notices about the tools' declarations (informative).")),
            )
            .required("required")
            .additional_properties(Some(AdditionalProperties::FreeForm(false)));
        let requested = AnyOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .property("request", ArrayBuilder::new())
                    .required("request"),
            )
            .item(
                ObjectBuilder::new()
                    .property("request", ObjectBuilder::new().schema_type(Type::Null))
                    .property(
                        "required",
                        ArrayBuilder::new()
                            .min_items(Some(1))
                            .max_items(Some(MAX_REQUESTED)),
                    ),
            );
        AllOfBuilder::new()
            .item(members)
            .item(requested)
            .description(Some(
                "The plan a grant implements: the response of `POST .../scopes/plan`, whole or \
                 in part.",
            ))
            .into()
    }
}

impl ToSchema for PlanInput {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("PlanInput")
    }
}

/// Body of `POST .../grants`: a `plan` or plain `scopes`, not both. The
/// schema is written out below ([`PartialSchema`]).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewGrantBody {
    /// Provider profile name.
    pub provider: String,
    /// The plan to implement.
    #[serde(default)]
    pub plan: Option<PlanInput>,
    /// Scopes to request (they are also the need).
    #[serde(default)]
    pub scopes: Option<Vec<String>>,
    /// One of the provider's `redirect_uris`, exactly.
    pub redirect_uri: String,
    /// The RFC 8707 resource: a URI the provider's `resources` lists, or
    /// the server name it lists it under. Without it, the plan's server
    /// names it (see [`grant_resource`]).
    #[serde(default)]
    pub resource: Option<String>,
}

impl PartialSchema for NewGrantBody {
    /// The members (a closed object), and `oneOf` a `plan` or `scopes`.
    fn schema() -> RefOr<Schema> {
        let members = ObjectBuilder::new()
            .schema_type(Type::Object)
            .property(
                "provider",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some(PROVIDER_NAME_PATTERN))
                    .description(Some("Provider profile name.")),
            )
            .property(
                "plan",
                OneOfBuilder::new()
                    .item(Ref::from_schema_name("PlanInput"))
                    .item(ObjectBuilder::new().schema_type(Type::Null))
                    .description(Some("The plan to implement (give it or `scopes`).")),
            )
            .property(
                "scopes",
                requested_list(
                    SchemaType::from_iter([Type::Array, Type::Null]),
                    "Scopes to request, which are also the need (give them or `plan`): 1 to \
                     100 distinct RFC 6749 scope tokens.",
                ),
            )
            .property(
                "redirect_uri",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .description(Some("One of the provider's `redirect_uris`, exactly.")),
            )
            .property(
                "resource",
                nullable(
                    Type::String,
                    "The RFC 8707 resource the token is for (the MCP authorization spec \
                     requires it in the authorization and the token request): a URI the \
                     provider profile's `resources` lists, or the server name it lists it \
                     under. Without it, the plan's `server` names it: the URI the profile's \
                     `resources` lists for that server, else the one streamable-http remote \
                     URL of that server's approved card; a grant whose resource cannot be \
                     found this way is refused (`422 resource_required`).",
                ),
            )
            .required("provider")
            .required("redirect_uri")
            .additional_properties(Some(AdditionalProperties::FreeForm(false)));
        let with_plan = ObjectBuilder::new()
            .schema_type(Type::Object)
            .title(Some("A plan"))
            .property("plan", ObjectBuilder::new().schema_type(Type::Object))
            .property("scopes", ObjectBuilder::new().schema_type(Type::Null))
            .required("plan");
        let with_scopes = ObjectBuilder::new()
            .schema_type(Type::Object)
            .title(Some("Scopes"))
            .property("scopes", ArrayBuilder::new())
            .property("plan", ObjectBuilder::new().schema_type(Type::Null))
            .required("scopes");
        AllOfBuilder::new()
            .item(members)
            .item(OneOfBuilder::new().item(with_plan).item(with_scopes))
            .description(Some(
                "Body of `POST .../grants`: a `plan` or plain `scopes`, not both.",
            ))
            .examples([json!({
                "provider": "github",
                "scopes": ["repo", "read:org"],
                "redirect_uri": "https://app.example.com/oauth/callback",
                "resource": "https://notes.example.com/mcp"
            })])
            .into()
    }
}

impl ToSchema for NewGrantBody {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("NewGrantBody")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push(("PlanInput".into(), PlanInput::schema()));
    }
}

/// A new grant.
#[derive(Debug, Serialize, ToSchema)]
pub struct NewGrantView {
    /// Grant id.
    pub id: String,
    /// Send the user here.
    pub authorization_url: String,
    /// Requested scopes.
    pub requested: Vec<String>,
    /// Needed scopes.
    pub needed: Vec<String>,
    /// The RFC 8707 resource requested, in the authorization URL and again
    /// in the token request.
    pub resource: String,
    /// When the `state` in the URL stops being accepted.
    #[schema(value_type = String, format = DateTime)]
    pub state_expires_at: Timestamp,
}

/// Body of `POST .../grants/{id}/exchange`: what the redirect brought back.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"code": "SplxlOBeZQQYbYS6WxSbIA", "state": "the state from the redirect"}))]
pub struct ExchangeBody {
    /// The authorization code.
    #[schema(min_length = 1, max_length = 4096)]
    pub code: String,
    /// The `state` the redirect carried.
    #[schema(min_length = 1, max_length = 512)]
    pub state: String,
}

/// Path of a grant.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct GrantPath {
    /// Tenant id.
    pub tenant: String,
    /// Grant id.
    pub grant: String,
}

/// A page of the grant ledger.
#[derive(Debug, Serialize, ToSchema)]
pub struct GrantPage {
    /// Grants, oldest first.
    pub items: Vec<GrantView>,
    /// Pass as `cursor` for the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

fn provider_not_ready(what: &str) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "provider_not_ready",
        "Provider cannot grant",
    )
    .detail(format!(
        "the provider profile has no {what}; complete it first"
    ))
}

/// The client configuration of `row` for `redirect_uri`.
fn client_config<'a>(
    st: &ScopeState,
    out: &oauth::Outbound,
    tenant: &pinfold_core::ids::TenantId,
    row: &'a ProviderRow,
    redirect_uri: &'a str,
) -> Result<ClientConfig<'a>, ApiError> {
    let p = &row.profile;
    let client_id = p
        .client_id
        .as_deref()
        .ok_or_else(|| provider_not_ready("client_id"))?;
    let (Some(auth), Some(token)) = (&p.authorization_endpoint, &p.token_endpoint) else {
        return Err(provider_not_ready("endpoints"));
    };
    // The policy may have tightened since the profile was written.
    for u in [auth, token] {
        oauth::provider_url(out, u).map_err(|e| {
            ApiError::new(
                StatusCode::CONFLICT,
                "provider_url_refused",
                "Provider URL refused",
            )
            .detail(e)
        })?;
    }
    let client_secret = match &row.client_secret_sealed {
        None => None,
        Some(sealed) => {
            let plain = st
                .sealer
                .open(tenant, &secret_context(&row.name), sealed)
                .map_err(|e| {
                    tracing::error!(error = %e, provider = %row.name, "a sealed client secret does not open");
                    ApiError::internal()
                })?;
            Some(String::from_utf8(plain).map_err(|_| ApiError::internal())?)
        }
    };
    Ok(ClientConfig {
        client_id,
        client_secret,
        authorization_endpoint: auth,
        token_endpoint: token,
        redirect_uri,
    })
}

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
async fn grant_resource(
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

/// Start a grant (role `client` or `admin`): returns the authorization URL
/// to send the user to.
///
/// The URL carries PKCE S256 (RFC 7636: the verifier comes from 32 random
/// bytes and stays sealed in Pinfold), a single-use `state` of 256 bits
/// (only its hash is stored; it expires), the scopes and the RFC 8707
/// `resource` (the MCP authorization specification requires it in both
/// the authorization and the token request, so every grant names one: the
/// body's `resource`, else the plan's server through the provider
/// profile's `resources`, else the one streamable-http remote of that
/// server's approved card; otherwise `422 resource_required`).
#[utoipa::path(
    post,
    path = "/v1/tenants/{tenant}/grants",
    tag = "scope",
    operation_id = "create_grant",
    params(("tenant" = String, Path, description = "Tenant id")),
    request_body = NewGrantBody,
    security(("bearer" = [])),
    responses(
        (status = 201, description = "The grant and its authorization URL", body = NewGrantView),
        (status = 400, description = "Malformed JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "Missing or invalid token", body = ProblemBody, content_type = "application/problem+json"),
        (status = 403, description = "Role missing", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such tenant", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "The provider cannot grant (no client or endpoints)", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Unknown provider, unregistered redirect URI, a `resource` the provider does not list (`validation_failed`), or no resource to be found (`resource_required`, pointer `/resource`)", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn create_grant(
    State(st): State<ScopeState>,
    scope: TenantScope,
    StrictJson(body): StrictJson<NewGrantBody>,
) -> Result<Response, ApiError> {
    scope.require_any(&[Role::Client, Role::Admin])?;
    let mut errors = Vec::new();
    if !is_provider_name(&body.provider) {
        errors.push(field(
            "/provider",
            "invalid_provider_name",
            "not a provider name",
        ));
    }
    let (requested, needed) = match (&body.plan, &body.scopes) {
        (Some(_), Some(_)) | (None, None) => {
            errors.push(field(
                "",
                "plan_or_scopes",
                "give either `plan` or `scopes`",
            ));
            (Vec::new(), Vec::new())
        }
        (Some(plan), None) => {
            check_scopes("/plan/required", &plan.required, &mut errors);
            let request = plan
                .request
                .clone()
                .unwrap_or_else(|| plan.required.clone());
            if let Some(r) = &plan.request {
                check_scopes("/plan/request", r, &mut errors);
            }
            (normalise(&request), normalise(&plan.required))
        }
        (None, Some(scopes)) => {
            check_scopes("/scopes", scopes, &mut errors);
            (normalise(scopes), normalise(scopes))
        }
    };
    if errors.is_empty() && requested.is_empty() {
        errors.push(field(
            if body.plan.is_some() {
                "/plan/request"
            } else {
                "/scopes"
            },
            "nothing_to_request",
            "no scope to request: what the calls need is already granted",
        ));
    }
    if requested.len() > MAX_REQUESTED {
        errors.push(field(
            "",
            "too_many",
            format!("at most {MAX_REQUESTED} scopes"),
        ));
    }
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    let tenant = scope.tenant();
    let row = st
        .store
        .provider(tenant, &body.provider)
        .await
        .map_err(store_error)?
        .ok_or_else(|| {
            ApiError::validation(vec![field(
                "/provider",
                "unknown_provider",
                "no provider profile of this name",
            )])
        })?;
    if !row
        .profile
        .redirect_uris
        .iter()
        .any(|r| r == &body.redirect_uri)
    {
        return Err(ApiError::validation(vec![field(
            "/redirect_uri",
            "redirect_uri_not_registered",
            "not one of the provider's redirect_uris (compared exactly)",
        )]));
    }
    let out = st.outbound(tenant).await?;
    let client = client_config(&st, &out, tenant, &row, &body.redirect_uri)?;
    let resource = grant_resource(&st, tenant, &row, &body).await?;
    let at = now();
    let id = new_grant_id(at);
    let state = oauth::new_state().map_err(|e| {
        tracing::error!(error = %e, "no randomness for a state");
        ApiError::internal()
    })?;
    let (challenge, verifier) = oauth::new_pkce();
    let url = oauth::authorization_url(&client, &state, challenge, &requested, &resource)
        .map_err(|e| {
            tracing::error!(error = %e, provider = %row.name, "building an authorization URL failed");
            ApiError::internal()
        })?;
    let verifier_sealed = st
        .sealer
        .seal(tenant, &verifier_context(&id), verifier.secret().as_bytes())
        .map_err(|e| {
            tracing::error!(error = %e, "sealing a PKCE verifier failed");
            ApiError::internal()
        })?;
    let expires_at = Timestamp::from_millis(at.millis() + st.config.state_ttl.as_millis() as i64);
    let grant = GrantRow {
        id: id.clone(),
        provider: row.name.clone(),
        principal: scope.actor().to_owned(),
        issuer: scope.principal().issuer.clone(),
        redirect_uri: body.redirect_uri.clone(),
        resource: Some(resource.clone()),
        requested: requested.clone(),
        needed: needed.clone(),
        granted: None,
        status: GrantStatus::Pending,
        error: None,
        created_at: at,
        exchanged_at: None,
    };
    let state_row = StateRow {
        grant_id: id.clone(),
        state_hash: oauth::state_hash(&state),
        verifier_sealed,
        expires_at,
    };
    let audit = AuditNote::new(
        "grant.created",
        scope.actor(),
        at,
        json!({"grant": id, "provider": row.name, "requested": requested,
               "needed": needed, "resource": resource}),
    );
    st.store
        .insert_grant(tenant, &grant, &state_row, &audit)
        .await
        .map_err(store_error)?;
    let location = HeaderValue::from_str(&format!("/v1/tenants/{tenant}/grants/{id}"))
        .unwrap_or_else(|_| HeaderValue::from_static("/"));
    Ok((
        StatusCode::CREATED,
        [
            (header::LOCATION, location),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        Json(NewGrantView {
            id,
            authorization_url: url,
            requested,
            needed,
            resource,
            state_expires_at: expires_at,
        }),
    )
        .into_response())
}

fn invalid_state() -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_state", "Invalid state")
        .detail("this state is unknown, belongs to another grant, or was already used; nothing was exchanged")
}

/// Exchange the code of a grant (role `client` or `admin`; only the caller
/// who started it).
///
/// The `state` is checked and consumed first (at most once, even under
/// concurrent requests): a replayed or expired one is `400` and nothing is
/// exchanged. The token response is passed through this once (never
/// stored, `Cache-Control: no-store`); the ledger records the requested,
/// granted (the response's `scope`, or the request when it has none, RFC
/// 6749 §5.1) and needed scopes. The token request follows no redirect.
#[utoipa::path(
    post,
    path = "/v1/tenants/{tenant}/grants/{grant}/exchange",
    tag = "scope",
    operation_id = "exchange_grant",
    params(GrantPath),
    request_body = ExchangeBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The token response, once", content_type = "application/json", body = Object),
        (status = 400, description = "Malformed JSON; a replayed, unknown or expired state (`invalid_state`, `state_expired`); the provider refused the code (`exchange_refused`)", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "Missing or invalid token", body = ProblemBody, content_type = "application/problem+json"),
        (status = 403, description = "Role missing", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such grant for this caller", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "A grant started without a resource (`grant_without_resource`): nothing is exchanged", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Invalid body", body = ProblemBody, content_type = "application/problem+json"),
        (status = 502, description = "The token endpoint failed, redirected or answered nonsense", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn exchange_grant(
    State(st): State<ScopeState>,
    scope: TenantScope,
    Path(p): Path<GrantPath>,
    StrictJson(body): StrictJson<ExchangeBody>,
) -> Result<Response, ApiError> {
    scope.require_any(&[Role::Client, Role::Admin])?;
    if !is_grant_id(&p.grant) {
        return Err(grant_not_found());
    }
    let mut errors = Vec::new();
    if body.code.is_empty() || body.code.chars().count() > 4096 {
        errors.push(field("/code", "invalid_code", "1 to 4,096 characters"));
    }
    if body.state.is_empty() || body.state.chars().count() > 512 {
        errors.push(field("/state", "invalid_state", "1 to 512 characters"));
    }
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    let tenant = scope.tenant();
    let grant = st
        .store
        .grant(tenant, &p.grant)
        .await
        .map_err(store_error)?
        .ok_or_else(grant_not_found)?;
    let pr = scope.principal();
    if grant.issuer != pr.issuer || grant.principal != pr.sub {
        return Err(grant_not_found());
    }
    // Every grant started since resources became required names one; a
    // grant from before cannot make the token request the MCP
    // authorization specification requires (its state lives minutes).
    let Some(resource) = grant.resource.clone() else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "grant_without_resource",
            "Grant has no resource",
        )
        .detail(
            "this grant was started without an RFC 8707 resource, which the token request \
             must carry; nothing was exchanged; start a new grant",
        ));
    };
    let taken = st
        .store
        .take_state(tenant, &p.grant, &oauth::state_hash(&body.state))
        .await
        .map_err(store_error)?
        .ok_or_else(invalid_state)?;
    let at = now();
    let finish = |status: GrantStatus, granted: Option<Vec<String>>, error: Option<String>| {
        let kind = if status == GrantStatus::Exchanged {
            "grant.exchanged"
        } else {
            "grant.failed"
        };
        (
            GrantOutcome {
                status,
                granted: granted.clone(),
                error: error.clone(),
                at,
            },
            AuditNote::new(
                kind,
                scope.actor(),
                at,
                json!({"grant": grant.id, "provider": grant.provider, "granted": granted, "error": error}),
            ),
        )
    };
    if at >= taken.expires_at {
        let (o, a) = finish(GrantStatus::Failed, None, Some("state_expired".into()));
        st.store
            .finish_grant(tenant, &grant.id, &o, &a)
            .await
            .map_err(store_error)?;
        return Err(
            ApiError::new(StatusCode::BAD_REQUEST, "state_expired", "State expired").detail(
                "the state of this grant expired; nothing was exchanged; start a new grant",
            ),
        );
    }
    let verifier = st
        .sealer
        .open(tenant, &verifier_context(&grant.id), &taken.verifier_sealed)
        .ok()
        .and_then(|v| String::from_utf8(v).ok())
        .ok_or_else(|| {
            tracing::error!(grant = %grant.id, "a sealed PKCE verifier does not open");
            ApiError::internal()
        })?;
    let row = st
        .store
        .provider(tenant, &grant.provider)
        .await
        .map_err(store_error)?
        .ok_or_else(|| provider_not_ready("profile (it was removed)"))?;
    let out = st.outbound(tenant).await?;
    let client = client_config(&st, &out, tenant, &row, &grant.redirect_uri)?;
    let result = oauth::exchange(&out, &client, &body.code, verifier, &resource).await;
    match result {
        Ok(token) => {
            let granted = oauth::granted_scopes(&token, &grant.requested);
            let (o, a) = finish(GrantStatus::Exchanged, Some(granted), None);
            st.store
                .finish_grant(tenant, &grant.id, &o, &a)
                .await
                .map_err(store_error)?;
            Ok((
                [
                    (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
                    (header::PRAGMA, HeaderValue::from_static("no-cache")),
                ],
                Json(oauth::token_json(&token)),
            )
                .into_response())
        }
        Err(e) => {
            let (code, err) = match &e {
                ExchangeError::Refused { code, description } => {
                    let mut err = ApiError::new(
                        StatusCode::BAD_REQUEST,
                        "exchange_refused",
                        "The authorization server refused the code",
                    )
                    .detail(format!("the token endpoint answered error={code}"))
                    .with("provider_error", code.clone());
                    if let Some(d) = description {
                        err = err.with("provider_error_description", d.clone());
                    }
                    (code.clone(), err)
                }
                ExchangeError::Http(h) => {
                    let code = match h {
                        oauth::HttpError::Redirect(_) => "token_endpoint_redirect",
                        _ => "token_endpoint_unreachable",
                    };
                    (
                        code.to_owned(),
                        ApiError::new(StatusCode::BAD_GATEWAY, code, "Token endpoint failed")
                            .detail(format!("the token endpoint {h}")),
                    )
                }
                ExchangeError::Invalid(m) => (
                    "invalid_token_response".to_owned(),
                    ApiError::new(
                        StatusCode::BAD_GATEWAY,
                        "invalid_token_response",
                        "Token endpoint failed",
                    )
                    .detail(format!(
                        "the token endpoint's answer is not a token response: {m}"
                    )),
                ),
                ExchangeError::Config(m) => {
                    tracing::error!(error = %m, "an OAuth client does not configure");
                    ("client_config".to_owned(), ApiError::internal())
                }
            };
            tracing::warn!(grant = %grant.id, provider = %grant.provider, error = %code, "code exchange failed");
            let (o, a) = finish(GrantStatus::Failed, None, Some(code));
            st.store
                .finish_grant(tenant, &grant.id, &o, &a)
                .await
                .map_err(store_error)?;
            Err(err)
        }
    }
}

/// Read the grant ledger (roles `admin`, `reviewer`), oldest first: each
/// grant's requested, granted and needed scopes, flagged
/// `over_privileged` when what was granted confers more than the need
/// (under the provider's hierarchy), with the `unneeded` scopes.
#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/grants",
    tag = "scope",
    operation_id = "list_grants",
    params(("tenant" = String, Path, description = "Tenant id"), PageQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "A page of the ledger", body = GrantPage),
        (status = 401, description = "Missing or invalid token", body = ProblemBody, content_type = "application/problem+json"),
        (status = 403, description = "Role missing", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such tenant", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Bad query", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn list_grants(
    State(st): State<ScopeState>,
    scope: TenantScope,
    Query(q): Query<PageQuery>,
) -> Result<Json<GrantPage>, ApiError> {
    scope.require_any(&[Role::Admin, Role::Reviewer])?;
    let limit = q.limit()?;
    let after = q.cursor_as(|k| is_grant_id(k).then(|| k.to_owned()))?;
    let tenant = scope.tenant();
    let mut rows = st
        .store
        .grants(tenant, after.as_deref(), limit + 1)
        .await
        .map_err(store_error)?;
    let next_cursor = finish_page(&mut rows, limit, |r| r.id.clone());
    let mut hierarchies: BTreeMap<String, Hierarchy> = BTreeMap::new();
    let mut items = Vec::with_capacity(rows.len());
    for r in &rows {
        if !hierarchies.contains_key(&r.provider) {
            let h = st
                .store
                .provider(tenant, &r.provider)
                .await
                .map_err(store_error)?
                .and_then(|p| p.profile.hierarchy().ok())
                .unwrap_or_else(Hierarchy::flat);
            hierarchies.insert(r.provider.clone(), h);
        }
        items.push(GrantView::new(r, &hierarchies[&r.provider]));
    }
    Ok(Json(GrantPage { items, next_cursor }))
}
