//! A signature version prepared once for resolving: per tool its worst case,
//! how it resolves, and its input-schema validator, compiled while the
//! version is prepared (so preparing is CPU work; the resolve service runs
//! it on its CPU pool, once per digest).
//!
//! Versions are immutable, so a [`PreparedSignature`] may be cached by
//! digest and shared by every session pinned to that version.

use std::collections::HashMap;
use std::sync::Arc;

use pinfold_core::Mode;
use pinfold_core::card::{Limits, ServerCard, Signature, SignatureTool};
use pinfold_core::contain::{Observation, VerifyReport, check};
use pinfold_core::error::ValidationErrors;
use pinfold_core::reduce::reduce_tool;
use serde_json::{Map, Value};

/// The `_meta` key and capability name of the tool-resolution extension.
pub const TOOL_RESOLUTION: &str = "io.modelcontextprotocol/tool-resolution";

/// How a declared tool is resolved at call time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    /// Neither resolvable nor dynamic: the worst case is the answer.
    Static,
    /// `tools/resolve`: the seed's `resolve: true`, or the extension's
    /// `_meta["io.modelcontextprotocol/tool-resolution"].resolvable: true`.
    Resolve,
    /// `tools/annotations`: `dynamicAnnotations: true` (and not resolvable).
    DynamicAnnotations,
}

impl ToolKind {
    /// The upstream method for this kind, if any.
    pub fn method(self) -> Option<&'static str> {
        match self {
            ToolKind::Static => None,
            ToolKind::Resolve => Some("tools/resolve"),
            ToolKind::DynamicAnnotations => Some("tools/annotations"),
        }
    }
}

/// One declared tool, prepared.
pub struct PreparedTool {
    name: String,
    kind: ToolKind,
    worst_case: Arc<Value>,
    /// Bytes of the worst case as JSON (what serving it costs to write).
    worst_case_len: usize,
    /// The declared `inputSchema` compiled, or why it cannot be.
    validator: Result<jsonschema::Validator, String>,
    /// A signature holding only this tool, so that checking a resolution
    /// looks at one tool whatever the size of the signature.
    alone: Signature,
}

