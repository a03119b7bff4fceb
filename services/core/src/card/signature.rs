//! The capability signature (SEP-2091): `tools`, `prompts`, `resources` and
//! `resourceTemplates`, each item validated with its pointer. A tool's
//! annotations may be an array of possibilities, its `_meta` policy hints
//! arrays of possible values; both are normalised here (see
//! [`crate::annotations`]). The same parser reads runtime observations in
//! [`Mode::Observed`], which checks shape only.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use super::fields::{opt_bool, opt_str};
use super::limits::Limits;
use super::schema::check_schema;
use crate::annotations::{Annotations, PolicyHints};
use crate::digest::canonical_bytes;
use crate::error::{ValidationErrors, pointer_index, pointer_push};
use crate::names::is_valid_tool_name;
use crate::uri_template::UriTemplate;

/// Whether a list is a declaration (signature) or an observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// A signature: every rule, including JSON Schema validity and uniqueness.
    Declared,
    /// A runtime observation: shape only.
    Observed,
}

/// How a tool's `annotations` member was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AnnotationsForm {
    /// No `annotations`: one possibility, all defaults.
    Absent,
    /// One object: one fixed behaviour.
    Single,
    /// An array: every possible behaviour (SEP-2091).
    Array,
}

/// One alternative of a tool's `securitySchemes` (SEP-1488 per-tool schemes,
/// the tool-resolution seed's "Dynamic Security Schemes"): any one
/// alternative suffices; an `oauth2` alternative needs all its scopes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum SecurityScheme {
    /// `{"type":"noauth"}`: callable without credentials.
    Noauth,
    /// `{"type":"oauth2","scopes":[...]}`: all listed scopes together.
    Oauth2 {
        /// Required scopes, sorted and de-duplicated.
        scopes: Vec<String>,
    },
    /// Any other scheme type, kept as published.
    #[serde(untagged)]
    Other(Value),
}

/// A tool in a signature (or an observed tool): MCP `Tool` whose
/// `annotations` may be an array of possibilities.
#[derive(Debug, Clone)]
pub struct SignatureTool {
    /// Tool name.
    pub name: String,
    /// Tool-level `title`, if any.
    pub title: Option<String>,
    /// `description`, if any.
    pub description: Option<String>,
    /// `inputSchema` (absent only in partial observations).
    pub input_schema: Option<Value>,
    /// `outputSchema`, if any.
    pub output_schema: Option<Value>,
    /// Normalised annotation possibilities (never empty).
    pub possibilities: Vec<Annotations>,
    /// How `annotations` was written.
    pub annotations_form: AnnotationsForm,
    /// `_meta` policy hints.
    pub policy: PolicyHints,
    /// `securitySchemes` alternatives, when declared.
    pub security_schemes: Option<Vec<SecurityScheme>>,
    /// `resolve` (tool-resolution seed): supports `tools/resolve`.
    pub resolve: bool,
    /// `dynamicAnnotations` (dynamic-annotations seed): supports `tools/annotations`.
    pub dynamic_annotations: bool,
    /// The tool object exactly as given.
    pub raw: Value,
    pub(crate) input_schema_canonical: Option<Vec<u8>>,
}

impl SignatureTool {
    /// Whether the tool can be resolved: `resolve: true` (the tool
    /// resolution seed), or the extension's marker in its `_meta`
    /// (`io.modelcontextprotocol/tool-resolution` with `resolvable: true`,
    /// SEP-1862 "Capability Negotiation").
    pub fn resolvable(&self) -> bool {
        self.resolve
            || self
                .raw
                .get("_meta")
                .and_then(|m| m.get("io.modelcontextprotocol/tool-resolution"))
                .and_then(|x| x.get("resolvable"))
                .and_then(Value::as_bool)
                == Some(true)
    }
}

/// A prompt in a signature or observation.
#[derive(Debug, Clone)]
pub struct Prompt {
    /// Prompt name.
    pub name: String,
    /// The prompt object as given.
    pub raw: Value,
}

/// A resource in a signature or observation.
#[derive(Debug, Clone)]
pub struct Resource {
    /// Resource URI.
    pub uri: String,
    /// The resource object as given.
    pub raw: Value,
}

/// A resource template in a signature or observation.
#[derive(Debug, Clone)]
pub struct ResourceTemplate {
    /// RFC 6570 URI template.
    pub uri_template: String,
    /// The template object as given.
    pub raw: Value,
}

