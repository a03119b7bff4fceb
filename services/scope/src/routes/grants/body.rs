//! The request body of `POST .../grants` and its schema: the plan a grant
//! implements ([`PlanInput`]) and the grant itself ([`NewGrantBody`]), written
//! out so that the OpenAPI document states what the handler requires.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::openapi::schema::{
    AdditionalProperties, AllOfBuilder, AnyOfBuilder, ArrayBuilder, ObjectBuilder, OneOfBuilder,
    Schema, SchemaType, Type,
};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};

use crate::model::PROVIDER_NAME_PATTERN;
use crate::planning::scope_token_schema;

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
