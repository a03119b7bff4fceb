//! The guard's rules: what an MCP client connected through Pinfold is
//! shown, and what it may call, decided from the pinned signature and what
//! the upstream server lists right now. Messages in, decisions out: no
//! transport, no IO, no clock. The HTTP and stdio transports of the guard
//! service both decide with these functions.
//!
//! # Lists
//!
//! SEP-2091 ("Behavioral Requirements") makes the signature the complete
//! universe of what a server may offer. [`review_tools`] checks an
//! upstream `tools/list` against it with [`crate::contain::check`] and
//! sorts every listed tool into one [`Standing`]:
//!
//! - **reviewed**: declared, and listed within what the signature allows;
//! - **drifted**: declared, but listed with annotations, schemas, policy
//!   hints or security schemes the signature does not allow, or with
//!   another description (a rewritten description is how a reviewed tool
//!   is turned against its users: the reviewer approved the words the
//!   model reads);
//! - **undeclared**: not in the signature at all.
//!
//! A different title, or a policy hint left out, is noted but is no drift:
//! the client is shown the reviewed tool either way.
//!
//! What the client is shown (SEP-2091 "Enforcement Modes" for the three
//! modes): a reviewed tool as the signature's worst case (reduced
//! annotations, reviewed description and schemas); under `strict` a
//! drifted or undeclared tool is withheld; under `permissive` a drifted
//! tool is shown as reviewed and an undeclared one as the upstream lists
//! it, both flagged in `_meta` under [`GUARD_META`]; under `advisory` the
//! same, unflagged. A declared tool the upstream does not list is not
//! shown: the guard never offers what the server does not.
//!
//! The tool-resolution marker (SEP-1862 "Capability Negotiation": the
//! `resolvable` flag in a tool's `_meta`) is shown only to a client that
//! advertised the extension, on the tools the signature makes resolvable.
//! Members that exist only in a signature (`resolve`,
//! `dynamicAnnotations`) are never shown.
//!
//! # Calls
//!
//! [`ToolsReview::call`] refuses, before anything reaches the upstream, a
//! call to a tool that is not shown (undeclared or drifted under strict,
//! or not listed), with a JSON-RPC error of code [`REFUSED`] and a
//! [`Reason`] in its `data`. The route's [`CallsPolicy`] is decided on the
//! call's own annotations ([`GuardedTool::check_policy`]): the worst case
//! of a static tool, the resolution of a resolvable one; a refusal by
//! policy, like arguments that do not match the reviewed schema, is a tool
//! execution error (`isError: true`) so the model can correct itself, as
//! SEP-1303 (final in the 2025-11-25 revision) asks of input validation.
//!
//! # Error codes
//!
//! JSON-RPC leaves −32000…−32099 to implementations; MCP uses none of
//! −32000…−32019, and the 2026-07-28 revision reserves −32020…−32099. The
//! guard's codes are in the free part and differ from the −32602 an
//! upstream answers for a tool it does not know:
//!
//! | code | constant | meaning |
//! |------|----------|---------|
//! | −32010 | [`REFUSED`] | refused by the guard; `data.reason` says why |
//! | −32011 | [`NOT_READY`] | the route has no approved version to enforce |
//! | −32012 | [`UPSTREAM_UNAVAILABLE`] | the upstream could not be reached or did not answer in time |

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::annotations::Annotations;
use crate::card::{Limits, Signature, SignatureTool};
use crate::contain::{self, Mode, NoticeKind, Observation, ViolationKind};
use crate::diff::{Class, violation_class};
use crate::digest::digest;
use crate::error::ValidationErrors;
use crate::reduce::{reduce_annotations, reduce_tool};

/// A call, prompt or resource refused by the guard (`data.reason` says why).
pub const REFUSED: i64 = -32010;
/// The route has no approved version the guard could enforce.
pub const NOT_READY: i64 = -32011;
/// The upstream could not be reached, or did not answer in time.
pub const UPSTREAM_UNAVAILABLE: i64 = -32012;

/// The `_meta` key under which a tool shown despite a drift is flagged
/// (`permissive` mode).
pub const GUARD_META: &str = "io.github.pinfold/guard";

/// The prefix of Pinfold's own `_meta` keys.
pub const PINFOLD_META_PREFIX: &str = "io.github.pinfold/";

/// The tool-resolution extension's `_meta` key (SEP-1862).
pub const TOOL_RESOLUTION: &str = "io.modelcontextprotocol/tool-resolution";

