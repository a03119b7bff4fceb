//! The published document: a server card with its capability signature.
//!
//! A server card (SEP-1649, extended by SEP-2091 "Extending Server Cards")
//! carries the official registry's `server.json` fields (`name`, `version`,
//! `title`, `description`, `websiteUrl`, `repository`, `remotes`,
//! `packages`, `_meta`, ...) plus an optional `signature` with `tools`,
//! `prompts`, `resources` and `resourceTemplates`: the complete universe of
//! what the server may ever offer (SEP-2091 "Behavioral Requirements").
//!
//! [`ServerCard::from_value`] validates the whole document at once and
//! reports every problem with its JSON pointer ([`ValidationErrors`]). The
//! parsed card keeps the original [`Value`] so that the digest is always
//! taken over exactly what was published; unknown fields are preserved.
//!
//! # Validation rules
//!
//! | where | rule | code |
//! |-------|------|------|
//! | document | canonical size ≤ [`Limits::max_document_bytes`] | `document_too_large` |
//! | document | nesting ≤ [`Limits::max_depth`] | `too_deep` |
//! | `/name` | required; registry server name ([`ServerName`]) | `missing_field`, `invalid_server_name` |
//! | `/version` | required; exact SemVer, no `latest`, no ranges, no build metadata ([`Version`]) | `missing_field`, `invalid_version` |
//! | `/description` | non-empty string, ≤ [`Limits::max_card_description_chars`] | `invalid_field`, `description_empty`, `description_too_long` |
//! | `/title` | string of 1–100 characters | `invalid_field` |
//! | `/websiteUrl`, `/repository/url`, `/remotes/i/url` | `http(s)://` URL | `invalid_url` |
//! | `/packages/i/version` | non-empty, not `latest` | `invalid_package_version` |
//! | `/packages/i/packageArguments/j` | positional needs `value` or `valueHint`; named needs `name` | `invalid_argument` |
//! | `/signature/tools` | ≤ [`Limits::max_tools`] tools | `too_many_tools` |
//! | `/signature/tools/i/name` | 1–128 chars of `[A-Za-z0-9_.-]`, unique | `invalid_tool_name`, `duplicate_name` |
//! | `/signature/tools/i/inputSchema` | required object with `"type": "object"`, valid JSON Schema | `missing_field`, `invalid_input_schema` |
//! | `/signature/tools/i/annotations` | object or non-empty array of ≤ [`Limits::max_possibilities`] objects | `invalid_annotations`, `too_many_possibilities` |
//! | `/signature/tools/i/securitySchemes` | array of `{type, ...}`; `oauth2` scopes are strings | `invalid_security_scheme` |
//! | `/signature/prompts/i/name` | 1–128 chars, unique | `invalid_name`, `duplicate_name` |
//! | `/signature/resources/i/uri`, `/signature/resourceTemplates/i/uriTemplate` | required string | `missing_field` |

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::annotations::{Annotations, PolicyHints};
use crate::digest::{canonical_bytes, digest_bytes};
use crate::error::{ValidationErrors, pointer_index, pointer_push};
use crate::names::{ServerName, Version, is_valid_tool_name};

/// Configurable limits on accepted documents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Maximum canonical size of a document in bytes (default 1 MiB).
    pub max_document_bytes: usize,
    /// Maximum number of tools in a signature (default 2,000).
    pub max_tools: usize,
    /// Maximum number of prompts, resources or templates each (default 2,000).
    pub max_items: usize,
    /// Maximum nesting depth; `{"a":[1]}` is depth 2 (default 64).
    pub max_depth: usize,
    /// Maximum annotation possibilities per tool (default 64).
    pub max_possibilities: usize,
    /// Maximum length of tool and prompt names (default 128).
    pub max_name_chars: usize,
    /// Maximum length of the card's `description` (default 100, as the
    /// official registry's `server.json` schema).
    pub max_card_description_chars: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_document_bytes: 1024 * 1024,
            max_tools: 2000,
            max_items: 2000,
            max_depth: 64,
            max_possibilities: 64,
            max_name_chars: 128,
            max_card_description_chars: 100,
        }
    }
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