impl std::fmt::Debug for PreparedTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedTool")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl PreparedTool {
    fn new(t: &SignatureTool) -> Self {
        let kind = if t.resolvable() {
            ToolKind::Resolve
        } else if t.dynamic_annotations {
            ToolKind::DynamicAnnotations
        } else {
            ToolKind::Static
        };
        let worst_case = reduce_tool(t);
        Self {
            name: t.name.clone(),
            kind,
            worst_case_len: json_len(&worst_case),
            worst_case: Arc::new(worst_case),
            validator: compile(t.input_schema.as_ref()),
            alone: Signature {
                tools: vec![t.clone()],
                ..Signature::default()
            },
        }
    }

    /// The tool name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How the tool resolves.
    pub fn kind(&self) -> ToolKind {
        self.kind
    }

    /// The worst-case tool (core reduction): what `tools/list` shows, and
    /// what is served when resolution is impossible or refused.
    pub fn worst_case(&self) -> &Value {
        &self.worst_case
    }

    /// The worst-case tool, shared.
    pub fn worst_case_shared(&self) -> Arc<Value> {
        self.worst_case.clone()
    }

    /// The worst-case tool as served (a static tool, or a fallback).
    pub fn served_declared(&self) -> ServedTool {
        ServedTool {
            declared_len: self.worst_case_len,
            ..ServedTool::declared(self.worst_case.clone())
        }
    }

    /// Validates `arguments` against the declared `inputSchema`, compiled
    /// when the tool was prepared. Remote `$ref`s are never fetched, so a
    /// schema that needs one cannot be compiled and every call is refused
    /// (pointer `""`, code `schema_unusable`).
    pub fn validate(&self, arguments: &Value) -> Result<(), ValidationErrors> {
        if !arguments.is_object() {
            return Err(ValidationErrors::single(
                "",
                "invalid_arguments",
                "arguments must be a JSON object",
            ));
        }
        let validator = match &self.validator {
            Ok(v) => v,
            Err(e) => {
                return Err(ValidationErrors::single(
                    "",
                    "schema_unusable",
                    format!("the declared inputSchema cannot be used: {e}"),
                ));
            }
        };
        let mut errors = ValidationErrors::new();
        for e in validator.iter_errors(arguments).take(32) {
            let (code, message) = match e.kind() {
                jsonschema::error::ValidationErrorKind::BacktrackLimitExceeded { .. } => (
                    "pattern_too_costly",
                    format!(
                        "the declared inputSchema's pattern needs more than {BACKTRACK_LIMIT} \
                         backtracking steps on this value; the value is refused"
                    ),
                ),
                _ => ("invalid_argument", e.to_string()),
            };
            errors.push(e.instance_path().as_str().to_owned(), code, message);
        }
        errors.into_result(())
    }

    /// Checks an upstream resolution result (any of the three shapes)
    /// against this tool. The report is made under advisory mode: the
    /// session's mode is applied when the result is served.
    pub fn check(&self, result: &Value, limits: &Limits) -> Result<VerifyReport, ValidationErrors> {
        let obs = Observation::from_resolution(&self.name, result, limits)?;
        Ok(check(&self.alone, &obs, Mode::Advisory))
    }

    /// The complete tool to serve for an upstream result: the seed's
    /// `tool` (members it omits filled from the declared tool), or, for an
    /// annotations-only answer (the extension's complete result or
    /// `tools/annotations`), the declared tool carrying the resolved
    /// `annotations` and `_meta` members. The declared tool is shared, not
    /// copied: what the answer holds of its own is only what differs.
    pub fn served_tool(&self, result: Value) -> ServedTool {
        let Value::Object(mut result) = result else {
            return self.served_declared();
        };
        if let Some(Value::Object(t)) = result.remove("tool") {
            return ServedTool {
                declared: self.worst_case.clone(),
                declared_len: self.worst_case_len,
                own: Some(Arc::new(t)),
                declared_annotations: false,
            };
        }
        let mut own = Map::new();
        if let Some(a) = result.remove("annotations") {
            own.insert("annotations".into(), a);
        }
        if let Some(Value::Object(m)) = result.remove("_meta") {
            let mut meta = match self.worst_case.get("_meta") {
                Some(Value::Object(d)) => d.clone(),
                _ => Map::new(),
            };
            meta.extend(m);
            own.insert("_meta".into(), Value::Object(meta));
        }
        ServedTool {
            declared: self.worst_case.clone(),
            declared_len: self.worst_case_len,
            own: (!own.is_empty()).then(|| Arc::new(own)),
            declared_annotations: true,
        }
    }
}

/// A tool as served: the declared tool (shared with the prepared
/// signature) with the members an upstream answer replaced. Cloning it
/// copies no JSON; it serializes as the one object it stands for, members
/// in the same order as a `Value` of it would.
#[derive(Debug, Clone)]
pub struct ServedTool {
    declared: Arc<Value>,
    /// Bytes of the declared tool as JSON, when known (0 otherwise): a
    /// hint for the buffer a rendering of this tool needs.
    declared_len: usize,
    /// Members of the answer's own, shown instead of the declared ones.
    own: Option<Arc<Map<String, Value>>>,
    /// Whether the declared `annotations` show when `own` has none (an
    /// annotations-only answer that left them out); a seed `tool` never
    /// inherits them.
    declared_annotations: bool,
}

static NULL: Value = Value::Null;

impl ServedTool {
    /// The declared tool as it is (a static tool, or a fallback).
    pub fn declared(declared: Arc<Value>) -> ServedTool {
        ServedTool {
            declared,
            declared_len: 0,
            own: None,
            declared_annotations: true,
        }
    }

    fn shows_declared(&self, key: &str) -> bool {
        (self.declared_annotations || key != "annotations")
            && !self.own.as_ref().is_some_and(|o| o.contains_key(key))
    }

    /// One member of the served tool.
    pub fn get(&self, key: &str) -> Option<&Value> {
        if let Some(v) = self.own.as_ref().and_then(|o| o.get(key)) {
            return Some(v);
        }
        if !self.shows_declared(key) {
            return None;
        }
        self.declared.get(key)
    }

    /// Every member, in key order (the order a `Value` of it would have).
    pub fn members(&self) -> impl Iterator<Item = (&String, &Value)> {
        let own = self.own.as_deref().into_iter().flatten();
        let declared = self
            .declared
            .as_object()
            .into_iter()
            .flatten()
            .filter(move |(k, _)| self.shows_declared(k));
        Merged {
            a: own.peekable(),
            b: declared.peekable(),
        }
    }

