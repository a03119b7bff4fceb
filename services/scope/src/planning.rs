//! The wire shapes of the scope envelope and of a plan, and the glue from
//! published tools and a provider profile to core's planner. No IO.

use std::collections::BTreeMap;

use pinfold_core::card::SecurityScheme;
use pinfold_core::error::pointer_index;
use std::borrow::Cow;

use pinfold_core::scope::{
    self, MAX_SCOPE_LEN, PlanCall, PlanError, SCOPE_TOKEN_PATTERN, Strategy, declared_schemes,
    plan::MAX_PLAN_CALLS, tool_scopes,
};
use pinfold_http::problem::{ApiError, FieldError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::openapi::schema::{
    AdditionalProperties, AllOfBuilder, ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema,
    SchemaType, Type,
};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};

use crate::providers::ProviderView;

/// The most granted scopes a plan request may list.
pub const MAX_GRANTED: usize = 256;

/// The most calls a plan through a resolve session may list (a resolve
/// batch's limit: every call may reach the upstream).
pub const MAX_SESSION_CALLS: usize = 100;

/// Body of `POST /v1/tenants/{tenant}/scopes/plan`: `server` (and
/// `version`) or `session`, and the calls. Its schema is written out
/// ([`PartialSchema`] below) to say that one of the two is required.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanBody {
    /// Provider profile name; may be left out when exactly one provider
    /// lists the server in its `resources`.
    #[serde(default)]
    pub provider: Option<String>,
    /// Server name.
    #[serde(default)]
    pub server: Option<String>,
    /// Exact version or `latest` (the default).
    #[serde(default)]
    pub version: Option<String>,
    /// A resolve session to plan through instead of `server` and
    /// `version`: each call is resolved through the session's resolve
    /// cache, so argument-specific `securitySchemes` from the resolution
    /// count (SEP-1862, "Dynamic Security Schemes"); the server and version
    /// are the session's pinned ones. At most 100 calls.
    #[serde(default)]
    pub session: Option<String>,
    /// The calls to plan for, at most 1,024.
    pub calls: Vec<PlanCallBody>,
    /// Scopes the client's token already holds, at most 256.
    #[serde(default)]
    pub granted: Vec<String>,
}

/// A string member, or `null` (which the body reads as absent).
fn nullable_text(description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .description(Some(description))
}

/// A string member.
fn text() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String)
}

/// A member that is absent or `null`.
fn null() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::Null)
}

/// One RFC 6749 scope token.
pub fn scope_token_schema() -> ObjectBuilder {
    text()
        .min_length(Some(1))
        .max_length(Some(MAX_SCOPE_LEN))
        .pattern(Some(SCOPE_TOKEN_PATTERN))
}

impl PartialSchema for PlanBody {
    /// The members (a closed object), and `oneOf` the two ways to name
    /// what is planned against: `session`, or `server` (with an optional
    /// `version`), never both; `null` reads as absent.
    fn schema() -> RefOr<Schema> {
        let members = ObjectBuilder::new()
            .schema_type(Type::Object)
            .property(
                "provider",
                nullable_text(
                    "Provider profile name; may be left out when exactly one provider lists \
                     the server in its `resources`.",
                ),
            )
            .property(
                "server",
                nullable_text("Server name; give it (and optionally `version`) or `session`."),
            )
            .property(
                "version",
                nullable_text("Exact version or `latest` (the default); only with `server`."),
            )
            .property(
                "session",
                nullable_text(
                    "A resolve session to plan through instead of `server` and `version`: \
                     each call is resolved through the session's resolve cache, so \
                     argument-specific `securitySchemes` from the resolution count (SEP-1862, \
                     \"Dynamic Security Schemes\"); the server and version are the session's \
                     pinned ones. At most 100 calls.",
                ),
            )
            .property(
                "calls",
                ArrayBuilder::new()
                    .items(Ref::from_schema_name("PlanCallBody"))
                    .max_items(Some(MAX_PLAN_CALLS))
                    .description(Some(format!(
                        "The calls to plan for, at most {MAX_PLAN_CALLS} (at most \
                         {MAX_SESSION_CALLS} through a session)."
                    ))),
            )
            .property(
                "granted",
                ArrayBuilder::new()
                    .items(scope_token_schema())
                    .max_items(Some(MAX_GRANTED))
                    .description(Some(format!(
                        "Scopes the client's token already holds (RFC 6749 scope tokens), at \
                         most {MAX_GRANTED}."
                    ))),
            )
            .required("calls")
            .additional_properties(Some(AdditionalProperties::FreeForm(false)));
        let through_session = ObjectBuilder::new()
            .schema_type(Type::Object)
            .title(Some("Through a resolve session"))
            .property("session", text())
            .property("server", null())
            .property("version", null())
            .property(
                "calls",
                ArrayBuilder::new().max_items(Some(MAX_SESSION_CALLS)),
            )
            .required("session");
        let against_version = ObjectBuilder::new()
            .schema_type(Type::Object)
            .title(Some("Against a published version"))
            .property("server", text())
            .property("session", null())
            .required("server");
        AllOfBuilder::new()
            .item(members)
            .item(
                OneOfBuilder::new()
                    .item(through_session)
                    .item(against_version),
            )
            .description(Some(
                "Body of `POST /v1/tenants/{tenant}/scopes/plan`: `server` (and optionally \
                 `version`) or `session`, not both, and the calls.",
            ))
            .examples([json!({"server": "io.github.github/github-mcp-server",
                "version": "1.0.0", "calls": [{"name": "get_teams", "arguments": {"org": "acme"}}],
                "granted": ["repo"]})])
            .into()
    }
}