/// The capability signature: everything the server may ever offer.
#[derive(Debug, Clone, Default)]
pub struct Signature {
    /// All possible tools.
    pub tools: Vec<SignatureTool>,
    /// All possible prompts.
    pub prompts: Vec<Prompt>,
    /// All possible static resources.
    pub resources: Vec<Resource>,
    /// All possible resource templates.
    pub resource_templates: Vec<ResourceTemplate>,
    /// Which of the four lists were present.
    pub present: [bool; 4],
}

impl Signature {
    /// The tool with this name.
    pub fn tool(&self, name: &str) -> Option<&SignatureTool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// Tools by name (for repeated lookups).
    pub fn tool_index(&self) -> BTreeMap<&str, &SignatureTool> {
        self.tools.iter().map(|t| (t.name.as_str(), t)).collect()
    }
}

/// Parses a `signature` object (or any object with the four lists) found
/// at `base`.
pub(crate) fn parse_signature(
    sig: &Value,
    base: &str,
    limits: &Limits,
    mode: Mode,
    errors: &mut ValidationErrors,
) -> Signature {
    walk_signature(sig, base, limits, mode, true, errors).0
}

/// Checks a `signature` object found at `base` under every rule of
/// [`parse_signature`] without building its model (no copy of any tool,
/// prompt or resource); returns the number of tools. The publish path.
pub(crate) fn check_signature(
    sig: &Value,
    base: &str,
    limits: &Limits,
    errors: &mut ValidationErrors,
) -> usize {
    walk_signature(sig, base, limits, Mode::Declared, false, errors).1
}

/// One pass over a signature: every rule is checked; the owned model is
/// built only when `build` is set. Returns it (empty unless `build`) and
/// the number of tools with a usable name.
fn walk_signature(
    sig: &Value,
    base: &str,
    limits: &Limits,
    mode: Mode,
    build: bool,
    errors: &mut ValidationErrors,
) -> (Signature, usize) {
    let mut out = Signature::default();
    let mut tools = 0;
    let Some(obj) = sig.as_object() else {
        errors.push(base, "invalid_field", "signature must be an object");
        return (out, tools);
    };
    let keys = ["tools", "prompts", "resources", "resourceTemplates"];
    let mut lists: [&[Value]; 4] = [&[]; 4];
    for (i, key) in keys.iter().enumerate() {
        match obj.get(*key) {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) => {
                out.present[i] = true;
                let max = if i == 0 {
                    limits.max_tools
                } else {
                    limits.max_items
                };
                if a.len() > max {
                    errors.push(
                        pointer_push(base, key),
                        if i == 0 {
                            "too_many_tools"
                        } else {
                            "too_many_items"
                        },
                        format!("{key} has {} entries; the limit is {max}", a.len()),
                    );
                } else {
                    lists[i] = a;
                }
            }
            Some(_) => errors.push(
                pointer_push(base, key),
                "invalid_field",
                format!("{key} must be an array"),
            ),
        }
    }
    if errors.exceeds_limits() {
        return (out, tools);
    }
    let tools_base = pointer_push(base, "tools");
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for (i, t) in lists[0].iter().enumerate() {
        let p = pointer_index(&tools_base, i);
        if let Some(tool) = check_tool(t, &p, limits, mode, errors) {
            if mode == Mode::Declared && !seen.insert(tool.name) {
                errors.push(
                    pointer_push(&p, "name"),
                    "duplicate_name",
                    format!("tool name {:?} is declared twice", tool.name),
                );
            }
            tools += 1;
            if build {
                out.tools.push(tool.into_tool());
            }
        }
    }
    let prompts_base = pointer_push(base, "prompts");
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for (i, pr) in lists[1].iter().enumerate() {
        let p = pointer_index(&prompts_base, i);
        let Some(o) = pr.as_object() else {
            errors.push(p, "invalid_field", "a prompt must be an object");
            continue;
        };
        match o.get("name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() && n.chars().count() <= limits.max_name_chars => {
                if mode == Mode::Declared && !seen.insert(n) {
                    errors.push(
                        pointer_push(&p, "name"),
                        "duplicate_name",
                        format!("prompt name {n:?} is declared twice"),
                    );
                }
                if build {
                    out.prompts.push(Prompt {
                        name: n.to_owned(),
                        raw: pr.clone(),
                    });
                }
            }
            Some(_) => errors.push(
                pointer_push(&p, "name"),
                "invalid_name",
                format!(
                    "prompt name must be 1 to {} characters",
                    limits.max_name_chars
                ),
            ),
            None => errors.push(
                pointer_push(&p, "name"),
                "missing_field",
                "prompt name is required (a string)",
            ),
        }
    }
    let res_base = pointer_push(base, "resources");
    for (i, r) in lists[2].iter().enumerate() {
        let p = pointer_index(&res_base, i);
        match r.get("uri").and_then(Value::as_str) {
            Some(u) if r.is_object() => {
                if build {
                    out.resources.push(Resource {
                        uri: u.to_owned(),
                        raw: r.clone(),
                    });
                }
            }
            _ => errors.push(
                pointer_push(&p, "uri"),
                "missing_field",
                "resource uri is required (a string)",
            ),
        }
    }
    let tpl_base = pointer_push(base, "resourceTemplates");
    for (i, r) in lists[3].iter().enumerate() {
        let p = pointer_index(&tpl_base, i);
        match r.get("uriTemplate").and_then(Value::as_str) {
            Some(u) if r.is_object() => {
                if mode == Mode::Declared {
                    check_uri_template(u, &pointer_push(&p, "uriTemplate"), limits, errors);
                }
                if build {
                    out.resource_templates.push(ResourceTemplate {
                        uri_template: u.to_owned(),
                        raw: r.clone(),
                    });
                }
            }
            _ => errors.push(
                pointer_push(&p, "uriTemplate"),
                "missing_field",
                "resource template uriTemplate is required (a string)",
            ),
        }
    }
    (out, tools)
}

