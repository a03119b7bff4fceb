//! Containment: is a runtime observation within the signature?
//!
//! SEP-2091 "Behavioral Requirements" make the signature the complete
//! universe: list results may return any subset of it, never more, and a
//! tool's runtime annotations must match one declared possibility. An
//! observation — a `tools/list`, `prompts/list`, `resources/list` or
//! `resources/templates/list` result, any object holding some of those
//! lists, or a resolved tool (`{"tool": Tool}` from the tool-resolution
//! seed, the newer `{"resultType": "complete", "name", "annotations",
//! "_meta"}`, or a `tools/annotations` `{"annotations"}` result) — is
//! checked item by item:
//!
//! | check | violation kind | less safe when |
//! |-------|----------------|----------------|
//! | tool name declared | `undeclared_tool` | always |
//! | normalised annotations equal one declared possibility (title ignored) | `annotation_not_declared` | no declared possibility is at least as dangerous on every hint |
//! | `inputSchema` canonically equal to the declared one: always for a list item (one without it differs), only when carried for a resolved tool | `input_schema_changed` | it mirrors an argument into an HTTP header the declared schema does not (`x-mcp-header`, SEP-2243: [`crate::param_headers::added`]); otherwise never (flagged, not ordered) |
//! | `outputSchema` canonically equal: for a list item when either side has one, for a resolved tool only when carried | `output_schema_changed` | never |
//! | each `_meta` `mcp.dev/*` value among the declared values | `policy_hint_not_declared` | more severe than every declared value, or the signature made no claim |
//! | each `securitySchemes` alternative declared | `security_scheme_not_declared` | it needs a scope outside the tool's declared scopes, or is an unknown scheme type |
//! | prompt name declared | `undeclared_prompt` | always |
//! | prompt `arguments` canonically equal | `prompt_arguments_changed` | never |
//! | resource URI declared, or matching a declared template | `undeclared_resource` | always |
//! | resource template declared | `undeclared_resource_template` | always |
//!
//! A list item is a tool as the list serves it, so every row applies to it.
//! A resolution result is checked on the members it carries, and a member
//! it leaves out stands for the declared one: SEP-1862 ("Behavior
//! Requirements", server requirement 4) lets a server change only the
//! annotations of the tool it resolves and keep the rest as listed, and
//! its "Dynamic Security Schemes" examples resolve a tool without its
//! `inputSchema`. So:
//!
//! - `{"tool": Tool}` (SEP-1862 "Response: tools/resolve"): the name, the
//!   annotations, the `_meta` policy hints, and `inputSchema`,
//!   `outputSchema` and `securitySchemes` each only when the tool carries
//!   it;
//! - `{"resultType": "complete", ...}`: the result is read as the tool
//!   itself, under the same rule;
//! - `{"annotations"}` (`tools/annotations`, "Response: tools/annotations"
//!   of the dynamic tool annotations draft): only the annotations and the
//!   `_meta` policy hints, under the requested tool's name; nothing else in
//!   the result is read, so no schema or scheme is compared.
//!
//! Descriptions, titles and instructions may legitimately differ (SEP-2091
//! "Dynamic Metadata Considerations"): they are reported as *notices*
//! (`description_changed`, `title_changed`), as is an observation that
//! omits a declared policy hint (`policy_hint_omitted`). Findings come in
//! document order; pointers point into the observation.
//!
//! # Enforcement modes
//!
//! SEP-2091 "Enforcement Modes": [`Mode::Strict`] (a violation is an
//! error), [`Mode::Permissive`] (served, flagged and logged),
//! [`Mode::Advisory`] (informational only). A [`VerifyReport`] says
//! `conformant: false` whenever there is any violation, whatever the mode;
//! `blocking` is true only in strict mode with violations (the call or
//! result must be refused). The offline CLI exits 1 when
//! [`VerifyReport::fails`]: any violation under strict or permissive, never
//! under advisory.
//!
//! `docs/SEMANTICS.md` (sections 5, 6 and 9) describes containment, the
//! modes and template matching for readers outside the code.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::annotations::{
    META_EFFECT, META_IDEMPOTENT, META_REQUIRES_CONFIRMATION, META_RESULT_SENSITIVITY, exceeds,
};
use crate::card::{
    AnnotationsForm, Limits, Mode as ParseMode, Prompt, Resource, ResourceTemplate, SecurityScheme,
    Signature, SignatureTool, parse_signature, parse_tool,
};
use crate::digest::canonical_bytes;
use crate::error::{ValidationErrors, pointer_index, pointer_push};
use crate::reduce::reduce_annotations;
use crate::uri_template::UriTemplate;
pub use crate::uri_template::template_matches;

/// Enforcement mode (SEP-2091 "Enforcement Modes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Any violation is an error: the observation is refused.
    Strict,
    /// Violations are served but flagged and logged (the default for new tenants).
    #[default]
    Permissive,
    /// Informational only.
    Advisory,
}

impl Mode {
    /// Every mode, strictest first.
    pub const ALL: [Mode; 3] = [Mode::Strict, Mode::Permissive, Mode::Advisory];