/// A validated server card.
#[derive(Debug, Clone)]
pub struct ServerCard {
    /// `name`.
    pub name: ServerName,
    /// `version`.
    pub version: Version,
    /// `title`, if any.
    pub title: Option<String>,
    /// `description`, if any.
    pub description: Option<String>,
    /// `websiteUrl`, if any.
    pub website_url: Option<String>,
    /// `repository`, if any (as given).
    pub repository: Option<Value>,
    /// `remotes` (as given).
    pub remotes: Vec<Value>,
    /// `packages` (as given).
    pub packages: Vec<Value>,
    /// `_meta`, if any.
    pub meta: Option<Map<String, Value>>,
    /// The signature (empty when the card has none).
    pub signature: Signature,
    raw: Value,
    digest: String,
    canonical: Vec<u8>,
}

impl ServerCard {
    /// Validates `doc` as a server card under `limits`; every problem is
    /// reported at once.
    pub fn from_value(doc: &Value, limits: &Limits) -> Result<ServerCard, ValidationErrors> {
        let mut card = Self::parse(doc, limits)?;
        card.raw = doc.clone();
        Ok(card)
    }

    /// As [`ServerCard::from_value`], taking the document by value so it is
    /// kept without a copy (the publish path).
    pub fn from_owned(doc: Value, limits: &Limits) -> Result<ServerCard, ValidationErrors> {
        let mut card = Self::parse(&doc, limits)?;
        card.raw = doc;
        Ok(card)
    }

    fn parse(doc: &Value, limits: &Limits) -> Result<ServerCard, ValidationErrors> {
        let canonical = canonical_bytes(doc);
        if canonical.len() > limits.max_document_bytes {
            return Err(ValidationErrors::single(
                "",
                "document_too_large",
                format!(
                    "document is {} bytes in canonical form; the limit is {}",
                    canonical.len(),
                    limits.max_document_bytes
                ),
            ));
        }
        check_depth(doc, limits.max_depth)?;
        let mut errors = ValidationErrors::new();
        let Some(obj) = doc.as_object() else {
            return Err(ValidationErrors::single(
                "",
                "invalid_document",
                "a server card must be a JSON object",
            ));
        };
        let name = match obj.get("name") {
            None => {
                errors.push("/name", "missing_field", "name is required");
                None
            }
            Some(Value::String(s)) => ServerName::parse(s)
                .map_err(|e| errors.push("/name", "invalid_server_name", e.to_string()))
                .ok(),
            Some(_) => {
                errors.push("/name", "invalid_server_name", "name must be a string");
                None
            }
        };
        let version = match obj.get("version") {
            None => {
                errors.push("/version", "missing_field", "version is required");
                None
            }
            Some(Value::String(s)) => Version::parse(s)
                .map_err(|e| errors.push("/version", "invalid_version", e.to_string()))
                .ok(),
            Some(_) => {
                errors.push("/version", "invalid_version", "version must be a string");
                None
            }
        };
        let description = opt_string(obj, "description", "", &mut errors);
        if description.as_deref().is_some_and(|d| d.trim().is_empty()) {
            // As the official registry's server.json schema (minLength 1).
            errors.push(
                "/description",
                "description_empty",
                "description must not be empty when present",
            );
        }
        if let Some(d) = &description
            && d.chars().count() > limits.max_card_description_chars
        {
            errors.push(
                "/description",
                "description_too_long",
                format!(
                    "description must be at most {} characters",
                    limits.max_card_description_chars
                ),
            );
        }
        let title = opt_string(obj, "title", "", &mut errors);
        if let Some(t) = &title
            && !(1..=100).contains(&t.chars().count())
        {
            errors.push(
                "/title",
                "invalid_field",
                "title must be 1 to 100 characters",
            );
        }
        let website_url = opt_string(obj, "websiteUrl", "", &mut errors);
        if let Some(u) = &website_url {
            check_url(u, "/websiteUrl", &mut errors);
        }
        let repository = obj.get("repository").cloned();
        if let Some(r) = &repository {
            check_repository(r, &mut errors);
        }
        let remotes = opt_array(obj, "remotes", "", &mut errors);
        for (i, r) in remotes.iter().enumerate() {
            check_remote(r, &pointer_index("/remotes", i), &mut errors);
        }
        let packages = opt_array(obj, "packages", "", &mut errors);
        for (i, p) in packages.iter().enumerate() {
            check_package(p, &pointer_index("/packages", i), &mut errors);
        }
        let meta = match obj.get("_meta") {
            None => None,
            Some(Value::Object(m)) => Some(m.clone()),
            Some(_) => {
                errors.push("/_meta", "invalid_field", "_meta must be an object");
                None
            }
        };
        let signature = match obj.get("signature") {
            None => Signature::default(),
            Some(sig) => parse_signature(sig, "/signature", limits, Mode::Declared, &mut errors),
        };
        if errors.exceeds_limits() {
            errors
                .errors
                .retain(|e| crate::error::LIMIT_CODES.contains(&e.code));
        }
        let (Some(name), Some(version)) = (name, version) else {
            return errors.into_result(()).and_then(|_| unreachable_card());
        };
        let card = ServerCard {
            name,
            version,
            title,
            description,
            website_url,
            repository,
            remotes,
            packages,
            meta,
            signature,
            digest: digest_bytes(&canonical),
            canonical,
            raw: Value::Null,
        };
        errors.into_result(card)
    }