/// Bounds a declared `uriTemplate` (at pointer `p`): its length, and the
/// number of expressions, each of which widens what the template matches.
fn check_uri_template(u: &str, p: &str, limits: &Limits, errors: &mut ValidationErrors) {
    let chars = u.chars().count();
    if chars > limits.max_template_chars {
        errors.push(
            p,
            "uri_template_too_long",
            format!(
                "uriTemplate is {chars} characters long; the limit is {}",
                limits.max_template_chars
            ),
        );
    }
    let expressions = UriTemplate::parse(u).expressions();
    if expressions > limits.max_template_expressions {
        errors.push(
            p,
            "too_many_template_expressions",
            format!(
                "uriTemplate has {expressions} expressions; the limit is {}",
                limits.max_template_expressions
            ),
        );
    }
}

/// Parses one tool at pointer `p`. Returns `None` only when the tool has no
/// usable name.
pub(crate) fn parse_tool(
    t: &Value,
    p: &str,
    limits: &Limits,
    mode: Mode,
    errors: &mut ValidationErrors,
) -> Option<SignatureTool> {
    check_tool(t, p, limits, mode, errors).map(ToolParts::into_tool)
}

/// A tool that passed [`check_tool`], still borrowing the document: the
/// owned [`SignatureTool`] is built from it only when a model is wanted.
struct ToolParts<'a> {
    name: &'a str,
    title: Option<&'a str>,
    description: Option<&'a str>,
    input_schema: Option<&'a Value>,
    output_schema: Option<&'a Value>,
    possibilities: Vec<Annotations>,
    annotations_form: AnnotationsForm,
    policy: PolicyHints,
    security_schemes: Option<Vec<SecurityScheme>>,
    resolve: bool,
    dynamic_annotations: bool,
    raw: &'a Value,
}

impl ToolParts<'_> {
    fn into_tool(self) -> SignatureTool {
        SignatureTool {
            name: self.name.to_owned(),
            title: self.title.map(str::to_owned),
            description: self.description.map(str::to_owned),
            input_schema_canonical: self.input_schema.map(canonical_bytes),
            input_schema: self.input_schema.cloned(),
            output_schema: self.output_schema.cloned(),
            possibilities: self.possibilities,
            annotations_form: self.annotations_form,
            policy: self.policy,
            security_schemes: self.security_schemes,
            resolve: self.resolve,
            dynamic_annotations: self.dynamic_annotations,
            raw: self.raw.clone(),
        }
    }
}