/// Which calls a route lets through, decided on each call's annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallsPolicy {
    /// Every call the signature allows.
    #[default]
    All,
    /// Calls whose annotations are not destructive.
    NonDestructive,
    /// Calls whose annotations are read-only.
    ReadOnly,
}

impl CallsPolicy {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CallsPolicy::All => "all",
            CallsPolicy::NonDestructive => "non_destructive",
            CallsPolicy::ReadOnly => "read_only",
        }
    }

    /// Whether a call with these (normalised) annotations may go through.
    pub fn allows(self, a: &Annotations) -> bool {
        match self {
            CallsPolicy::All => true,
            CallsPolicy::NonDestructive => !a.destructive,
            CallsPolicy::ReadOnly => a.read_only,
        }
    }
}

impl fmt::Display for CallsPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `calls` value that is none of the three.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownCallsPolicy(pub String);

impl fmt::Display for UnknownCallsPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown calls policy {:?} (expected all, non_destructive or read_only)",
            self.0
        )
    }
}

impl std::error::Error for UnknownCallsPolicy {}

impl FromStr for CallsPolicy {
    type Err = UnknownCallsPolicy;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "all" => Ok(CallsPolicy::All),
            "non_destructive" => Ok(CallsPolicy::NonDestructive),
            "read_only" => Ok(CallsPolicy::ReadOnly),
            other => Err(UnknownCallsPolicy(other.to_owned())),
        }
    }
}

/// Where a listed tool stands against the signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// Declared and listed within what the signature allows.
    Reviewed,
    /// Declared, but listed outside what the signature allows.
    Drifted,
    /// Not declared in the signature.
    Undeclared,
}

/// One way a listed tool leaves what the signature allows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DriftChange {
    /// The containment kind (`annotation_not_declared`, ...), or
    /// `description_changed`.
    pub kind: &'static str,
    /// How it affects what the server may do, as `diff` classifies it.
    pub class: Class,
    /// JSON pointer into the upstream's list result.
    pub pointer: String,
    /// One sentence.
    pub message: String,
}

/// A tool that drifted or is undeclared: what an audit event records.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Drift {
    /// The tool's name.
    pub tool: String,
    /// Drifted or undeclared.
    pub standing: Standing,
    /// The most serious of its changes.
    pub class: Class,
    /// Whether the client is kept from it (strict).
    pub withheld: bool,
    /// Each change, in list order.
    pub changes: Vec<DriftChange>,
}

/// Why the guard refused a request (`data.reason` of a [`REFUSED`] error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// The tool is not in the reviewed signature.
    Undeclared,
    /// The tool is listed outside what the signature allows (strict).
    Drifted,
    /// The tool is declared, but the upstream does not list it now.
    NotListed,
    /// The prompt is not in the reviewed signature (strict).
    UndeclaredPrompt,
    /// The resource is neither declared nor matched by a declared
    /// template (strict).
    UndeclaredResource,
}

impl Reason {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Undeclared => "undeclared",
            Reason::Drifted => "drifted",
            Reason::NotListed => "not_listed",
            Reason::UndeclaredPrompt => "undeclared_prompt",
            Reason::UndeclaredResource => "undeclared_resource",
        }
    }
}

/// A request refused before it reached the upstream.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Refusal {
    /// Why.
    pub reason: Reason,
    /// The tool or prompt name, or the resource URI.
    pub subject: String,
    /// One sentence for the client.
    pub message: String,
    /// For a drifted tool, what changed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<DriftChange>,
}

impl Refusal {
    /// The JSON-RPC `error` object: code [`REFUSED`], `data` with the
    /// reason, the subject and, for a drifted tool, the kinds of change.
    pub fn to_error(&self) -> Value {
        let mut data = Map::new();
        data.insert("reason".into(), json!(self.reason.as_str()));
        data.insert("subject".into(), json!(self.subject));
        if !self.changes.is_empty() {
            let kinds: Vec<&str> = self.changes.iter().map(|c| c.kind).collect();
            data.insert("changes".into(), json!(kinds));
        }
        json!({"code": REFUSED, "message": self.message, "data": data})
    }
}