    /// The stricter of two modes (strict, then permissive, then advisory).
    pub fn stricter(self, other: Mode) -> Mode {
        let rank = |m: Mode| match m {
            Mode::Strict => 0,
            Mode::Permissive => 1,
            Mode::Advisory => 2,
        };
        if rank(other) < rank(self) {
            other
        } else {
            self
        }
    }

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Strict => "strict",
            Mode::Permissive => "permissive",
            Mode::Advisory => "advisory",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown mode name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown enforcement mode {0:?}: expected strict, permissive or advisory")]
pub struct UnknownMode(pub String);

impl FromStr for Mode {
    type Err = UnknownMode;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "strict" => Ok(Mode::Strict),
            "permissive" => Ok(Mode::Permissive),
            "advisory" => Ok(Mode::Advisory),
            other => Err(UnknownMode(other.to_owned())),
        }
    }
}

/// Machine-readable kind of a violation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationKind {
    /// A tool the signature does not declare.
    UndeclaredTool,
    /// Annotations matching no declared possibility.
    AnnotationNotDeclared,
    /// `inputSchema` differs from the declared one.
    InputSchemaChanged,
    /// `outputSchema` differs from the declared one.
    OutputSchemaChanged,
    /// A `_meta` policy hint value not declared.
    PolicyHintNotDeclared,
    /// A `securitySchemes` alternative not declared.
    SecuritySchemeNotDeclared,
    /// A prompt the signature does not declare.
    UndeclaredPrompt,
    /// Prompt arguments differ from the declared ones.
    PromptArgumentsChanged,
    /// A resource neither declared nor matching a declared template.
    UndeclaredResource,
    /// A resource template the signature does not declare.
    UndeclaredResourceTemplate,
}

impl ViolationKind {
    /// Every kind, in declaration order.
    pub const ALL: [ViolationKind; 10] = [
        ViolationKind::UndeclaredTool,
        ViolationKind::AnnotationNotDeclared,
        ViolationKind::InputSchemaChanged,
        ViolationKind::OutputSchemaChanged,
        ViolationKind::PolicyHintNotDeclared,
        ViolationKind::SecuritySchemeNotDeclared,
        ViolationKind::UndeclaredPrompt,
        ViolationKind::PromptArgumentsChanged,
        ViolationKind::UndeclaredResource,
        ViolationKind::UndeclaredResourceTemplate,
    ];
}

/// Machine-readable kind of a notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeKind {
    /// The description differs from the declared one.
    DescriptionChanged,
    /// The title differs from the declared one.
    TitleChanged,
    /// A declared policy hint is missing from the observation.
    PolicyHintOmitted,
}

impl NoticeKind {
    /// Every kind, in declaration order.
    pub const ALL: [NoticeKind; 3] = [
        NoticeKind::DescriptionChanged,
        NoticeKind::TitleChanged,
        NoticeKind::PolicyHintOmitted,
    ];
}

/// One violation of the signature.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Violation {
    /// What kind of violation.
    pub kind: ViolationKind,
    /// JSON pointer into the observation.
    pub pointer: String,
    /// True when the observation is less safe than anything declared.
    pub less_safe: bool,
    /// One human-readable sentence.
    pub message: String,
    /// The tool, prompt or resource concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The offending observed value (normalised for annotations), when useful.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed: Option<Value>,
}

/// Something that differs but does not violate the signature.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Notice {
    /// What kind of notice.
    pub kind: NoticeKind,
    /// JSON pointer into the observation.
    pub pointer: String,
    /// One human-readable sentence.
    pub message: String,
    /// The tool, prompt or resource concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// The outcome of checking an observation against a signature.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerifyReport {
    /// True when there is no violation (independent of the mode).
    pub conformant: bool,
    /// True only in strict mode with violations: the observation must be refused.
    pub blocking: bool,
    /// The mode the report was made under.
    pub mode: Mode,
    /// Violations, in document order.
    pub violations: Vec<Violation>,
    /// Notices, in document order.
    pub notices: Vec<Notice>,
}

impl VerifyReport {
    fn new(mode: Mode, violations: Vec<Violation>, notices: Vec<Notice>) -> Self {
        let conformant = violations.is_empty();
        Self {
            conformant,
            blocking: mode == Mode::Strict && !conformant,
            mode,
            violations,
            notices,
        }
    }

    /// True when any violation is less safe than the signature.
    pub fn less_safe(&self) -> bool {
        self.violations.iter().any(|v| v.less_safe)
    }

    /// True when a CI check should fail: a violation under strict or
    /// permissive mode (advisory never fails). The CLI exits 1 then.
    pub fn fails(&self) -> bool {
        !self.conformant && self.mode != Mode::Advisory
    }
}

/// An observation, parsed: items with their pointers.
#[derive(Debug, Clone, Default)]
pub struct Observation {
    /// Observed tools: pointer, tool, and whether it is a list item (`true`:
    /// its `inputSchema` is always compared, and its `outputSchema` when
    /// either side has one) rather than a resolved tool (`false`: each
    /// schema is compared only when the tool carries it).
    pub tools: Vec<(String, SignatureTool, bool)>,
    /// Observed prompts with pointers.
    pub prompts: Vec<(String, Prompt)>,
    /// Observed resources with pointers.
    pub resources: Vec<(String, Resource)>,
    /// Observed resource templates with pointers.
    pub resource_templates: Vec<(String, ResourceTemplate)>,
}