/// Checks one tool at pointer `p` under every rule, copying nothing.
/// Returns `None` only when the tool has no usable name.
fn check_tool<'a>(
    t: &'a Value,
    p: &str,
    limits: &Limits,
    mode: Mode,
    errors: &mut ValidationErrors,
) -> Option<ToolParts<'a>> {
    let Some(o) = t.as_object() else {
        errors.push(p, "invalid_tool", "a tool must be an object");
        return None;
    };
    let name = match o.get("name") {
        Some(Value::String(n)) => {
            if !is_valid_tool_name(n) || n.len() > limits.max_name_chars {
                errors.push(
                    pointer_push(p, "name"),
                    "invalid_tool_name",
                    format!(
                        "tool name must be 1 to {} characters of [A-Za-z0-9_.-]",
                        limits.max_name_chars.min(128)
                    ),
                );
            }
            n.as_str()
        }
        Some(_) => {
            errors.push(
                pointer_push(p, "name"),
                "invalid_tool_name",
                "tool name must be a string",
            );
            return None;
        }
        None => {
            errors.push(
                pointer_push(p, "name"),
                "missing_field",
                "tool name is required",
            );
            return None;
        }
    };
    let title = opt_str(o, "title", p, errors);
    let description = opt_str(o, "description", p, errors);
    let input_schema = match o.get("inputSchema") {
        None => {
            if mode == Mode::Declared {
                errors.push(
                    pointer_push(p, "inputSchema"),
                    "missing_field",
                    "inputSchema is required",
                );
            }
            None
        }
        Some(s) => {
            if mode == Mode::Declared {
                check_schema(
                    s,
                    &pointer_push(p, "inputSchema"),
                    "invalid_input_schema",
                    true,
                    errors,
                );
            }
            Some(s)
        }
    };
    let output_schema = o.get("outputSchema");
    if let Some(s) = output_schema
        && mode == Mode::Declared
    {
        check_schema(
            s,
            &pointer_push(p, "outputSchema"),
            "invalid_output_schema",
            false,
            errors,
        );
    }
    let ap = pointer_push(p, "annotations");
    let (possibilities, annotations_form) = match o.get("annotations") {
        None | Some(Value::Null) => (vec![Annotations::default()], AnnotationsForm::Absent),
        Some(Value::Array(items)) => {
            if items.is_empty() {
                errors.push(
                    &ap,
                    "invalid_annotations",
                    "an annotations array must list at least one possibility",
                );
                (vec![Annotations::default()], AnnotationsForm::Array)
            } else if items.len() > limits.max_possibilities {
                errors.push(
                    &ap,
                    "too_many_possibilities",
                    format!(
                        "{} annotation possibilities; the limit is {}",
                        items.len(),
                        limits.max_possibilities
                    ),
                );
                (vec![Annotations::default()], AnnotationsForm::Array)
            } else {
                let ps = items
                    .iter()
                    .enumerate()
                    .map(|(k, a)| Annotations::parse(a, &pointer_index(&ap, k), errors))
                    .collect();
                (ps, AnnotationsForm::Array)
            }
        }
        Some(a) => (
            vec![Annotations::parse(a, &ap, errors)],
            AnnotationsForm::Single,
        ),
    };
    let meta_ptr = pointer_push(p, "_meta");
    let meta = o.get("_meta");
    if meta.is_some_and(|m| !m.is_object()) {
        errors.push(&meta_ptr, "invalid_field", "_meta must be an object");
    }
    let policy = PolicyHints::parse(meta, &meta_ptr, errors);
    let security_schemes = o
        .get("securitySchemes")
        .map(|s| parse_security_schemes(s, &pointer_push(p, "securitySchemes"), errors));
    let resolve = opt_bool(o, "resolve", p, errors);
    let dynamic_annotations = opt_bool(o, "dynamicAnnotations", p, errors);
    Some(ToolParts {
        name,
        title,
        description,
        input_schema,
        output_schema,
        possibilities,
        annotations_form,
        policy,
        security_schemes,
        resolve,
        dynamic_annotations,
        raw: t,
    })
}