/// One tool the upstream lists, as the guard sees it.
#[derive(Debug, Clone)]
pub struct GuardedTool {
    name: String,
    standing: Standing,
    /// Whether the client is shown it (and may call it).
    shown: bool,
    /// Resolvable per the signature (its calls are decided on their
    /// resolution).
    resolvable: bool,
    /// What the client is shown, without the tool-resolution marker.
    view: Value,
    /// The annotations a call is decided on when there is no resolution:
    /// the signature's worst case, or, for an undeclared tool, the
    /// protocol's defaults (destructive, open world), never what the
    /// upstream claims.
    worst: Annotations,
    changes: Vec<DriftChange>,
}

impl GuardedTool {
    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where it stands against the signature.
    pub fn standing(&self) -> Standing {
        self.standing
    }

    /// Whether the signature makes it resolvable.
    pub fn resolvable(&self) -> bool {
        self.resolvable
    }

    /// The annotations a call is decided on without a resolution.
    pub fn worst_case(&self) -> &Annotations {
        &self.worst
    }

    /// Decides the route's policy for one call: on `resolved` (the call's
    /// resolution, when the tool is resolvable and the resolution is
    /// within the signature), else on the worst case. A refusal is the
    /// tool execution error to answer with.
    pub fn check_policy(
        &self,
        policy: CallsPolicy,
        resolved: Option<&Annotations>,
    ) -> Result<(), Value> {
        let a = resolved.unwrap_or(&self.worst);
        if policy.allows(a) {
            return Ok(());
        }
        let what = match policy {
            CallsPolicy::ReadOnly => "not read-only",
            _ => "destructive",
        };
        let basis = if resolved.is_some() {
            "as resolved for these arguments"
        } else {
            "in the reviewed worst case"
        };
        Err(tool_error(format!(
            "Refused by Pinfold: this route's calls policy is {policy}, and {:?} is {what} {basis}. \
             The call was not sent to the server.",
            self.name
        )))
    }
}

/// An upstream `tools/list` reviewed against the signature.
#[derive(Debug, Clone)]
pub struct ToolsReview {
    mode: Mode,
    upstream_digest: String,
    tools: Vec<GuardedTool>,
    index: HashMap<String, usize>,
    /// Declared tools the upstream does not list.
    unlisted: Vec<String>,
}

/// Reviews an upstream `tools/list` result (`{"tools": [...]}`, every
/// page gathered) against `signature` under `mode`. Fails only when the
/// result is not a list of tools at all (or breaks `limits`).
pub fn review_tools(
    signature: &Signature,
    upstream: &Value,
    mode: Mode,
    limits: &Limits,
) -> Result<ToolsReview, ValidationErrors> {
    let Some(listed) = upstream.get("tools").and_then(Value::as_array) else {
        return Err(ValidationErrors::single(
            "/tools",
            "invalid_tools_list",
            "a tools/list result must carry a tools array",
        ));
    };
    let observed = Observation::from_value(&json!({ "tools": listed }), limits)?;
    let report = contain::check(signature, &observed, Mode::Advisory);

    // A tool that resolves its annotations per call is listed with its
    // worst case (SEP-1862 and the dynamic-annotations draft: a client
    // that does not resolve sees the most conservative profile), which
    // need not be one of its declared possibilities: listed so, it is
    // within the signature.
    let declared = signature.tool_index();
    let listed_worst_case: std::collections::HashSet<&str> = observed
        .tools
        .iter()
        .filter(|(_, t, _)| {
            declared.get(t.name.as_str()).is_some_and(|d| {
                (d.resolvable() || d.dynamic_annotations) && {
                    let worst = reduce_annotations(d);
                    t.possibilities.iter().all(|p| p.conforms_to(&worst))
                }
            })
        })
        .map(|(_, t, _)| t.name.as_str())
        .collect();

    // Findings by tool name, in list order.
    let mut changes: HashMap<&str, Vec<DriftChange>> = HashMap::new();
    for v in &report.violations {
        let Some(name) = v.name.as_deref() else {
            continue;
        };
        if v.kind == ViolationKind::UndeclaredTool
            || (v.kind == ViolationKind::AnnotationNotDeclared && listed_worst_case.contains(name))
        {
            continue;
        }
        changes.entry(name).or_default().push(DriftChange {
            kind: violation_kind_str(v.kind),
            class: violation_class(v.less_safe),
            pointer: v.pointer.clone(),
            message: v.message.clone(),
        });
    }
    for n in &report.notices {
        let (Some(name), NoticeKind::DescriptionChanged) = (n.name.as_deref(), n.kind) else {
            continue;
        };
        changes.entry(name).or_default().push(DriftChange {
            kind: "description_changed",
            class: Class::Incompatible,
            pointer: n.pointer.clone(),
            message: format!("tool {name:?} description differs from the reviewed one"),
        });
    }

    let mut tools = Vec::with_capacity(listed.len());
    let mut index = HashMap::with_capacity(listed.len());
    for (i, (_, t, _)) in observed.tools.iter().enumerate() {
        if index.contains_key(&t.name) {
            // A name listed twice: the first one stands.
            continue;
        }
        let tool = match declared.get(t.name.as_str()) {
            Some(d) => {
                let found = changes.remove(t.name.as_str()).unwrap_or_default();
                let standing = if found.is_empty() {
                    Standing::Reviewed
                } else {
                    Standing::Drifted
                };
                guarded_declared(d, standing, found, mode)
            }
            None => guarded_undeclared(&listed[i], t, mode),
        };
        index.insert(tool.name.clone(), tools.len());
        tools.push(tool);
    }
    let unlisted = signature
        .tools
        .iter()
        .filter(|d| !index.contains_key(&d.name))
        .map(|d| d.name.clone())
        .collect();
    Ok(ToolsReview {
        mode,
        upstream_digest: list_digest(listed),
        tools,
        index,
        unlisted,
    })
}