impl Observation {
    /// Parses an observation in any accepted shape (see the module docs).
    /// A JSON-RPC response's `result` is unwrapped.
    pub fn from_value(v: &Value, limits: &Limits) -> Result<Self, ValidationErrors> {
        Self::parse(v, "", limits)
    }

    fn parse(v: &Value, base: &str, limits: &Limits) -> Result<Self, ValidationErrors> {
        let Some(obj) = v.as_object() else {
            return Err(ValidationErrors::single(
                base,
                "invalid_observation",
                "an observation must be a JSON object",
            ));
        };
        let mut errors = ValidationErrors::new();
        let mut out = Observation::default();
        let lists = ["tools", "prompts", "resources", "resourceTemplates"];
        if let Some(tool) = obj.get("tool") {
            let p = pointer_push(base, "tool");
            if let Some(t) = parse_tool(tool, &p, limits, ParseMode::Observed, &mut errors) {
                out.tools.push((p, t, false));
            }
        } else if let Some(rt) = obj.get("resultType") {
            if rt.as_str() != Some("complete") {
                errors.push(
                    pointer_push(base, "resultType"),
                    "unsupported_result_type",
                    "only a complete tool-resolution result can be checked",
                );
            } else if let Some(t) = parse_tool(v, base, limits, ParseMode::Observed, &mut errors) {
                out.tools.push((base.to_owned(), t, false));
            }
        } else if lists.iter().any(|k| obj.contains_key(*k)) {
            let sig = parse_signature(v, base, limits, ParseMode::Observed, &mut errors);
            let ptr = |list: &str, i: usize| pointer_index(&pointer_push(base, list), i);
            // Items that failed to parse were reported; the rest keep their index.
            let raw_index = |list: &str, pred: &dyn Fn(&Value) -> bool| -> Vec<usize> {
                obj.get(list)
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .enumerate()
                            .filter(|(_, x)| pred(x))
                            .map(|(i, _)| i)
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let tool_idx = raw_index("tools", &|x| x.get("name").is_some_and(Value::is_string));
            for (t, i) in sig.tools.into_iter().zip(tool_idx) {
                out.tools.push((ptr("tools", i), t, true));
            }
            let prompt_idx = raw_index("prompts", &|x| {
                x.get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| !n.is_empty())
            });
            for (p, i) in sig.prompts.into_iter().zip(prompt_idx) {
                out.prompts.push((ptr("prompts", i), p));
            }
            let res_idx = raw_index("resources", &|x| x.get("uri").is_some_and(Value::is_string));
            for (r, i) in sig.resources.into_iter().zip(res_idx) {
                out.resources.push((ptr("resources", i), r));
            }
            let tpl_idx = raw_index("resourceTemplates", &|x| {
                x.get("uriTemplate").is_some_and(Value::is_string)
            });
            for (r, i) in sig.resource_templates.into_iter().zip(tpl_idx) {
                out.resource_templates
                    .push((ptr("resourceTemplates", i), r));
            }
        } else if let Some(result) = obj.get("result").filter(|r| r.is_object()) {
            return Self::parse(result, &pointer_push(base, "result"), limits);
        } else {
            errors.push(
                base,
                "invalid_observation",
                "expected tools, prompts, resources or resourceTemplates, a {\"tool\"} or a complete resolution result",
            );
        }
        errors.into_result(out)
    }

    /// Parses the result of resolving `tool_name` at runtime: `{"tool": Tool}`
    /// (tool-resolution seed), `{"resultType": "complete", ...}` (the newer
    /// extension) or `{"annotations": ...}` (`tools/annotations`). The tool
    /// is a resolved one, never a list item: a schema is compared only when
    /// it carries one, and from a `tools/annotations` result only
    /// `annotations` and `_meta` are read (see the module docs).
    pub fn from_resolution(
        tool_name: &str,
        v: &Value,
        limits: &Limits,
    ) -> Result<Self, ValidationErrors> {
        let Some(obj) = v.as_object() else {
            return Err(ValidationErrors::single(
                "",
                "invalid_observation",
                "a resolution result must be a JSON object",
            ));
        };
        if obj.contains_key("tool") || obj.contains_key("resultType") {
            let mut o = Self::from_value(v, limits)?;
            for (p, t, _) in &o.tools {
                if t.name != tool_name {
                    return Err(ValidationErrors::single(
                        pointer_push(p, "name"),
                        "tool_name_mismatch",
                        format!(
                            "resolved tool {:?} is not the requested {tool_name:?}",
                            t.name
                        ),
                    ));
                }
            }
            // A resolved tool: each schema is compared only when carried.
            for t in &mut o.tools {
                t.2 = false;
            }
            return Ok(o);
        }
        // tools/annotations: {annotations, _meta?} without a name.
        let mut m: Map<String, Value> = Map::new();
        m.insert("name".into(), Value::String(tool_name.to_owned()));
        for k in ["annotations", "_meta"] {
            if let Some(x) = obj.get(k) {
                m.insert(k.into(), x.clone());
            }
        }
        let mut errors = ValidationErrors::new();
        let t = parse_tool(
            &Value::Object(m),
            "",
            limits,
            ParseMode::Observed,
            &mut errors,
        );
        errors.into_result(Observation {
            tools: t
                .map(|t| vec![(String::new(), t, false)])
                .unwrap_or_default(),
            ..Observation::default()
        })
    }
}