impl ToSchema for PlanBody {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("PlanBody")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push(("PlanCallBody".into(), PlanCallBody::schema()));
        <PlanCallBody as ToSchema>::schemas(schemas);
    }
}

/// One call of a plan request.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanCallBody {
    /// Tool name.
    pub name: String,
    /// The call's arguments, an object (used when the plan goes through a
    /// session; default `{}`).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub arguments: Option<Value>,
}

/// The choice for one call.
#[derive(Debug, Serialize, ToSchema)]
pub struct CallPlanView {
    /// Tool name.
    pub name: String,
    /// Index of the chosen alternative in the tool's `securitySchemes`
    /// (`null` when the provider's defaults were used).
    pub alternative: Option<usize>,
    /// Scopes the chosen alternative needs.
    pub scopes: Vec<String>,
    /// The chosen alternative is `noauth`.
    pub noauth: bool,
    /// The tool declares no scheme: the provider's default scopes apply.
    pub defaulted: bool,
    /// Why this alternative.
    pub reason: String,
}

/// `_meta` of a plan: the challenge in the form ChatGPT reads from a tool
/// result.
#[derive(Debug, Serialize, ToSchema)]
pub struct PlanMeta {
    /// The `WWW-Authenticate` challenges (none when nothing is missing).
    #[serde(rename = "mcp/www_authenticate")]
    pub www_authenticate: Vec<String>,
}

/// A notice about one call's tool (its two copies of `securitySchemes`
/// disagree, ...).
#[derive(Debug, Serialize, ToSchema)]
pub struct CallNotice {
    /// Index of the call.
    pub call: usize,
    /// Stable code.
    pub code: String,
    /// One sentence.
    pub message: String,
}

/// A least-privilege plan.
#[derive(Debug, Serialize, ToSchema)]
pub struct PlanResponse {
    /// The provider whose hierarchy was used.
    pub provider: String,
    /// Canonical server name.
    pub server: String,
    /// Exact version planned against.
    pub version: String,
    /// `exact` (least privilege proven) or `bounded` (search bound hit).
    #[schema(example = "exact")]
    pub strategy: String,
    /// Per call, in request order.
    pub calls: Vec<CallPlanView>,
    /// Minimal antichain of scopes covering every call.
    pub required: Vec<String>,
    /// `required` minus what `granted` covers: what to ask for.
    pub request: Vec<String>,
    /// The HTTP 403 `WWW-Authenticate` value for a step-up (`null` when
    /// nothing is missing).
    pub www_authenticate: Option<String>,
    /// The same challenge for a tool result.
    #[serde(rename = "_meta")]
    pub meta: PlanMeta,
    /// Notices about the tools' declarations.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<CallNotice>,
}

/// One tool's part of the envelope.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolEnvelope {
    /// The tool declares `securitySchemes` (or its `_meta` copy).
    pub declared: bool,
    /// One alternative is `noauth`.
    pub noauth: bool,
    /// The alternatives as declared.
    #[schema(value_type = Vec<Object>)]
    pub alternatives: Vec<SecurityScheme>,
    /// Every scope any alternative needs, sorted.
    pub scopes: Vec<String>,
    /// Where the schemes were read from: `top_level`, `meta`, `undeclared`.
    pub source: String,
    /// Disagreement between the two copies, if any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<String>,
}