    /// The document exactly as published.
    pub fn raw(&self) -> &Value {
        &self.raw
    }

    /// `sha256:<hex>` of the canonical document: the version's identity.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Size of the canonical document in bytes.
    pub fn canonical_len(&self) -> usize {
        self.canonical.len()
    }

    /// The RFC 8785 canonical bytes of the document.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        self.canonical.clone()
    }

    /// The RFC 8785 canonical form, computed once at validation (the bytes
    /// the digest covers).
    pub fn canonical(&self) -> &[u8] {
        &self.canonical
    }
}

fn unreachable_card() -> Result<ServerCard, ValidationErrors> {
    // Only reached when name or version failed, which always pushed an error.
    Err(ValidationErrors::single(
        "",
        "invalid_document",
        "name and version are required",
    ))
}

/// Whether a list is a declaration (signature) or an observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// A signature: every rule, including JSON Schema validity and uniqueness.
    Declared,
    /// A runtime observation: shape only.
    Observed,
}

/// Fails with `too_deep` when `v` nests deeper than `max` containers.
pub fn check_depth(v: &Value, max: usize) -> Result<(), ValidationErrors> {
    /// Returns the path (innermost first) to the first container that is
    /// too deep.
    fn walk(v: &Value, depth: usize, max: usize) -> Option<Vec<String>> {
        let is_container = matches!(v, Value::Array(_) | Value::Object(_));
        if !is_container {
            return None;
        }
        if depth + 1 > max {
            return Some(Vec::new());
        }
        match v {
            Value::Array(a) => a.iter().enumerate().find_map(|(i, x)| {
                walk(x, depth + 1, max).map(|mut p| {
                    p.push(i.to_string());
                    p
                })
            }),
            Value::Object(o) => o.iter().find_map(|(k, x)| {
                walk(x, depth + 1, max).map(|mut p| {
                    p.push(k.clone());
                    p
                })
            }),
            _ => None,
        }
    }
    match walk(v, 0, max) {
        None => Ok(()),
        Some(path) => {
            // The offending container itself is one level above the excess.
            let pointer = path
                .iter()
                .rev()
                .fold(String::new(), |acc, t| pointer_push(&acc, t));
            Err(ValidationErrors::single(
                pointer,
                "too_deep",
                format!("document nests deeper than {max} levels"),
            ))
        }
    }
}

fn opt_string(
    obj: &Map<String, Value>,
    key: &str,
    base: &str,
    errors: &mut ValidationErrors,
) -> Option<String> {
    match obj.get(key) {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            errors.push(
                pointer_push(base, key),
                "invalid_field",
                format!("{key} must be a string"),
            );
            None
        }
    }
}

fn opt_bool(
    obj: &Map<String, Value>,
    key: &str,
    base: &str,
    errors: &mut ValidationErrors,
) -> bool {
    match obj.get(key) {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            errors.push(
                pointer_push(base, key),
                "invalid_field",
                format!("{key} must be a boolean"),
            );
            false
        }
    }
}

fn opt_array(
    obj: &Map<String, Value>,
    key: &str,
    base: &str,
    errors: &mut ValidationErrors,
) -> Vec<Value> {
    match obj.get(key) {
        None => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(_) => {
            errors.push(
                pointer_push(base, key),
                "invalid_field",
                format!("{key} must be an array"),
            );
            Vec::new()
        }
    }
}