impl ToolsReview {
    /// The mode the review was made under.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The digest of the upstream's list (its tools in name order, each
    /// canonical), so that one drift is recorded once however often the
    /// same list is fetched.
    pub fn upstream_digest(&self) -> &str {
        &self.upstream_digest
    }

    /// Every listed tool, in list order.
    pub fn tools(&self) -> &[GuardedTool] {
        &self.tools
    }

    /// Declared tools the upstream does not list.
    pub fn unlisted(&self) -> &[String] {
        &self.unlisted
    }

    /// The drifted and undeclared tools, in list order.
    pub fn drifts(&self) -> Vec<Drift> {
        self.tools
            .iter()
            .filter(|t| t.standing != Standing::Reviewed)
            .map(|t| Drift {
                tool: t.name.clone(),
                standing: t.standing,
                class: t
                    .changes
                    .iter()
                    .map(|c| c.class)
                    .max()
                    .unwrap_or(Class::Escalation),
                withheld: !t.shown,
                changes: t.changes.clone(),
            })
            .collect()
    }

    /// The `tools/list` result the client is shown: `{"tools": [...]}`,
    /// with the tool-resolution marker on resolvable tools when the
    /// client advertised the extension.
    pub fn list_result(&self, resolution_extension: bool) -> Value {
        let tools: Vec<Value> = self
            .tools
            .iter()
            .filter(|t| t.shown)
            .map(|t| {
                if resolution_extension && t.resolvable {
                    with_marker(&t.view)
                } else {
                    t.view.clone()
                }
            })
            .collect();
        json!({ "tools": tools })
    }

