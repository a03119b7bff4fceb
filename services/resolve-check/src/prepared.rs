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
        let marker = t
            .raw
            .get("_meta")
            .and_then(|m| m.get(TOOL_RESOLUTION))
            .and_then(|x| x.get("resolvable"))
            .and_then(Value::as_bool)
            == Some(true);
        let kind = if t.resolve || marker {
            ToolKind::Resolve
        } else if t.dynamic_annotations {
            ToolKind::DynamicAnnotations
        } else {
            ToolKind::Static
        };
        Self {
            name: t.name.clone(),
            kind,
            worst_case: Arc::new(reduce_tool(t)),
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
            errors.push(
                e.instance_path().as_str().to_owned(),
                "invalid_argument",
                e.to_string(),
            );
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
    /// `annotations` and `_meta` members.
    pub fn served_tool(&self, result: Value) -> Value {
        let Value::Object(mut result) = result else {
            return Value::clone(&self.worst_case);
        };
        let declared = self.worst_case.as_object();
        if let Some(Value::Object(mut t)) = result.remove("tool") {
            for (k, v) in declared.into_iter().flatten() {
                if k != "annotations" && !t.contains_key(k) {
                    t.insert(k.clone(), v.clone());
                }
            }
            return Value::Object(t);
        }
        let mut out = Value::clone(&self.worst_case);
        let Some(o) = out.as_object_mut() else {
            return out;
        };
        if let Some(a) = result.remove("annotations") {
            o.insert("annotations".into(), a);
        }
        if let Some(Value::Object(m)) = result.remove("_meta") {
            let meta = o
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(meta) = meta.as_object_mut() {
                meta.extend(m);
            }
        }
        out
    }
}

/// Compiles a tool's `inputSchema` (an empty schema when it declares
/// none); the error's text when it cannot be compiled.
fn compile(input_schema: Option<&Value>) -> Result<jsonschema::Validator, String> {
    let empty = Value::Object(Map::new());
    jsonschema::options()
        .build(input_schema.unwrap_or(&empty))
        .map_err(|e| e.to_string())
}

/// A signature version prepared for resolving.
#[derive(Debug)]
pub struct PreparedSignature {
    digest: String,
    tools: HashMap<String, PreparedTool>,
}

impl PreparedSignature {
    /// Prepares the published card document (validated under `limits`),
    /// compiling every tool's input schema.
    pub fn new(card_document: &Value, limits: &Limits) -> Result<Self, ValidationErrors> {
        let card = ServerCard::from_value(card_document, limits)?;
        let tools = card
            .signature
            .tools
            .iter()
            .map(|t| (t.name.clone(), PreparedTool::new(t)))
            .collect();
        Ok(Self {
            digest: card.digest().to_owned(),
            tools,
        })
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
}