#[derive(Default)]
struct Findings {
    violations: Vec<Violation>,
    notices: Vec<Notice>,
}

impl Findings {
    fn violation(
        &mut self,
        kind: ViolationKind,
        pointer: String,
        less_safe: bool,
        name: &str,
        message: String,
    ) {
        self.violations.push(Violation {
            kind,
            pointer,
            less_safe,
            message,
            name: Some(name.to_owned()),
            observed: None,
        });
    }
    fn notice(&mut self, kind: NoticeKind, pointer: String, name: &str, message: String) {
        self.notices.push(Notice {
            kind,
            pointer,
            message,
            name: Some(name.to_owned()),
        });
    }
}

/// Checks `obs` against `sig` and reports under `mode`.
pub fn check(sig: &Signature, obs: &Observation, mode: Mode) -> VerifyReport {
    let mut f = Findings::default();
    let index = sig.tool_index();
    for (p, t, full) in &obs.tools {
        match index.get(t.name.as_str()) {
            None => f.violation(
                ViolationKind::UndeclaredTool,
                p.clone(),
                true,
                &t.name,
                format!("tool {:?} is not declared in the signature", t.name),
            ),
            Some(d) => check_tool(d, t, p, *full, &mut f),
        }
    }
    for (p, pr) in &obs.prompts {
        match sig.prompts.iter().find(|d| d.name == pr.name) {
            None => f.violation(
                ViolationKind::UndeclaredPrompt,
                p.clone(),
                true,
                &pr.name,
                format!("prompt {:?} is not declared in the signature", pr.name),
            ),
            Some(d) => {
                let args = |v: &Value| {
                    canonical_bytes(v.get("arguments").unwrap_or(&Value::Array(Vec::new())))
                };
                if args(&pr.raw) != args(&d.raw) {
                    f.violation(
                        ViolationKind::PromptArgumentsChanged,
                        pointer_push(p, "arguments"),
                        false,
                        &pr.name,
                        format!(
                            "prompt {:?} arguments differ from the declared ones",
                            pr.name
                        ),
                    );
                }
                text_notices(&pr.raw, &d.raw, p, &pr.name, &mut f);
            }
        }
    }
    // Compiled once: each observed resource may be tried against each.
    let templates: Vec<UriTemplate> = if obs.resources.is_empty() {
        Vec::new()
    } else {
        sig.resource_templates
            .iter()
            .map(|t| UriTemplate::parse(&t.uri_template))
            .collect()
    };
    for (p, r) in &obs.resources {
        if let Some(d) = sig.resources.iter().find(|d| d.uri == r.uri) {
            text_notices(&r.raw, &d.raw, p, &r.uri, &mut f);
        } else if !templates.iter().any(|t| t.matches(&r.uri)) {
            f.violation(
                ViolationKind::UndeclaredResource,
                p.clone(),
                true,
                &r.uri,
                format!(
                    "resource {:?} is neither declared nor matched by a declared template",
                    r.uri
                ),
            );
        }
    }
    for (p, r) in &obs.resource_templates {
        match sig
            .resource_templates
            .iter()
            .find(|d| d.uri_template == r.uri_template)
        {
            Some(d) => text_notices(&r.raw, &d.raw, p, &r.uri_template, &mut f),
            None => f.violation(
                ViolationKind::UndeclaredResourceTemplate,
                p.clone(),
                true,
                &r.uri_template,
                format!(
                    "resource template {:?} is not declared in the signature",
                    r.uri_template
                ),
            ),
        }
    }
    VerifyReport::new(mode, f.violations, f.notices)
}

fn text_notices(obs: &Value, decl: &Value, p: &str, name: &str, f: &mut Findings) {
    for (key, kind) in [
        ("description", NoticeKind::DescriptionChanged),
        ("title", NoticeKind::TitleChanged),
    ] {
        if let Some(o) = obs.get(key)
            && Some(o) != decl.get(key)
        {
            f.notice(
                kind,
                pointer_push(p, key),
                name,
                format!("{key} differs from the signature"),
            );
        }
    }
}