/// The scope envelope of a version, for reviewers.
#[derive(Debug, Serialize, ToSchema)]
pub struct EnvelopeResponse {
    /// Canonical server name.
    pub server: String,
    /// Exact version.
    pub version: String,
    /// Every scope any tool could require, sorted.
    pub scopes: Vec<String>,
    /// Per tool, by name.
    pub tools: BTreeMap<String, ToolEnvelope>,
    /// Tools without schemes (the provider's defaults apply), sorted.
    pub tools_without_schemes: Vec<String>,
}

fn field(pointer: impl Into<String>, code: &str, message: impl Into<String>) -> FieldError {
    FieldError {
        pointer: pointer.into(),
        code: code.into(),
        message: message.into(),
    }
}

fn tool_name(t: &Value) -> Option<&str> {
    t.get("name").and_then(Value::as_str)
}

/// The envelope of a version's tools (per tool and in total).
pub fn envelope(server: &str, version: &str, tools: &[Value]) -> EnvelopeResponse {
    let mut all = std::collections::BTreeSet::new();
    let mut out = BTreeMap::new();
    let mut without = Vec::new();
    for (i, t) in tools.iter().enumerate() {
        let Some(name) = tool_name(t) else { continue };
        let (schemes, source, notices) =
            match declared_schemes(t, &pointer_index("/signature/tools", i)) {
                Ok(d) => (
                    d.schemes,
                    d.source,
                    d.notices.into_iter().map(|n| n.message).collect(),
                ),
                // The stored top-level list always parses (it was validated
                // at publish); only a broken `_meta`-only copy lands here.
                Err(e) => (
                    None,
                    scope::SchemeSource::Undeclared,
                    vec![format!("securitySchemes could not be read: {e}")],
                ),
            };
        let ts = tool_scopes(schemes.as_deref());
        if !ts.declared {
            without.push(name.to_owned());
        }
        all.extend(ts.scopes.iter().cloned());
        out.insert(
            name.to_owned(),
            ToolEnvelope {
                declared: ts.declared,
                noauth: ts.noauth,
                alternatives: ts.alternatives,
                scopes: ts.scopes,
                source: serde_json::to_value(source)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                notices,
            },
        );
    }
    without.sort();
    EnvelopeResponse {
        server: server.to_owned(),
        version: version.to_owned(),
        scopes: all.into_iter().collect(),
        tools: out,
        tools_without_schemes: without,
    }
}

/// The RFC 9728 §3.1 metadata URL of a protected resource: the well-known
/// path inserted between the host and the resource's path. `None` for a
/// URI that is not an absolute http(s) URL without a fragment.
pub fn resource_metadata_url(resource: &str) -> Option<String> {
    let u = url::Url::parse(resource).ok()?;
    if !matches!(u.scheme(), "http" | "https") || u.fragment().is_some() {
        return None;
    }
    let path = u.path().trim_end_matches('/');
    let mut out = u.clone();
    out.set_path(&format!("/.well-known/oauth-protected-resource{path}"));
    Some(out.to_string())
}

/// Checks the parts of a body the planner does not (sizes, the mode).
pub fn check_body(body: &PlanBody) -> Result<(), ApiError> {
    let mut errors = Vec::new();
    if body.calls.len() > MAX_PLAN_CALLS {
        errors.push(field(
            "/calls",
            "too_many_calls",
            format!("at most {MAX_PLAN_CALLS} calls per plan"),
        ));
    }
    if body.granted.len() > MAX_GRANTED {
        errors.push(field(
            "/granted",
            "too_many_scopes",
            format!("at most {MAX_GRANTED} granted scopes"),
        ));
    }
    if body.session.is_some() {
        if body.server.is_some() || body.version.is_some() {
            errors.push(field(
                "/session",
                "session_or_server",
                "give either `session` or `server` (and `version`), not both",
            ));
        }
        if body.calls.len() > MAX_SESSION_CALLS {
            errors.push(field(
                "/calls",
                "too_many_calls",
                format!("at most {MAX_SESSION_CALLS} calls per plan through a session"),
            ));
        }
    } else if body.server.is_none() {
        errors.push(field(
            "/server",
            "required",
            "give `server` (and optionally `version`), or `session`",
        ));
    }
    for (i, c) in body.calls.iter().enumerate() {
        if c.arguments.as_ref().is_some_and(|a| !a.is_object()) {
            errors.push(field(
                pointer_index("/calls", i) + "/arguments",
                "invalid_type",
                "arguments must be a JSON object",
            ));
        }
    }
    for (i, g) in body.granted.iter().enumerate() {
        if scope::check_scope(g).is_err() {
            errors.push(field(
                pointer_index("/granted", i),
                "invalid_scope",
                "a scope is 1 to 256 printable ASCII characters without space, '\"' or '\\' (RFC 6749 §3.3)",
            ));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::validation(errors))
    }
}