fn check_url(u: &str, pointer: &str, errors: &mut ValidationErrors) {
    let rest = u
        .strip_prefix("https://")
        .or_else(|| u.strip_prefix("http://"));
    if !rest.is_some_and(|r| !r.is_empty() && !r.chars().any(char::is_whitespace)) {
        errors.push(
            pointer,
            "invalid_url",
            "must be an http:// or https:// URL without whitespace",
        );
    }
}

fn check_repository(r: &Value, errors: &mut ValidationErrors) {
    let Some(o) = r.as_object() else {
        errors.push(
            "/repository",
            "invalid_field",
            "repository must be an object",
        );
        return;
    };
    for key in ["url", "source"] {
        match o.get(key) {
            Some(Value::String(s)) => {
                if key == "url" {
                    check_url(s, "/repository/url", errors);
                }
            }
            Some(_) => errors.push(
                pointer_push("/repository", key),
                "invalid_field",
                format!("{key} must be a string"),
            ),
            None => errors.push(
                pointer_push("/repository", key),
                "missing_field",
                format!("repository.{key} is required"),
            ),
        }
    }
}

fn check_remote(r: &Value, p: &str, errors: &mut ValidationErrors) {
    let Some(o) = r.as_object() else {
        errors.push(p, "invalid_field", "a remote must be an object");
        return;
    };
    match o.get("type").and_then(Value::as_str) {
        Some("streamable-http" | "sse") => {}
        _ => errors.push(
            pointer_push(p, "type"),
            "invalid_field",
            "remote type must be streamable-http or sse",
        ),
    }
    match o.get("url").and_then(Value::as_str) {
        Some(u) => check_url(u, &pointer_push(p, "url"), errors),
        None => errors.push(
            pointer_push(p, "url"),
            "missing_field",
            "remote url is required",
        ),
    }
}