    /// The served tool as one JSON value (a copy).
    pub fn to_value(&self) -> Value {
        Value::Object(
            self.members()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )
    }

    /// About how many bytes its JSON takes: the declared tool's, when
    /// known (an answer's own members mostly stand in for declared ones);
    /// what a buffer rendering it should start with.
    pub fn json_len_hint(&self) -> usize {
        self.declared_len
    }

    /// Heap bytes this served tool holds of its own, beyond the shared
    /// declared tool: what a cache entry of it keeps alive.
    pub fn own_heap_bytes(&self) -> usize {
        self.own.as_deref().map_or(0, |m| {
            std::mem::size_of::<Map<String, Value>>()
                + 2 * std::mem::size_of::<usize>()
                + heap::map(m)
        })
    }
}

impl std::ops::Index<&str> for ServedTool {
    type Output = Value;
    fn index(&self, key: &str) -> &Value {
        self.get(key).unwrap_or(&NULL)
    }
}

impl PartialEq for ServedTool {
    fn eq(&self, other: &Self) -> bool {
        self.members().eq(other.members())
    }
}

impl serde::Serialize for ServedTool {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.members())
    }
}

/// Two key-ordered member sequences merged in key order (a key is in at
/// most one of them).
struct Merged<A: Iterator, B: Iterator> {
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
}