    /// Decides whether a `tools/call` of `name` may go upstream: the tool
    /// as guarded, or the refusal to answer with.
    pub fn call(&self, name: &str) -> Result<&GuardedTool, Refusal> {
        match self.index.get(name).map(|&i| &self.tools[i]) {
            Some(t) if t.shown => Ok(t),
            Some(t) if t.standing == Standing::Drifted => Err(Refusal {
                reason: Reason::Drifted,
                subject: name.to_owned(),
                message: format!(
                    "Refused by Pinfold: the server lists {name:?} differently from the reviewed \
                     version ({}), so it is withheld until a new version is approved.",
                    t.changes
                        .iter()
                        .map(|c| c.kind)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                changes: t.changes.clone(),
            }),
            Some(_) => Err(undeclared(name)),
            None if self.unlisted.iter().any(|n| n == name) => Err(Refusal {
                reason: Reason::NotListed,
                subject: name.to_owned(),
                message: format!(
                    "Refused by Pinfold: {name:?} is reviewed, but the server does not list it now."
                ),
                changes: Vec::new(),
            }),
            None => Err(undeclared(name)),
        }
    }
}

fn undeclared(name: &str) -> Refusal {
    Refusal {
        reason: Reason::Undeclared,
        subject: name.to_owned(),
        message: format!("Refused by Pinfold: {name:?} is not a tool of the reviewed version."),
        changes: Vec::new(),
    }
}

/// A declared tool as guarded: shown as its worst case unless drifted
/// under strict.
fn guarded_declared(
    d: &SignatureTool,
    standing: Standing,
    changes: Vec<DriftChange>,
    mode: Mode,
) -> GuardedTool {
    let shown = standing == Standing::Reviewed || mode != Mode::Strict;
    let mut view = reduce_tool(d);
    if let Some(obj) = view.as_object_mut() {
        obj.remove("resolve");
        obj.remove("dynamicAnnotations");
        strip_marker(obj);
        if standing == Standing::Drifted && mode == Mode::Permissive {
            flag(obj, standing, &changes);
        }
    }
    GuardedTool {
        name: d.name.clone(),
        standing,
        shown,
        resolvable: d.resolvable(),
        view,
        worst: reduce_annotations(d),
        changes,
    }
}

/// A tool the signature does not declare: withheld under strict, else
/// shown as the upstream lists it (flagged under permissive), its calls
/// decided on the protocol's defaults.
fn guarded_undeclared(raw: &Value, t: &SignatureTool, mode: Mode) -> GuardedTool {
    let mut view = raw.clone();
    if let Some(obj) = view.as_object_mut() {
        strip_marker(obj);
        if mode == Mode::Permissive {
            flag(obj, Standing::Undeclared, &[]);
        }
    }
    GuardedTool {
        name: t.name.clone(),
        standing: Standing::Undeclared,
        shown: mode != Mode::Strict,
        resolvable: false,
        view,
        worst: Annotations::default(),
        changes: vec![DriftChange {
            kind: "undeclared_tool",
            class: Class::Escalation,
            pointer: String::new(),
            message: format!("tool {:?} is not declared in the signature", t.name),
        }],
    }
}

/// Takes out of an item's `_meta` what only the guard may say: the
/// tool-resolution marker (put back for the client of the extension on
/// the tools the signature makes resolvable) and every key under
/// Pinfold's prefix (a server must not pass its tools off as reviewed).
fn strip_marker(obj: &mut Map<String, Value>) {
    let empty = match obj.get_mut("_meta") {
        Some(Value::Object(meta)) => {
            meta.retain(|k, _| k != TOOL_RESOLUTION && !k.starts_with(PINFOLD_META_PREFIX));
            meta.is_empty()
        }
        _ => false,
    };
    if empty {
        obj.remove("_meta");
    }
}

/// Takes every key under Pinfold's prefix out of an item's `_meta`.
fn strip_ours(obj: &mut Map<String, Value>) {
    let empty = match obj.get_mut("_meta") {
        Some(Value::Object(meta)) => {
            meta.retain(|k, _| !k.starts_with(PINFOLD_META_PREFIX));
            meta.is_empty()
        }
        _ => false,
    };
    if empty {
        obj.remove("_meta");
    }
}

fn with_marker(view: &Value) -> Value {
    let mut v = view.clone();
    if let Some(obj) = v.as_object_mut() {
        let meta = obj
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(TOOL_RESOLUTION.into(), json!({"resolvable": true}));
        }
    }
    v
}

fn flag(obj: &mut Map<String, Value>, standing: Standing, changes: &[DriftChange]) {
    let kinds: Vec<&str> = changes.iter().map(|c| c.kind).collect();
    let meta = obj
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(
            GUARD_META.into(),
            json!({"standing": standing, "changes": kinds}),
        );
    }
}

fn violation_kind_str(k: ViolationKind) -> &'static str {
    match k {
        ViolationKind::UndeclaredTool => "undeclared_tool",
        ViolationKind::AnnotationNotDeclared => "annotation_not_declared",
        ViolationKind::InputSchemaChanged => "input_schema_changed",
        ViolationKind::OutputSchemaChanged => "output_schema_changed",
        ViolationKind::PolicyHintNotDeclared => "policy_hint_not_declared",
        ViolationKind::SecuritySchemeNotDeclared => "security_scheme_not_declared",
        ViolationKind::UndeclaredPrompt => "undeclared_prompt",
        ViolationKind::PromptArgumentsChanged => "prompt_arguments_changed",
        ViolationKind::UndeclaredResource => "undeclared_resource",
        ViolationKind::UndeclaredResourceTemplate => "undeclared_resource_template",
    }
}