fn check_tool(d: &SignatureTool, t: &SignatureTool, p: &str, full: bool, f: &mut Findings) {
    let name = t.name.as_str();
    // inputSchema
    match (&t.input_schema_canonical, &d.input_schema_canonical) {
        (Some(o), Some(dc)) if o == dc => {}
        (None, _) if !full => {}
        _ => {
            let headers =
                crate::param_headers::added(d.input_schema.as_ref(), t.input_schema.as_ref());
            let message = if headers.is_empty() {
                format!("tool {name:?} inputSchema differs from the declared one")
            } else {
                format!(
                    "tool {name:?} inputSchema differs from the declared one and sends {} in HTTP headers it does not declare",
                    headers
                        .iter()
                        .map(|h| format!("{:?} ({})", h.argument, h.header()))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            f.violation(
                ViolationKind::InputSchemaChanged,
                pointer_push(p, "inputSchema"),
                !headers.is_empty(),
                name,
                message,
            )
        }
    }
    if full || t.output_schema.is_some() {
        let same = match (&t.output_schema, &d.output_schema) {
            (None, None) => true,
            (Some(a), Some(b)) => canonical_bytes(a) == canonical_bytes(b),
            _ => false,
        };
        if !same {
            f.violation(
                ViolationKind::OutputSchemaChanged,
                pointer_push(p, "outputSchema"),
                false,
                name,
                format!("tool {name:?} outputSchema differs from the declared one"),
            );
        }
    }
    // annotations
    let ap = pointer_push(p, "annotations");
    let worst = reduce_annotations(d);
    for (k, obs) in t.possibilities.iter().enumerate() {
        if d.possibilities.iter().any(|x| obs.conforms_to(x)) {
            continue;
        }
        let less_safe = !d
            .possibilities
            .iter()
            .any(|x| obs.at_most_as_dangerous_as(x));
        let worse = obs.more_dangerous_hints(&worst);
        let message = if worse.is_empty() {
            format!(
                "tool {name:?} annotations match none of the {} declared possibilities",
                d.possibilities.len()
            )
        } else {
            format!(
                "tool {name:?} annotations match none of the {} declared possibilities and exceed the worst case on {}",
                d.possibilities.len(),
                worse.join(", ")
            )
        };
        let pointer = if t.annotations_form == AnnotationsForm::Array {
            pointer_index(&ap, k)
        } else {
            ap.clone()
        };
        f.violations.push(Violation {
            kind: ViolationKind::AnnotationNotDeclared,
            pointer,
            less_safe,
            message,
            name: Some(name.to_owned()),
            observed: Some(obs.to_value()),
        });
    }
    // policy hints
    let mp = pointer_push(p, "_meta");
    let (op, dp) = (&t.policy, &d.policy);
    policy_set(
        f,
        &mp,
        name,
        META_EFFECT,
        op.present[0],
        dp.present[0],
        &op.effect,
        &dp.effect,
        |e| e.as_str().into(),
    );
    policy_set(
        f,
        &mp,
        name,
        META_RESULT_SENSITIVITY,
        op.present[1],
        dp.present[1],
        &op.sensitivity,
        &dp.sensitivity,
        |e| e.as_str().into(),
    );
    for (key, obs_vals, decl_vals, dangerous) in [
        (
            META_REQUIRES_CONFIRMATION,
            &op.requires_confirmation,
            &dp.requires_confirmation,
            true,
        ),
        (META_IDEMPOTENT, &op.idempotent, &dp.idempotent, false),
    ] {
        for v in obs_vals {
            if !decl_vals.contains(v) {
                f.violations.push(Violation {
                    kind: ViolationKind::PolicyHintNotDeclared,
                    pointer: pointer_push(&mp, key),
                    less_safe: *v == dangerous,
                    message: format!("tool {name:?} {key} = {v} is not among the declared values"),
                    name: Some(name.to_owned()),
                    observed: Some(Value::Bool(*v)),
                });
            }
        }
    }
    // security schemes
    if let Some(schemes) = &t.security_schemes {
        let declared = d.security_schemes.as_deref().unwrap_or(&[]);
        let envelope: BTreeSet<&str> = declared
            .iter()
            .filter_map(|s| match s {
                SecurityScheme::Oauth2 { scopes } => Some(scopes.iter().map(String::as_str)),
                _ => None,
            })
            .flatten()
            .collect();
        for (i, s) in schemes.iter().enumerate() {
            if declared.contains(s) {
                continue;
            }
            let less_safe = match s {
                SecurityScheme::Noauth => false,
                SecurityScheme::Oauth2 { scopes } => {
                    scopes.iter().any(|x| !envelope.contains(x.as_str()))
                }
                SecurityScheme::Other(_) => true,
            };
            f.violations.push(Violation {
                kind: ViolationKind::SecuritySchemeNotDeclared,
                pointer: pointer_index(&pointer_push(p, "securitySchemes"), i),
                less_safe,
                message: format!(
                    "tool {name:?} security scheme is not among the declared alternatives"
                ),
                name: Some(name.to_owned()),
                observed: serde_json::to_value(s).ok(),
            });
        }
    }
    if let Some(o) = &t.description
        && Some(o) != d.description.as_ref()
    {
        f.notice(
            NoticeKind::DescriptionChanged,
            pointer_push(p, "description"),
            name,
            format!("tool {name:?} description differs from the signature"),
        );
    }
    if let Some(o) = &t.title
        && Some(o) != d.title.as_ref()
    {
        f.notice(
            NoticeKind::TitleChanged,
            pointer_push(p, "title"),
            name,
            format!("tool {name:?} title differs from the signature"),
        );
    }
}

#[allow(clippy::too_many_arguments)]
fn policy_set<T: Ord + Copy>(
    f: &mut Findings,
    mp: &str,
    name: &str,
    key: &str,
    obs_present: bool,
    decl_present: bool,
    obs: &[T],
    decl: &[T],
    show: impl Fn(T) -> Value,
) {
    if !obs_present {
        if decl_present {
            f.notice(
                NoticeKind::PolicyHintOmitted,
                pointer_push(mp, key),
                name,
                format!("tool {name:?} omits the declared {key}"),
            );
        }
        return;
    }
    for v in obs {
        if decl.contains(v) {
            continue;
        }
        let less_safe = decl.is_empty() || exceeds(v, decl);
        f.violations.push(Violation {
            kind: ViolationKind::PolicyHintNotDeclared,
            pointer: pointer_push(mp, key),
            less_safe,
            message: if decl.is_empty() {
                format!(
                    "tool {name:?} claims {key} = {}, which the signature does not declare",
                    show(*v)
                )
            } else {
                format!(
                    "tool {name:?} {key} = {} is not among the declared values",
                    show(*v)
                )
            },
            name: Some(name.to_owned()),
            observed: Some(show(*v)),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::card::ServerCard;
    use serde_json::json;

    fn sig(tools: Value) -> Signature {
        let doc = json!({"name": "a.b/c", "version": "1.0.0", "signature": {
            "tools": tools,
            "prompts": [{"name": "p", "description": "d", "arguments": [{"name": "x"}]}],
            "resources": [{"uri": "file:///a", "name": "a", "description": "A"}],
            "resourceTemplates": [{"uriTemplate": "file:///docs/{name}", "name": "docs"}]
        }});
        ServerCard::from_value(&doc, &Limits::default())
            .unwrap()
            .signature
    }

    fn base_tool() -> Value {
        json!({"name": "t", "description": "d", "title": "T", "inputSchema": {"type": "object"},
            "annotations": [{"readOnlyHint": true, "openWorldHint": false}, {"destructiveHint": false, "openWorldHint": false}],
            "_meta": {"mcp.dev/effect": ["read", "write"], "mcp.dev/resultSensitivity": "internal",
                      "mcp.dev/requiresConfirmation": [false], "mcp.dev/idempotent": [true, false]},
            "securitySchemes": [{"type": "noauth"}, {"type": "oauth2", "scopes": ["repo"]}]})
    }

    fn run(tools: Value, observed: Value) -> VerifyReport {
        let s = sig(json!([base_tool()]));
        let _ = tools;
        let o = Observation::from_value(&observed, &Limits::default()).unwrap();
        check(&s, &o, Mode::Strict)
    }

    fn obs_tool(patch: impl FnOnce(&mut Value)) -> Value {
        let mut t = base_tool();
        t["annotations"] = json!({"readOnlyHint": true, "openWorldHint": false});
        t["_meta"] = json!({"mcp.dev/effect": "read"});
        t["securitySchemes"] = json!([{"type": "noauth"}]);
        patch(&mut t);
        json!({"tools": [t]})
    }

    fn kinds(r: &VerifyReport) -> Vec<(ViolationKind, &str, bool)> {
        r.violations
            .iter()
            .map(|v| (v.kind, v.pointer.as_str(), v.less_safe))
            .collect()
    }

    #[test]
    fn conformant_observation() {
        let r = run(Value::Null, obs_tool(|_| {}));
        assert!(r.conformant && !r.blocking, "{r:?}");
        assert!(
            r.notices
                .iter()
                .any(|n| n.kind == NoticeKind::PolicyHintOmitted)
        );
    }

    #[test]
    fn kind_undeclared_tool() {
        let r = run(Value::Null, obs_tool(|t| t["name"] = json!("other")));
        assert_eq!(
            kinds(&r),
            [(ViolationKind::UndeclaredTool, "/tools/0", true)]
        );
        assert!(r.blocking && r.fails());
    }

    #[test]
    fn kind_annotation_not_declared() {
        // more dangerous than everything declared
        let r = run(
            Value::Null,
            obs_tool(|t| {
                t["annotations"] = json!({"destructiveHint": true, "openWorldHint": false})
            }),
        );
        assert_eq!(
            kinds(&r),
            [(
                ViolationKind::AnnotationNotDeclared,
                "/tools/0/annotations",
                true
            )]
        );
        assert!(r.violations[0].message.contains("destructiveHint"));
        // safer than a declared possibility, but not declared: a violation, not less safe
        let r = run(
            Value::Null,
            obs_tool(
                |t| t["annotations"] = json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}),
            ),
        );
        assert_eq!(
            kinds(&r),
            [(
                ViolationKind::AnnotationNotDeclared,
                "/tools/0/annotations",
                false
            )]
        );
        // the title never decides
        let r = run(
            Value::Null,
            obs_tool(|t| {
                t["annotations"] =
                    json!({"readOnlyHint": true, "openWorldHint": false, "title": "x"})
            }),
        );
        assert!(r.conformant);
    }

    #[test]
    fn kind_input_and_output_schema_changed() {
        let r = run(
            Value::Null,
            obs_tool(|t| {
                t["inputSchema"] = json!({"type": "object", "properties": {}});
                t["outputSchema"] = json!({"type": "object"});
            }),
        );
        assert_eq!(
            kinds(&r),
            [
                (
                    ViolationKind::InputSchemaChanged,
                    "/tools/0/inputSchema",
                    false
                ),
                (
                    ViolationKind::OutputSchemaChanged,
                    "/tools/0/outputSchema",
                    false
                )
            ]
        );
        // canonical comparison: 1 == 1.0
        let r = run(
            Value::Null,
            obs_tool(|t| t["inputSchema"] = json!({"type": "object"})),
        );
        assert!(r.conformant);
    }

    /// SEP-2243: a listed schema that mirrors an argument into an
    /// `Mcp-Param-*` header the declared one does not is less safe (the
    /// rule `diff` classifies `mcp_header_added` by); one that drops an
    /// annotation is flagged, not less safe.
    #[test]
    fn a_schema_adding_an_x_mcp_header_is_less_safe() {
        let r = run(
            Value::Null,
            obs_tool(|t| {
                t["inputSchema"] = json!({"type": "object", "properties": {
                    "path": {"type": "string", "x-mcp-header": "Path"}}})
            }),
        );
        assert_eq!(
            kinds(&r),
            [(
                ViolationKind::InputSchemaChanged,
                "/tools/0/inputSchema",
                true
            )]
        );
        assert!(r.less_safe());
        assert!(
            r.violations[0].message.contains("Mcp-Param-Path"),
            "{}",
            r.violations[0].message
        );
        let declared = ServerCard::from_value(
            &json!({"name": "a.b/c", "version": "1.0.0", "signature": {"tools": [
                {"name": "t", "inputSchema": {"type": "object", "properties": {
                    "path": {"type": "string", "x-mcp-header": "Path"}}}}]}}),
            &Limits::default(),
        )
        .unwrap();
        let obs = Observation::from_value(
            &json!({"tools": [{"name": "t", "inputSchema": {"type": "object", "properties": {
                "path": {"type": "string"}}}}]}),
            &Limits::default(),
        )
        .unwrap();
        let r = check(&declared.signature, &obs, Mode::Strict);
        assert_eq!(
            kinds(&r),
            [(
                ViolationKind::InputSchemaChanged,
                "/tools/0/inputSchema",
                false
            )]
        );
    }

    #[test]
    fn kind_policy_hint_not_declared() {
        let r = run(
            Value::Null,
            obs_tool(|t| {
                t["_meta"] = json!({"mcp.dev/effect": "delete", "mcp.dev/resultSensitivity": "public",
            "mcp.dev/requiresConfirmation": true})
            }),
        );
        assert_eq!(
            kinds(&r),
            [
                (
                    ViolationKind::PolicyHintNotDeclared,
                    "/tools/0/_meta/mcp.dev~1effect",
                    true
                ),
                (
                    ViolationKind::PolicyHintNotDeclared,
                    "/tools/0/_meta/mcp.dev~1resultSensitivity",
                    false
                ),
                (
                    ViolationKind::PolicyHintNotDeclared,
                    "/tools/0/_meta/mcp.dev~1requiresConfirmation",
                    true
                ),
            ]
        );
    }

    #[test]
    fn kind_security_scheme_not_declared() {
        let r = run(
            Value::Null,
            obs_tool(|t| {
                t["securitySchemes"] = json!([
            {"type": "oauth2", "scopes": ["repo"]}, {"type": "oauth2", "scopes": ["admin:org"]}, {"type": "oauth2", "scopes": []}])
            }),
        );
        assert_eq!(
            kinds(&r),
            [
                (
                    ViolationKind::SecuritySchemeNotDeclared,
                    "/tools/0/securitySchemes/1",
                    true
                ),
                (
                    ViolationKind::SecuritySchemeNotDeclared,
                    "/tools/0/securitySchemes/2",
                    false
                ),
            ]
        );
    }

    #[test]
    fn prompts_resources_templates() {
        let r = run(
            Value::Null,
            json!({
                "prompts": [{"name": "p", "description": "changed", "arguments": [{"name": "x"}]},
                            {"name": "p", "arguments": []}, {"name": "q"}],
                "resources": [{"uri": "file:///a", "name": "a"}, {"uri": "file:///docs/readme.md", "name": "r"},
                              {"uri": "file:///docs/sub/dir", "name": "s"}],
                "resourceTemplates": [{"uriTemplate": "file:///docs/{name}", "name": "docs"}, {"uriTemplate": "x://{y}", "name": "y"}]
            }),
        );
        assert_eq!(
            kinds(&r),
            [
                (
                    ViolationKind::PromptArgumentsChanged,
                    "/prompts/1/arguments",
                    false
                ),
                (ViolationKind::UndeclaredPrompt, "/prompts/2", true),
                (ViolationKind::UndeclaredResource, "/resources/2", true),
                (
                    ViolationKind::UndeclaredResourceTemplate,
                    "/resourceTemplates/1",
                    true
                ),
            ]
        );
        assert_eq!(r.notices[0].kind, NoticeKind::DescriptionChanged);
        assert_eq!(r.notices[0].pointer, "/prompts/0/description");
    }

    #[test]
    fn description_and_title_are_notices() {
        let r = run(
            Value::Null,
            obs_tool(|t| {
                t["description"] = json!("other");
                t["title"] = json!("other");
            }),
        );
        assert!(r.conformant);
        let k: Vec<_> = r.notices.iter().map(|n| n.kind).collect();
        assert!(
            k.contains(&NoticeKind::DescriptionChanged) && k.contains(&NoticeKind::TitleChanged)
        );
    }

    #[test]
    fn resolution_shapes() {
        let s = sig(json!([base_tool()]));
        let l = Limits::default();
        let seed = json!({"tool": {"name": "t", "annotations": {"readOnlyHint": true, "openWorldHint": false}}});
        let newer = json!({"resultType": "complete", "name": "t", "annotations": {"destructiveHint": true}});
        let dynamic = json!({"annotations": {"destructiveHint": false, "openWorldHint": false}});
        assert!(
            check(
                &s,
                &Observation::from_resolution("t", &seed, &l).unwrap(),
                Mode::Strict
            )
            .conformant
        );
        let r = check(
            &s,
            &Observation::from_resolution("t", &newer, &l).unwrap(),
            Mode::Strict,
        );
        assert_eq!(
            kinds(&r),
            [(ViolationKind::AnnotationNotDeclared, "/annotations", true)]
        );
        assert!(
            check(
                &s,
                &Observation::from_resolution("t", &dynamic, &l).unwrap(),
                Mode::Strict
            )
            .conformant
        );
        assert!(Observation::from_resolution("u", &seed, &l).is_err());
        assert!(Observation::from_value(&json!({"resultType": "incomplete"}), &l).is_err());
        assert!(Observation::from_value(&json!({"x": 1}), &l).is_err());
        // JSON-RPC envelopes are unwrapped
        let rpc = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "zz", "inputSchema": {"type": "object"}}]}});
        let r = check(
            &s,
            &Observation::from_value(&rpc, &l).unwrap(),
            Mode::Advisory,
        );
        assert_eq!(
            kinds(&r),
            [(ViolationKind::UndeclaredTool, "/result/tools/0", true)]
        );
        assert!(!r.conformant && !r.blocking && !r.fails());
    }

    /// A resolved tool is checked on the members it carries: a schema it
    /// carries is compared, one it leaves out is not, and a
    /// `tools/annotations` result is read for its annotations and `_meta`
    /// only. A list item without `inputSchema` differs.
    #[test]
    fn resolved_tools_are_checked_on_what_they_carry() {
        let s = sig(json!([base_tool()]));
        let l = Limits::default();
        let ann = json!({"readOnlyHint": true, "openWorldHint": false});
        let resolved = |v: Value| {
            check(
                &s,
                &Observation::from_resolution("t", &v, &l).unwrap(),
                Mode::Strict,
            )
        };
        let changed = json!({"type": "object", "properties": {"x": {}}});
        let r = resolved(json!({"tool": {"name": "t", "annotations": ann,
            "inputSchema": changed, "outputSchema": {"type": "object"}}}));
        assert_eq!(
            kinds(&r),
            [
                (
                    ViolationKind::InputSchemaChanged,
                    "/tool/inputSchema",
                    false
                ),
                (
                    ViolationKind::OutputSchemaChanged,
                    "/tool/outputSchema",
                    false
                )
            ]
        );
        let r = resolved(
            json!({"resultType": "complete", "name": "t", "annotations": ann,
            "inputSchema": changed}),
        );
        assert_eq!(
            kinds(&r),
            [(ViolationKind::InputSchemaChanged, "/inputSchema", false)]
        );
        assert!(resolved(json!({"tool": {"name": "t", "annotations": ann}})).conformant);
        assert!(
            resolved(json!({"annotations": ann, "inputSchema": changed,
                "securitySchemes": [{"type": "apiKey"}]}))
            .conformant
        );
        let r = check(
            &s,
            &Observation::from_value(&json!({"tools": [{"name": "t", "annotations": ann}]}), &l)
                .unwrap(),
            Mode::Strict,
        );
        assert_eq!(
            kinds(&r),
            [(
                ViolationKind::InputSchemaChanged,
                "/tools/0/inputSchema",
                false
            )]
        );
    }

    #[test]
    fn modes() {
        assert_eq!("strict".parse::<Mode>().unwrap(), Mode::Strict);
        assert!("STRICT".parse::<Mode>().is_err());
        assert_eq!(
            serde_json::to_value(Mode::Advisory).unwrap(),
            json!("advisory")
        );
        assert_eq!(Mode::default(), Mode::Permissive);
    }

    #[test]
    fn templates() {
        assert!(template_matches("file:///{path}", "file:///a.txt"));
        assert!(!template_matches("file:///{path}", "file:///a/b.txt"));
        assert!(template_matches("file:///{+path}", "file:///a/b.txt"));
        assert!(template_matches("demo://r/{id}/x", "demo://r/12/x"));
        assert!(!template_matches("demo://r/{id}/x", "demo://r/12/y"));
        assert!(template_matches("s://a{?q,page}", "s://a?q=1&page=2"));
        assert!(template_matches("plain", "plain"));
    }
}