impl<'v, A, B> Iterator for Merged<A, B>
where
    A: Iterator<Item = (&'v String, &'v Value)>,
    B: Iterator<Item = (&'v String, &'v Value)>,
{
    type Item = (&'v String, &'v Value);
    fn next(&mut self) -> Option<Self::Item> {
        let from_a = match (self.a.peek(), self.b.peek()) {
            (Some((ka, _)), Some((kb, _))) => ka <= kb,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if from_a { self.a.next() } else { self.b.next() }
    }
}

/// Bytes of `v` as compact JSON, counted without writing them.
fn json_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// What JSON values hold on the heap, counted from how `serde_json`
/// stores them (a `BTreeMap` per object, a `Vec` per array, a `String` per
/// string); used to weigh what a cache entry keeps alive.
pub mod heap {
    use serde_json::{Map, Value};

    /// Bytes of one `BTreeMap<String, Value>` node: a leaf holds up to
    /// eleven keys and values plus its parent link, an internal node also
    /// twelve child pointers.
    const LEAF: usize = 8 + 2 + 2 + 4 + 11 * 24 + 11 * 32;
    const INTERNAL: usize = LEAF + 12 * 8;

    /// Heap bytes of `v`'s children (not of `v` itself, which lives in its
    /// parent).
    pub fn value(v: &Value) -> usize {
        match v {
            Value::String(s) => s.capacity(),
            Value::Array(a) => {
                a.capacity() * std::mem::size_of::<Value>() + a.iter().map(value).sum::<usize>()
            }
            Value::Object(m) => map(m),
            _ => 0,
        }
    }

    /// Heap bytes of a map's nodes, keys and values.
    pub fn map(m: &Map<String, Value>) -> usize {
        let n = m.len();
        let nodes = match n {
            0 => 0,
            1..=11 => LEAF,
            _ => {
                // Nodes are between half and fully filled; filled in key
                // order (as parsers and `collect` do) they hold about
                // eight entries on average.
                let leaves = n.div_ceil(8);
                leaves * LEAF + leaves.div_ceil(6) * INTERNAL
            }
        };
        nodes
            + m.iter()
                .map(|(k, v)| k.capacity() + value(v))
                .sum::<usize>()
    }
}

/// Backtracking steps one `pattern` match may take. Patterns without
/// look-around or back-references never backtrack (fancy-regex hands them
/// to the `regex` crate's automata, linear in the input); the others are
/// cut off here instead of running for minutes on a hostile input such as
/// `(a+)+$` against `aaaa…b`.
pub const BACKTRACK_LIMIT: usize = 100_000;

/// Compiled size one `pattern` may reach (bytes), and the lazy DFA's
/// cache: a schema cannot make a single regex take more memory than this.
pub const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// Compiles a tool's `inputSchema` (an empty schema when it declares
/// none) with bounded pattern matching; the error's text when it cannot be
/// compiled.
fn compile(input_schema: Option<&Value>) -> Result<jsonschema::Validator, String> {
    let empty = Value::Object(Map::new());
    jsonschema::options()
        .with_pattern_options(
            jsonschema::PatternOptions::fancy_regex()
                .backtrack_limit(BACKTRACK_LIMIT)
                .size_limit(PATTERN_SIZE_LIMIT)
                .dfa_size_limit(PATTERN_SIZE_LIMIT),
        )
        .build(input_schema.unwrap_or(&empty))
        .map_err(|e| e.to_string())
}

/// A signature version prepared for resolving.
#[derive(Debug)]
pub struct PreparedSignature {
    digest: String,
    tools: HashMap<String, PreparedTool>,
    heap_bytes: usize,
}

impl PreparedTool {
    /// Heap bytes this prepared tool holds, from what it holds: its name,
    /// its worst case, the one-tool signature its checks run against (the
    /// declared tool: its raw JSON and the members parsed from it), and
    /// the compiled input-schema validator, which holds about
    /// [`VALIDATOR_FACTOR`] times the schema's own bytes.
    fn heap_bytes(&self, declared: &SignatureTool) -> usize {
        let parsed =
            |v: Option<&Value>| v.map_or(0, |v| heap::value(v) + std::mem::size_of::<Value>());
        std::mem::size_of::<PreparedTool>()
            + self.name.capacity()
            + 2 * std::mem::size_of::<usize>()
            + std::mem::size_of::<Value>()
            + heap::value(&self.worst_case)
            + std::mem::size_of::<SignatureTool>()
            + heap::value(&declared.raw)
            + declared.name.capacity()
            + declared.title.as_ref().map_or(0, String::capacity)
            + declared.description.as_ref().map_or(0, String::capacity)
            + parsed(declared.input_schema.as_ref())
            + parsed(declared.output_schema.as_ref())
            + declared.possibilities.capacity() * 64
            + VALIDATOR_OVERHEAD
            + VALIDATOR_FACTOR * declared.input_schema.as_ref().map_or(0, heap::value)
    }
}

/// Bytes of a compiled validator for an empty schema (measured).
const VALIDATOR_OVERHEAD: usize = 2048;
/// Bytes a compiled validator holds per byte of its schema's JSON tree
/// (measured on real tool lists; the `weights` tests check the bound).
const VALIDATOR_FACTOR: usize = 3;

impl PreparedSignature {
    /// Prepares the published card document (validated under `limits`),
    /// compiling every tool's input schema.
    pub fn new(card_document: &Value, limits: &Limits) -> Result<Self, ValidationErrors> {
        let card = ServerCard::from_value(card_document, limits)?;
        let mut heap_bytes = card.digest().len();
        let tools: HashMap<String, PreparedTool> = card
            .signature
            .tools
            .iter()
            .map(|t| {
                let p = PreparedTool::new(t);
                heap_bytes += t.name.capacity() + p.heap_bytes(t);
                (t.name.clone(), p)
            })
            .collect();
        // The table itself: a key, a value and a control byte per bucket.
        heap_bytes += tools.capacity()
            * (std::mem::size_of::<String>() + std::mem::size_of::<PreparedTool>() + 1);
        Ok(Self {
            digest: card.digest().to_owned(),
            tools,
            heap_bytes,
        })
    }

    /// Heap bytes this prepared version holds (what a cache of prepared
    /// versions weighs it by).
    pub fn heap_bytes(&self) -> usize {
        self.heap_bytes
    }

    /// The version's digest.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The declared tool with this name.
    pub fn tool(&self, name: &str) -> Option<&PreparedTool> {
        self.tools.get(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn card() -> Value {
        json!({"name": "a.b/c", "version": "1.0.0", "signature": {"tools": [
            {"name": "seed", "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
             "annotations": [{"readOnlyHint": true, "openWorldHint": false}, {"destructiveHint": true, "openWorldHint": false}], "resolve": true},
            {"name": "ext", "inputSchema": {"type": "object"},
             "_meta": {"io.modelcontextprotocol/tool-resolution": {"resolvable": true}}},
            {"name": "dyn", "inputSchema": {"type": "object"}, "dynamicAnnotations": true},
            {"name": "plain", "inputSchema": {"type": "object"}},
            {"name": "remote", "inputSchema": {"type": "object", "properties": {"x": {"$ref": "https://example.invalid/s.json"}}}}
        ]}})
    }

    #[test]
    fn kinds_and_worst_case() {
        let p = PreparedSignature::new(&card(), &Limits::default()).unwrap();
        assert_eq!(p.tool("seed").unwrap().kind(), ToolKind::Resolve);
        assert_eq!(p.tool("ext").unwrap().kind(), ToolKind::Resolve);
        assert_eq!(p.tool("dyn").unwrap().kind(), ToolKind::DynamicAnnotations);
        assert_eq!(p.tool("plain").unwrap().kind(), ToolKind::Static);
        assert!(p.tool("nope").is_none());
        assert_eq!(
            p.tool("seed").unwrap().worst_case()["annotations"],
            json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": false})
        );
        assert!(p.digest().starts_with("sha256:"));
    }

    #[test]
    fn arguments_are_validated_with_pointers() {
        let p = PreparedSignature::new(&card(), &Limits::default()).unwrap();
        let t = p.tool("seed").unwrap();
        assert!(t.validate(&json!({"n": 1})).is_ok());
        let e = t.validate(&json!({"n": "x"})).unwrap_err();
        assert_eq!(e.errors[0].pointer, "/n");
        let e = t.validate(&json!({})).unwrap_err();
        assert_eq!(e.errors[0].pointer, "");
        assert!(t.validate(&json!([1])).is_err());
        // A remote $ref is never fetched: the schema is unusable.
        let e = p
            .tool("remote")
            .unwrap()
            .validate(&json!({"x": 1}))
            .unwrap_err();
        assert_eq!(e.errors[0].code, "schema_unusable");
    }

    #[test]
    fn served_tools() {
        let p = PreparedSignature::new(&card(), &Limits::default()).unwrap();
        let t = p.tool("seed").unwrap();
        let seed = json!({"tool": {"name": "seed", "annotations": {"readOnlyHint": true, "openWorldHint": false}}});
        let served = t.served_tool(seed.clone());
        assert_eq!(
            served["annotations"],
            json!({"readOnlyHint": true, "openWorldHint": false})
        );
        assert_eq!(served["inputSchema"]["required"], json!(["n"]));
        let ann = json!({"annotations": {"readOnlyHint": true}, "_meta": {"x": 1}});
        let served = t.served_tool(ann);
        assert_eq!(served["annotations"], json!({"readOnlyHint": true}));
        assert_eq!(served["_meta"]["x"], json!(1));
        assert_eq!(served["resolve"], json!(true));
        let r = t.check(&seed, &Limits::default()).unwrap();
        assert!(r.conformant);
        let bad = json!({"resultType": "complete", "name": "seed", "annotations": {"openWorldHint": true, "destructiveHint": true}});
        let r = t.check(&bad, &Limits::default()).unwrap();
        assert!(!r.conformant && r.less_safe());
        assert!(
            t.check(&json!({"tool": {"name": "other"}}), &Limits::default())
                .is_err()
        );
    }

    /// A pattern with catastrophic backtracking (an alternation whose
    /// branches match the same text, under a look-ahead that makes
    /// fancy-regex run it on its backtracking machine) is cut off at the
    /// limit and answered with its own code instead of running for ages:
    /// 2^40 ways to split the value. (`^(a+)+\1$` is no such case: the
    /// engine hands `(a+)+` to the linear matcher and fails it at once.)
    #[test]
    fn a_catastrophic_pattern_is_bounded_and_named() {
        let card = json!({"name": "a.b/c", "version": "1.0.0", "signature": {"tools": [
            {"name": "evil", "inputSchema": {"type": "object", "properties": {
                "s": {"type": "string", "pattern": "^(a|a)+(?!x)$"}}}},
            {"name": "linear", "inputSchema": {"type": "object", "properties": {
                "s": {"type": "string", "pattern": "^(a+)+$"}}}}
        ]}});
        let p = PreparedSignature::new(&card, &Limits::default()).unwrap();
        let hostile = json!({"s": format!("{}b", "a".repeat(40))});
        let e = p.tool("evil").unwrap().validate(&hostile).unwrap_err();
        assert_eq!(e.errors[0].code, "pattern_too_costly", "{e:?}");
        assert_eq!(e.errors[0].pointer, "/s");
        // Without a backtracking engine the nested quantifier is linear.
        let e = p.tool("linear").unwrap().validate(&hostile).unwrap_err();
        assert_eq!(e.errors[0].code, "invalid_argument");
        assert!(
            p.tool("linear")
                .unwrap()
                .validate(&json!({"s": "aaaa"}))
                .is_ok()
        );
    }
}