/// Plans `body.calls` against a version's `tools` under `provider`.
pub fn plan_version(
    provider: &ProviderView,
    server: &str,
    version: &str,
    tools: &[Value],
    body: &PlanBody,
) -> Result<PlanResponse, ApiError> {
    let by_name: BTreeMap<&str, &Value> = tools
        .iter()
        .filter_map(|t| Some((tool_name(t)?, t)))
        .collect();
    let per_call: Vec<Result<&Value, Vec<FieldError>>> = body
        .calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            by_name.get(c.name.as_str()).copied().ok_or_else(|| {
                vec![field(
                    pointer_index("/calls", i) + "/name",
                    "unknown_tool",
                    format!("{server} {version} has no tool named {:?}", c.name),
                )]
            })
        })
        .collect();
    plan_tools(provider, server, version, &per_call, body)
}

/// Plans `body.calls` through a resolve session: each call's tool is the
/// one the session's resolve cache served for its arguments, so
/// `securitySchemes` narrowed by the resolution are what the planner
/// chooses from (SEP-1862, "Dynamic Security Schemes"); a call the
/// upstream did not resolve plans over the declared worst case the cache
/// served instead. Errors of a call (undeclared tool, arguments outside
/// its `inputSchema`) point below `/calls/{i}`.
pub fn plan_session(
    provider: &ProviderView,
    resolved: &crate::state::SessionResolved,
    body: &PlanBody,
) -> Result<PlanResponse, ApiError> {
    let per_call: Vec<Result<&Value, Vec<FieldError>>> = resolved
        .tools
        .iter()
        .enumerate()
        .map(|(i, r)| match r {
            Ok(t) => Ok(t.as_ref()),
            Err(errs) => Err(errs
                .iter()
                .map(|f| field(pointer_index("/calls", i) + &f.pointer, &f.code, &f.message))
                .collect()),
        })
        .collect();
    plan_tools(
        provider,
        &resolved.server,
        &resolved.version,
        &per_call,
        body,
    )
}