fn check_package(pkg: &Value, p: &str, errors: &mut ValidationErrors) {
    let Some(o) = pkg.as_object() else {
        errors.push(p, "invalid_field", "a package must be an object");
        return;
    };
    for key in ["registryType", "identifier"] {
        if !o.get(key).is_some_and(Value::is_string) {
            errors.push(
                pointer_push(p, key),
                "missing_field",
                format!("package {key} is required (a string)"),
            );
        }
    }
    if !o
        .get("transport")
        .is_some_and(|t| t.get("type").is_some_and(Value::is_string))
    {
        errors.push(
            pointer_push(p, "transport"),
            "missing_field",
            "package transport with a type is required",
        );
    }
    if let Some(v) = o.get("version") {
        match v.as_str() {
            Some("") | None => errors.push(
                pointer_push(p, "version"),
                "invalid_package_version",
                "package version must be a non-empty string",
            ),
            Some(s) if s.eq_ignore_ascii_case("latest") => errors.push(
                pointer_push(p, "version"),
                "invalid_package_version",
                "package version must be pinned, not 'latest'",
            ),
            Some(_) => {}
        }
    }
    for list in ["packageArguments", "runtimeArguments"] {
        let Some(args) = o.get(list) else { continue };
        let lp = pointer_push(p, list);
        let Some(args) = args.as_array() else {
            errors.push(lp, "invalid_field", format!("{list} must be an array"));
            continue;
        };
        for (j, a) in args.iter().enumerate() {
            let ap = pointer_index(&lp, j);
            match a.get("type").and_then(Value::as_str) {
                Some("positional") => {
                    if a.get("value").is_none() && a.get("valueHint").is_none() {
                        errors.push(
                            ap,
                            "invalid_argument",
                            "a positional argument needs a value or a valueHint",
                        );
                    }
                }
                Some("named") => {
                    if !a.get("name").is_some_and(Value::is_string) {
                        errors.push(ap, "invalid_argument", "a named argument needs a name");
                    }
                }
                _ => errors.push(
                    pointer_push(&ap, "type"),
                    "invalid_argument",
                    "argument type must be positional or named",
                ),
            }
        }
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
    let mut out = Signature::default();
    let Some(obj) = sig.as_object() else {
        errors.push(base, "invalid_field", "signature must be an object");
        return out;
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
        return out;
    }
    let tools_base = pointer_push(base, "tools");
    let mut seen = BTreeSet::new();
    for (i, t) in lists[0].iter().enumerate() {
        let p = pointer_index(&tools_base, i);
        if let Some(tool) = parse_tool(t, &p, limits, mode, errors) {
            if mode == Mode::Declared && !seen.insert(tool.name.clone()) {
                errors.push(
                    pointer_push(&p, "name"),
                    "duplicate_name",
                    format!("tool name {:?} is declared twice", tool.name),
                );
            }
            out.tools.push(tool);
        }
    }
    let prompts_base = pointer_push(base, "prompts");
    let mut seen = BTreeSet::new();
    for (i, pr) in lists[1].iter().enumerate() {
        let p = pointer_index(&prompts_base, i);
        let Some(o) = pr.as_object() else {
            errors.push(p, "invalid_field", "a prompt must be an object");
            continue;
        };
        match o.get("name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() && n.chars().count() <= limits.max_name_chars => {
                if mode == Mode::Declared && !seen.insert(n.to_owned()) {
                    errors.push(
                        pointer_push(&p, "name"),
                        "duplicate_name",
                        format!("prompt name {n:?} is declared twice"),
                    );
                }
                out.prompts.push(Prompt {
                    name: n.to_owned(),
                    raw: pr.clone(),
                });
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
            Some(u) if r.is_object() => out.resources.push(Resource {
                uri: u.to_owned(),
                raw: r.clone(),
            }),
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
            Some(u) if r.is_object() => out.resource_templates.push(ResourceTemplate {
                uri_template: u.to_owned(),
                raw: r.clone(),
            }),
            _ => errors.push(
                pointer_push(&p, "uriTemplate"),
                "missing_field",
                "resource template uriTemplate is required (a string)",
            ),
        }
    }
    out
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
            n.clone()
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
    let title = opt_string(o, "title", p, errors);
    let description = opt_string(o, "description", p, errors);
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
            Some(s.clone())
        }
    };
    let output_schema = o.get("outputSchema").cloned();
    if let Some(s) = &output_schema
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
    let input_schema_canonical = input_schema.as_ref().map(canonical_bytes);
    Some(SignatureTool {
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
        raw: t.clone(),
        input_schema_canonical,
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

const KNOWN_DIALECTS: &[&str] = &[
    "http://json-schema.org/draft-04/schema",
    "http://json-schema.org/draft-06/schema",
    "http://json-schema.org/draft-07/schema",
    "https://json-schema.org/draft/2019-09/schema",
    "https://json-schema.org/draft/2020-12/schema",
];

/// Checks that `s` is a valid JSON Schema object (validated against its
/// meta-schema, never fetching anything remote).
fn check_schema(
    s: &Value,
    p: &str,
    code: &'static str,
    require_object_type: bool,
    errors: &mut ValidationErrors,
) {
    let Some(o) = s.as_object() else {
        errors.push(p, code, "must be a JSON Schema object");
        return;
    };
    if require_object_type && o.get("type").and_then(Value::as_str) != Some("object") {
        errors.push(
            pointer_push(p, "type"),
            code,
            "an inputSchema must have \"type\": \"object\"",
        );
    }
    let dialect = o
        .get("$schema")
        .and_then(Value::as_str)
        .map(|d| d.trim_end_matches('#'));
    let known = dialect.is_none_or(|d| KNOWN_DIALECTS.contains(&d));
    let result = if known {
        jsonschema::meta::validate(s)
    } else {
        // Unknown dialects are checked as 2020-12, MCP's default dialect.
        jsonschema::draft202012::meta::validate(s)
    };
    if let Err(e) = result {
        let at = e.instance_path().to_string();
        errors.push(
            format!("{p}{at}"),
            code,
            format!("not a valid JSON Schema: {e}"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn card(v: Value) -> Result<ServerCard, ValidationErrors> {
        ServerCard::from_value(&v, &Limits::default())
    }

    fn pointers(e: &ValidationErrors) -> Vec<(&str, &str)> {
        e.errors
            .iter()
            .map(|e| (e.pointer.as_str(), e.code))
            .collect()
    }

    #[test]
    fn minimal_card() {
        let c = card(json!({"name": "io.github.user/weather", "version": "1.0.2"})).unwrap();
        assert_eq!(c.name.as_str(), "io.github.user/weather");
        assert!(c.signature.tools.is_empty());
        assert!(crate::digest::is_digest(c.digest()));
    }

    #[test]
    fn all_errors_at_once() {
        let e = card(json!({
            "name": "nope",
            "version": "latest",
            "description": "x".repeat(101),
            "packages": [{"registryType": "npm", "identifier": "x", "version": "latest",
                "transport": {"type": "stdio"}, "packageArguments": [{"type": "positional"}]}],
            "signature": {"tools": [
                {"name": "a", "inputSchema": {"type": "object"}},
                {"name": "a", "inputSchema": {"type": "object"}},
                {"name": "bad name", "inputSchema": {"type": "string"}},
                {"name": "c", "inputSchema": {"type": "object", "properties": 3}, "annotations": []},
                {"name": "d", "inputSchema": {"type": "object"}, "annotations": [{"readOnlyHint": 1}],
                 "securitySchemes": [{"type": "oauth2", "scopes": [1]}]},
                {"name": "e"}
            ], "prompts": [{"name": "p"}, {"name": "p"}], "resources": [{}]}
        }))
        .unwrap_err();
        assert_eq!(
            pointers(&e),
            [
                ("/description", "description_too_long"),
                ("/name", "invalid_server_name"),
                ("/packages/0/packageArguments/0", "invalid_argument"),
                ("/packages/0/version", "invalid_package_version"),
                ("/signature/prompts/1/name", "duplicate_name"),
                ("/signature/resources/0/uri", "missing_field"),
                ("/signature/tools/1/name", "duplicate_name"),
                (
                    "/signature/tools/2/inputSchema/type",
                    "invalid_input_schema"
                ),
                ("/signature/tools/2/name", "invalid_tool_name"),
                ("/signature/tools/3/annotations", "invalid_annotations"),
                (
                    "/signature/tools/3/inputSchema/properties",
                    "invalid_input_schema"
                ),
                (
                    "/signature/tools/4/annotations/0/readOnlyHint",
                    "invalid_hint"
                ),
                (
                    "/signature/tools/4/securitySchemes/0/scopes/0",
                    "invalid_security_scheme"
                ),
                ("/signature/tools/5/inputSchema", "missing_field"),
                ("/version", "invalid_version"),
            ]
        );
    }

    #[test]
    fn limits() {
        let l = Limits {
            max_tools: 1,
            ..Limits::default()
        };
        let t = json!({"name": "a", "inputSchema": {"type": "object"}});
        let doc =
            json!({"name": "a.b/c", "version": "1.0.0", "signature": {"tools": [t.clone(), t]}});
        let e = ServerCard::from_value(&doc, &l).unwrap_err();
        assert_eq!(pointers(&e), [("/signature/tools", "too_many_tools")]);
        assert!(e.exceeds_limits());

        let l = Limits {
            max_document_bytes: 10,
            ..Limits::default()
        };
        let e = ServerCard::from_value(&doc, &l).unwrap_err();
        assert_eq!(pointers(&e), [("", "document_too_large")]);

        let mut deep = json!(1);
        for _ in 0..70 {
            deep = json!([deep]);
        }
        let e = card(json!({"name": "a.b/c", "version": "1.0.0", "x": deep})).unwrap_err();
        assert_eq!(e.errors[0].code, "too_deep");
        assert!(e.errors[0].pointer.starts_with("/x/0/0"));

        let many: Vec<Value> = (0..65).map(|_| json!({})).collect();
        let e = card(
            json!({"name": "a.b/c", "version": "1.0.0", "signature": {"tools": [
            {"name": "a", "inputSchema": {"type": "object"}, "annotations": many}]}}),
        )
        .unwrap_err();
        assert_eq!(
            pointers(&e),
            [("/signature/tools/0/annotations", "too_many_possibilities")]
        );
    }

    #[test]
    fn depth_convention() {
        assert!(check_depth(&json!({"a": [1]}), 2).is_ok());
        assert!(check_depth(&json!({"a": [1]}), 1).is_err());
        assert!(check_depth(&json!(1), 0).is_ok());
    }

    #[test]
    fn tool_model() {
        let c = card(json!({"name": "a.b/c", "version": "1.0.0", "signature": {"tools": [{
            "name": "t", "inputSchema": {"type": "object", "$schema": "http://json-schema.org/draft-07/schema#"},
            "annotations": [{"readOnlyHint": true}, {"destructiveHint": true}],
            "securitySchemes": [{"type": "noauth"}, {"type": "oauth2", "scopes": ["repo", "read:org", "repo"]}, {"type": "apiKey"}],
            "resolve": true, "dynamicAnnotations": false,
            "_meta": {"mcp.dev/effect": ["write", "read"], "other": 1}
        }]}}))
        .unwrap();
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
}