/// The digest of a listed tools array, independent of the list's order.
fn list_digest(listed: &[Value]) -> String {
    let mut sorted: Vec<&Value> = listed.iter().collect();
    sorted.sort_by(|a, b| {
        let name = |v: &Value| {
            v.get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        name(a).cmp(&name(b))
    });
    digest(&Value::Array(sorted.into_iter().cloned().collect()))
}

/// A tool execution error (`CallToolResult` with `isError: true`) that
/// says `text`: what the model reads, so it can correct the call.
pub fn tool_error(text: String) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

/// The tool execution error for arguments that do not match the reviewed
/// `inputSchema`: every failing pointer with its message (SEP-1303: input
/// validation errors are tool execution errors, not protocol errors).
pub fn invalid_arguments(tool: &str, errors: &ValidationErrors) -> Value {
    let mut text = format!(
        "Refused by Pinfold: the arguments do not match the reviewed input schema of {tool:?}:"
    );
    for e in &errors.errors {
        let at = if e.pointer.is_empty() {
            "(the arguments)"
        } else {
            e.pointer.as_str()
        };
        text.push_str(&format!("\n- {at}: {}", e.message));
    }
    tool_error(text)
}

/// A prompts or resources list cut to the signature: what the client is
/// shown under `mode` (strict: only declared items; otherwise every item,
/// undeclared ones flagged under permissive), and the undeclared items'
/// names or URIs.
pub fn review_list(
    signature: &Signature,
    upstream: &Value,
    key: &str,
    mode: Mode,
    limits: &Limits,
) -> Result<(Value, Vec<String>), ValidationErrors> {
    let Some(listed) = upstream.get(key).and_then(Value::as_array) else {
        return Err(ValidationErrors::single(
            format!("/{key}"),
            "invalid_list",
            format!("the result must carry a {key} array"),
        ));
    };
    let observed = Observation::from_value(&json!({ key: listed }), limits)?;
    let report = contain::check(signature, &observed, Mode::Advisory);
    let undeclared_kind = match key {
        "prompts" => ViolationKind::UndeclaredPrompt,
        "resources" => ViolationKind::UndeclaredResource,
        _ => ViolationKind::UndeclaredResourceTemplate,
    };
    let mut undeclared_at = std::collections::BTreeSet::<usize>::new();
    let mut undeclared = Vec::new();
    for v in &report.violations {
        if v.kind == undeclared_kind
            && let Some(i) = v.pointer.rsplit('/').next().and_then(|i| i.parse().ok())
        {
            undeclared_at.insert(i);
            undeclared.extend(v.name.clone());
        }
    }
    let items: Vec<Value> = listed
        .iter()
        .enumerate()
        .filter_map(|(i, item)| {
            let undeclared = undeclared_at.contains(&i);
            if undeclared && mode == Mode::Strict {
                return None;
            }
            let mut item = item.clone();
            if let Some(obj) = item.as_object_mut() {
                strip_ours(obj);
                if undeclared && mode == Mode::Permissive {
                    flag(obj, Standing::Undeclared, &[]);
                }
            }
            Some(item)
        })
        .collect();
    let mut out = upstream.as_object().cloned().unwrap_or_default();
    out.insert(key.into(), Value::Array(items));
    Ok((Value::Object(out), undeclared))
}

/// Decides a `prompts/get`: under strict, a prompt the signature does not
/// declare is refused.
pub fn prompt_get(signature: &Signature, name: &str, mode: Mode) -> Result<(), Refusal> {
    if mode != Mode::Strict || signature.prompts.iter().any(|p| p.name == name) {
        return Ok(());
    }
    Err(Refusal {
        reason: Reason::UndeclaredPrompt,
        subject: name.to_owned(),
        message: format!("Refused by Pinfold: {name:?} is not a prompt of the reviewed version."),
        changes: Vec::new(),
    })
}

/// Decides a `resources/read`: under strict, a URI neither declared nor
/// matched by a declared template (RFC 6570, as core matches them) is
/// refused.
pub fn resource_read(signature: &Signature, uri: &str, mode: Mode) -> Result<(), Refusal> {
    if mode != Mode::Strict
        || signature.resources.iter().any(|r| r.uri == uri)
        || signature
            .resource_templates
            .iter()
            .any(|t| contain::template_matches(&t.uri_template, uri))
    {
        return Ok(());
    }
    Err(Refusal {
        reason: Reason::UndeclaredResource,
        subject: uri.to_owned(),
        message: format!(
            "Refused by Pinfold: {uri:?} is neither a resource of the reviewed version nor matched \
             by one of its templates."
        ),
        changes: Vec::new(),
    })
}

#[cfg(test)]
mod tests;