/// Plans `body.calls`, call `i` against `tools[i]`.
fn plan_tools(
    provider: &ProviderView,
    server: &str,
    version: &str,
    tools: &[Result<&Value, Vec<FieldError>>],
    body: &PlanBody,
) -> Result<PlanResponse, ApiError> {
    let mut errors = Vec::new();
    let mut declared = Vec::with_capacity(body.calls.len());
    let mut notices = Vec::new();
    for (i, t) in tools.iter().enumerate() {
        let tool = match t {
            Ok(t) => *t,
            Err(e) => {
                errors.extend(e.iter().cloned());
                continue;
            }
        };
        match declared_schemes(tool, &pointer_index("/calls", i)) {
            Ok(d) => {
                notices.extend(d.notices.iter().map(|n| CallNotice {
                    call: i,
                    code: n.code.to_owned(),
                    message: n.message.clone(),
                }));
                declared.push(d.schemes);
            }
            Err(e) => errors.extend(
                e.errors
                    .into_iter()
                    .map(|f| field(f.pointer, "invalid_security_schemes", f.message)),
            ),
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    let calls: Vec<PlanCall<'_>> = body
        .calls
        .iter()
        .zip(&declared)
        .map(|(c, d)| PlanCall {
            name: &c.name,
            schemes: d.as_deref(),
        })
        .collect();
    let plan = scope::plan(
        &provider.hierarchy,
        &provider.default_scopes,
        &body.granted,
        &calls,
    )
    .map_err(plan_error)?;
    let metadata = provider
        .resources
        .get(server)
        .and_then(|r| resource_metadata_url(r));
    let challenge = plan.www_authenticate(metadata.as_deref());
    Ok(PlanResponse {
        provider: provider.name.clone(),
        server: server.to_owned(),
        version: version.to_owned(),
        strategy: match plan.strategy {
            Strategy::Exact => "exact",
            Strategy::Bounded => "bounded",
        }
        .to_owned(),
        calls: plan
            .calls
            .into_iter()
            .map(|c| CallPlanView {
                name: c.name,
                alternative: c.alternative,
                scopes: c.scopes,
                noauth: c.noauth,
                defaulted: c.defaulted,
                reason: c.reason,
            })
            .collect(),
        required: plan.required,
        request: plan.request,
        meta: PlanMeta {
            www_authenticate: challenge.iter().cloned().collect(),
        },
        www_authenticate: challenge,
        notices,
    })
}

/// A planner error as problem+json (422 with a pointer).
pub fn plan_error(e: PlanError) -> ApiError {
    let f = match &e {
        PlanError::InvalidScope { pointer, .. } => field(pointer.clone(), e.code(), e.to_string()),
        PlanError::Unsatisfiable { call, .. } => {
            field(pointer_index("/calls", *call), e.code(), e.to_string())
        }
        PlanError::TooManyCalls => field("/calls", e.code(), e.to_string()),
    };
    ApiError::validation(vec![f])
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use pinfold_core::scope::Preset;
    use serde_json::json;

    use super::*;

    fn github() -> ProviderView {
        ProviderView {
            name: "github".into(),
            hierarchy: Arc::new(Preset::Github.hierarchy()),
            default_scopes: vec!["read:user".into()],
            resources: BTreeMap::from([(
                "io.github.github/github-mcp-server".into(),
                "https://api.githubcopilot.com/mcp/".into(),
            )]),
        }
    }

    fn tools() -> Vec<Value> {
        vec![
            json!({"name": "get_file_contents", "securitySchemes": [{"type": "noauth"}, {"type": "oauth2", "scopes": ["repo"]}]}),
            json!({"name": "get_teams", "securitySchemes": [{"type": "oauth2", "scopes": ["read:org"]}],
                   "_meta": {"securitySchemes": [{"type": "oauth2", "scopes": ["admin:org"]}]}}),
            json!({"name": "list_gists"}),
            json!({"name": "create_gist", "_meta": {"securitySchemes": [{"type": "oauth2", "scopes": ["gist"]}]}}),
        ]
    }

    fn body(v: Value) -> PlanBody {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn plan_response_shape() {
        let b = body(json!({"server": "x", "calls": [
            {"name": "get_file_contents", "arguments": {}}, {"name": "get_teams"},
            {"name": "list_gists"}, {"name": "create_gist"}], "granted": ["gist"]}));
        check_body(&b).unwrap();
        let p = plan_version(
            &github(),
            "io.github.github/github-mcp-server",
            "1.0.0",
            &tools(),
            &b,
        )
        .unwrap();
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["strategy"], "exact");
        assert_eq!(v["calls"][0]["alternative"], 0);
        assert_eq!(v["calls"][0]["noauth"], true);
        assert_eq!(v["calls"][2]["defaulted"], true);
        assert_eq!(v["calls"][2]["alternative"], Value::Null);
        assert_eq!(v["required"], json!(["gist", "read:org", "read:user"]));
        assert_eq!(v["request"], json!(["read:org", "read:user"]));
        let challenge = "Bearer error=\"insufficient_scope\", scope=\"gist read:org read:user\", resource_metadata=\"https://api.githubcopilot.com/.well-known/oauth-protected-resource/mcp\"";
        assert_eq!(v["www_authenticate"], challenge);
        assert_eq!(v["_meta"]["mcp/www_authenticate"], json!([challenge]));
        assert_eq!(v["notices"][0]["call"], 1);
        assert_eq!(v["notices"][0]["code"], "security_schemes_disagree");
    }

    #[test]
    fn nothing_missing_means_no_challenge() {
        let b = body(
            json!({"server": "x", "calls": [{"name": "get_teams"}], "granted": ["admin:org"]}),
        );
        let p = plan_version(&github(), "s", "1", &tools(), &b).unwrap();
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["request"], json!([]));
        assert_eq!(v["www_authenticate"], Value::Null);
        assert_eq!(v["_meta"]["mcp/www_authenticate"], json!([]));
    }

    #[test]
    fn bad_requests_point_at_the_problem() {
        let b = body(
            json!({"server": "x", "calls": [{"name": "nope"}, {"name": "get_teams"}], "granted": ["a b"]}),
        );
        let e = plan_version(&github(), "s", "1", &tools(), &b).unwrap_err();
        let errs = e.into_errors();
        assert_eq!(errs[0].pointer, "/calls/0/name");
        assert_eq!(errs[0].code, "unknown_tool");
        let b = body(json!({"server": "x", "calls": [{"name": "get_teams"}], "granted": ["a b"]}));
        let errs = plan_version(&github(), "s", "1", &tools(), &b)
            .unwrap_err()
            .into_errors();
        assert_eq!(errs[0].pointer, "/granted/0");
        assert_eq!(errs[0].code, "invalid_scope");
        check_body(&body(json!({"session": "s", "calls": [{"name": "t"}]}))).unwrap();
        let errs = check_body(&body(
            json!({"session": "s", "server": "x", "calls": [{"name": "t", "arguments": 1}]}),
        ))
        .unwrap_err()
        .into_errors();
        assert_eq!(errs[0].code, "session_or_server");
        assert_eq!(errs[1].pointer, "/calls/0/arguments");
        let many: Vec<Value> = (0..=MAX_SESSION_CALLS)
            .map(|_| json!({"name": "t"}))
            .collect();
        let errs = check_body(&body(json!({"session": "s", "calls": many})))
            .unwrap_err()
            .into_errors();
        assert_eq!(errs[0].code, "too_many_calls");
        let errs = check_body(&body(json!({"calls": []})))
            .unwrap_err()
            .into_errors();
        assert_eq!(errs[0].pointer, "/server");
        let many: Vec<Value> = (0..=MAX_PLAN_CALLS).map(|_| json!({"name": "t"})).collect();
        let errs = check_body(&body(json!({"server": "x", "calls": many})))
            .unwrap_err()
            .into_errors();
        assert_eq!(errs[0].code, "too_many_calls");
        assert!(
            serde_json::from_value::<PlanBody>(json!({"server": "x", "calls": [], "extra": 1}))
                .is_err()
        );
    }

    #[test]
    fn envelope_reads_meta_copies() {
        let e = envelope("s", "1", &tools());
        assert_eq!(e.scopes, ["gist", "read:org", "repo"]);
        assert_eq!(e.tools_without_schemes, ["list_gists"]);
        assert_eq!(e.tools["create_gist"].source, "meta");
        assert_eq!(e.tools["get_teams"].source, "top_level");
        assert_eq!(e.tools["get_teams"].notices.len(), 1);
        assert!(e.tools["get_file_contents"].noauth);
    }

    #[test]
    fn metadata_urls() {
        assert_eq!(
            resource_metadata_url("https://mcp.example.com/mcp").as_deref(),
            Some("https://mcp.example.com/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(
            resource_metadata_url("https://mcp.example.com").as_deref(),
            Some("https://mcp.example.com/.well-known/oauth-protected-resource")
        );
        assert_eq!(resource_metadata_url("ftp://x/y"), None);
        assert_eq!(resource_metadata_url("not a url"), None);
    }
}

#[cfg(test)]
mod session_tests {
    use std::sync::Arc;

    use pinfold_core::scope::Preset;
    use serde_json::json;

    use super::*;
    use crate::state::SessionResolved;

    #[test]
    fn session_plans_use_the_resolved_tools_and_point_at_bad_calls() {
        let google = ProviderView {
            name: "google".into(),
            hierarchy: Arc::new(Preset::Google.hierarchy()),
            default_scopes: Vec::new(),
            resources: BTreeMap::new(),
        };
        let b: PlanBody = serde_json::from_value(json!({"session": "s", "calls": [
            {"name": "f", "arguments": {"a": "read"}}, {"name": "f", "arguments": {"a": "delete"}}]}))
        .unwrap();
        let narrowed = |s: &[&str]| {
            Ok(Arc::new(
                json!({"name": "f", "securitySchemes": [{"type": "oauth2", "scopes": s}]}),
            ))
        };
        let resolved = SessionResolved {
            server: "srv".into(),
            version: "1.0.0".into(),
            tools: vec![narrowed(&["r"]), narrowed(&["r", "w"])],
        };
        let v = serde_json::to_value(plan_session(&google, &resolved, &b).unwrap()).unwrap();
        assert_eq!(v["server"], "srv");
        assert_eq!(v["calls"][1]["scopes"], json!(["r", "w"]));
        assert_eq!(v["required"], json!(["r", "w"]));
        let resolved = SessionResolved {
            tools: vec![
                narrowed(&["r"]),
                Err(vec![field("/arguments/a", "invalid_argument", "no")]),
            ],
            ..resolved
        };
        let errs = plan_session(&google, &resolved, &b)
            .unwrap_err()
            .into_errors();
        assert_eq!(errs[0].pointer, "/calls/1/arguments/a");
        assert_eq!(errs[0].code, "invalid_argument");
    }
}