/// Parses a `securitySchemes` array.
pub(crate) fn parse_security_schemes(
    v: &Value,
    p: &str,
    errors: &mut ValidationErrors,
) -> Vec<SecurityScheme> {
    let Some(items) = v.as_array() else {
        errors.push(
            p,
            "invalid_security_scheme",
            "securitySchemes must be an array",
        );
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, s) in items.iter().enumerate() {
        let sp = pointer_index(p, i);
        match s.get("type").and_then(Value::as_str) {
            Some("noauth") => out.push(SecurityScheme::Noauth),
            Some("oauth2") => {
                let mut scopes = Vec::new();
                match s.get("scopes") {
                    None => {}
                    Some(Value::Array(a)) => {
                        for (j, sc) in a.iter().enumerate() {
                            match sc.as_str() {
                                Some(x) if !x.is_empty() => scopes.push(x.to_owned()),
                                _ => errors.push(
                                    pointer_index(&pointer_push(&sp, "scopes"), j),
                                    "invalid_security_scheme",
                                    "a scope must be a non-empty string",
                                ),
                            }
                        }
                    }
                    Some(_) => errors.push(
                        pointer_push(&sp, "scopes"),
                        "invalid_security_scheme",
                        "scopes must be an array",
                    ),
                }
                scopes.sort();
                scopes.dedup();
                out.push(SecurityScheme::Oauth2 { scopes });
            }
            Some(_) => out.push(SecurityScheme::Other(s.clone())),
            None => errors.push(
                pointer_push(&sp, "type"),
                "invalid_security_scheme",
                "a security scheme needs a string type",
            ),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::card::{Limits, ServerCard};
    use serde_json::json;

    fn card(v: Value) -> ServerCard {
        ServerCard::from_value(&v, &Limits::default()).unwrap()
    }

    #[test]
    fn tool_model() {
        let c = card(
            json!({"name": "a.b/c", "version": "1.0.0", "signature": {"tools": [{
                "name": "t", "inputSchema": {"type": "object", "$schema": "http://json-schema.org/draft-07/schema#"},
                "annotations": [{"readOnlyHint": true}, {"destructiveHint": true}],
                "securitySchemes": [{"type": "noauth"}, {"type": "oauth2", "scopes": ["repo", "read:org", "repo"]}, {"type": "apiKey"}],
                "resolve": true, "dynamicAnnotations": false,
                "_meta": {"mcp.dev/effect": ["write", "read"], "other": 1}
            }]}}),
        );
        let t = &c.signature.tools[0];
        assert_eq!(t.possibilities.len(), 2);
        assert_eq!(t.annotations_form, AnnotationsForm::Array);
        assert!(t.resolve && !t.dynamic_annotations);
        assert_eq!(
            t.security_schemes.as_ref().unwrap()[1],
            SecurityScheme::Oauth2 {
                scopes: vec!["read:org".into(), "repo".into()]
            }
        );
        assert_eq!(
            serde_json::to_value(t.security_schemes.as_ref().unwrap()).unwrap(),
            json!([{"type": "noauth"}, {"type": "oauth2", "scopes": ["read:org", "repo"]}, {"type": "apiKey"}])
        );
    }

    #[test]
    fn uri_template_bounds() {
        let doc = |templates: Vec<String>| {
            let items: Vec<Value> = templates
                .into_iter()
                .map(|t| json!({"uriTemplate": t, "name": "t"}))
                .collect();
            json!({"name": "a.b/c", "version": "1.0.0", "signature": {"resourceTemplates": items}})
        };
        let at_limit = format!("x://{}", "{a}/".repeat(32));
        let over = format!("x://{}", "{+a}".repeat(33));
        let long = format!("x://{}", "é".repeat(2045));
        assert_eq!(long.chars().count(), 2049);
        let ok = ServerCard::from_value(&doc(vec![at_limit.clone()]), &Limits::default());
        assert!(ok.is_ok(), "{ok:?}");
        let e = ServerCard::from_value(&doc(vec![at_limit, over, long]), &Limits::default())
            .unwrap_err();
        let found: Vec<_> = e
            .errors
            .iter()
            .map(|e| (e.pointer.as_str(), e.code))
            .collect();
        assert_eq!(
            found,
            [
                (
                    "/signature/resourceTemplates/1/uriTemplate",
                    "too_many_template_expressions"
                ),
                (
                    "/signature/resourceTemplates/2/uriTemplate",
                    "uri_template_too_long"
                ),
            ]
        );
        assert!(!e.exceeds_limits());
        assert!(
            e.errors[0]
                .message
                .contains("33 expressions; the limit is 32")
        );
        // Observations are not held to the bounds: they are compared, not matched.
        let obs =
            json!({"resourceTemplates": [{"uriTemplate": "x://{a}".repeat(40), "name": "t"}]});
        assert!(crate::contain::Observation::from_value(&obs, &Limits::default()).is_ok());
    }
}
