//! Worst-case reduction: a signature tool → the single tool a `tools/list`
//! shows (SEP-2091 "Reference Implementation": backward-compatible clients
//! see the most conservative trust profile; the tool-resolution and
//! dynamic-annotations seeds ask the same of a tool's static `annotations`
//! when `resolve` / `dynamicAnnotations` is set).
//!
//! Every possibility is normalised first (see [`crate::annotations`]), then
//! each hint is combined across possibilities:
//!
//! | hint | rule | absent means |
//! |------|------|--------------|
//! | `readOnlyHint` | AND | `false` |
//! | `destructiveHint` | OR | `true` (`false` when read-only) |
//! | `idempotentHint` | AND | `false` (`true` when read-only) |
//! | `openWorldHint` | OR | `true` |
//! | `agencyHint` (SEP-1938) | OR | `false` |
//! | `taskHint` | kept when every possibility agrees, else omitted | — |
//! | unknown hints | kept when every possibility agrees (canonically), else omitted | — |
//! | `title` | the first possibility's (display only) | — |
//! | `_meta` `mcp.dev/requiresConfirmation` | OR over declared values | key stays absent |
//! | `_meta` `mcp.dev/idempotent` | AND over declared values | key stays absent |
//! | `_meta` `mcp.dev/effect` | most severe: read < write < external < delete | key stays absent |
//! | `_meta` `mcp.dev/resultSensitivity` | most severe: public < internal < confidential < restricted | key stays absent |
//!
//! The reduced annotations are always written out in full (the four core
//! hints explicitly), so a client never has to know the defaults. All
//! other tool members (`name`, `description`, `inputSchema`,
//! `securitySchemes`, `resolve`, unknown fields, ...) are kept as declared.
//! Tools keep their declared order. `docs/SEMANTICS.md` (section 4)
//! describes the same rules for readers outside the code.

use serde_json::{Map, Value};

use crate::annotations::Annotations;
use crate::card::{Signature, SignatureTool};

/// The reduced annotations of one tool.
pub fn reduce_annotations(tool: &SignatureTool) -> Annotations {
    Annotations::reduce(&tool.possibilities)
}

/// The worst-case tool object for one signature tool.
pub fn reduce_tool(tool: &SignatureTool) -> Value {
    let mut obj = tool.raw.as_object().cloned().unwrap_or_default();
    obj.insert("annotations".into(), reduce_annotations(tool).to_value());
    let reduced_meta = tool.policy.reduced_values();
    if !reduced_meta.is_empty() {
        let mut meta: Map<String, Value> = obj
            .get("_meta")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for (k, v) in reduced_meta {
            meta.insert(k.to_owned(), v);
        }
        obj.insert("_meta".into(), Value::Object(meta));
    }
    Value::Object(obj)
}

/// The worst-case `tools/list` result: `{"tools": [...]}`.
pub fn reduce_signature(sig: &Signature) -> Value {
    let tools: Vec<Value> = sig.tools.iter().map(reduce_tool).collect();
    let mut m = Map::new();
    m.insert("tools".into(), Value::Array(tools));
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::card::{Limits, ServerCard};
    use serde_json::json;

    fn tool(annotations: Value, meta: Value) -> SignatureTool {
        let mut t =
            json!({"name": "t", "inputSchema": {"type": "object"}, "annotations": annotations});
        if !meta.is_null() {
            t["_meta"] = meta;
        }
        let doc = json!({"name": "a.b/c", "version": "1.0.0", "signature": {"tools": [t]}});
        ServerCard::from_value(&doc, &Limits::default())
            .unwrap()
            .signature
            .tools
            .remove(0)
    }

    fn reduced(annotations: Value) -> Value {
        reduce_tool(&tool(annotations, Value::Null))["annotations"].clone()
    }

    fn hint(annotations: Value, key: &str) -> Value {
        reduced(annotations)[key].clone()
    }

    fn meta_hint(meta: Value, key: &str) -> Value {
        reduce_tool(&tool(json!({}), meta))["_meta"][key].clone()
    }

    #[test]
    fn row_read_only_and() {
        assert_eq!(
            hint(
                json!([{"readOnlyHint": true}, {"readOnlyHint": true}]),
                "readOnlyHint"
            ),
            json!(true)
        );
        assert_eq!(
            hint(
                json!([{"readOnlyHint": true}, {"readOnlyHint": false}]),
                "readOnlyHint"
            ),
            json!(false)
        );
        assert_eq!(
            hint(json!([{"readOnlyHint": true}, {}]), "readOnlyHint"),
            json!(false)
        );
    }

    #[test]
    fn row_destructive_or() {
        let w = json!({"readOnlyHint": false, "destructiveHint": false});
        assert_eq!(hint(json!([w, w]), "destructiveHint"), json!(false));
        assert_eq!(
            hint(json!([w, {"destructiveHint": true}]), "destructiveHint"),
            json!(true)
        );
        // absent = true
        assert_eq!(hint(json!([w, {}]), "destructiveHint"), json!(true));
        // read-only possibilities are non-destructive whatever they say
        assert_eq!(
            hint(
                json!([{"readOnlyHint": true, "destructiveHint": true}, w]),
                "destructiveHint"
            ),
            json!(false)
        );
    }

    #[test]
    fn row_idempotent_and() {
        let i = json!({"idempotentHint": true});
        assert_eq!(hint(json!([i, i]), "idempotentHint"), json!(true));
        assert_eq!(
            hint(json!([i, {"idempotentHint": false}]), "idempotentHint"),
            json!(false)
        );
        assert_eq!(hint(json!([i, {}]), "idempotentHint"), json!(false));
        // read-only counts as idempotent
        assert_eq!(
            hint(
                json!([i, {"readOnlyHint": true, "idempotentHint": false}]),
                "idempotentHint"
            ),
            json!(true)
        );
    }

    #[test]
    fn row_open_world_or() {
        let c = json!({"openWorldHint": false});
        assert_eq!(hint(json!([c, c]), "openWorldHint"), json!(false));
        assert_eq!(
            hint(json!([c, {"openWorldHint": true}]), "openWorldHint"),
            json!(true)
        );
        assert_eq!(hint(json!([c, {}]), "openWorldHint"), json!(true));
    }

    #[test]
    fn row_agency_or() {
        assert_eq!(hint(json!([{}, {}]), "agencyHint"), Value::Null);
        assert_eq!(
            hint(json!([{"agencyHint": false}, {}]), "agencyHint"),
            Value::Null
        );
        assert_eq!(
            hint(json!([{"agencyHint": true}, {}]), "agencyHint"),
            json!(true)
        );
    }

    #[test]
    fn row_task_hint_and_unknown_hints() {
        assert_eq!(
            hint(
                json!([{"taskHint": "always"}, {"taskHint": "always"}]),
                "taskHint"
            ),
            json!("always")
        );
        assert_eq!(
            hint(
                json!([{"taskHint": "always"}, {"taskHint": "never"}]),
                "taskHint"
            ),
            Value::Null
        );
        assert_eq!(hint(json!([{"x": [1]}, {"x": [1.0]}]), "x"), json!([1]));
        assert_eq!(hint(json!([{"x": 1}, {"x": 2}]), "x"), Value::Null);
        assert_eq!(hint(json!([{"x": 1}, {}]), "x"), Value::Null);
    }

    #[test]
    fn row_title_first() {
        assert_eq!(
            hint(json!([{"title": "A"}, {"title": "B"}]), "title"),
            json!("A")
        );
    }

    #[test]
    fn row_requires_confirmation_or() {
        let k = "mcp.dev/requiresConfirmation";
        assert_eq!(meta_hint(json!({k: [false, true]}), k), json!(true));
        assert_eq!(meta_hint(json!({k: [false]}), k), json!(false));
        assert_eq!(meta_hint(json!({k: true}), k), json!(true));
        assert_eq!(meta_hint(json!({}), k), Value::Null);
    }

    #[test]
    fn row_meta_idempotent_and() {
        let k = "mcp.dev/idempotent";
        assert_eq!(meta_hint(json!({k: [true, false]}), k), json!(false));
        assert_eq!(meta_hint(json!({k: [true]}), k), json!(true));
        assert_eq!(meta_hint(json!({}), k), Value::Null);
    }

    #[test]
    fn row_effect_most_severe() {
        let k = "mcp.dev/effect";
        assert_eq!(meta_hint(json!({k: ["read", "write"]}), k), json!("write"));
        assert_eq!(
            meta_hint(json!({k: ["external", "write"]}), k),
            json!("external")
        );
        assert_eq!(
            meta_hint(json!({k: ["delete", "external", "read"]}), k),
            json!("delete")
        );
        assert_eq!(meta_hint(json!({k: "read"}), k), json!("read"));
    }

    #[test]
    fn row_sensitivity_most_severe() {
        let k = "mcp.dev/resultSensitivity";
        assert_eq!(
            meta_hint(json!({k: ["public", "internal"]}), k),
            json!("internal")
        );
        assert_eq!(
            meta_hint(json!({k: ["confidential", "internal"]}), k),
            json!("confidential")
        );
        assert_eq!(
            meta_hint(json!({k: ["restricted", "public"]}), k),
            json!("restricted")
        );
    }

    #[test]
    fn sep_2091_example() {
        let t = tool(
            json!([{ "destructiveHint": false, "readOnlyHint": true }, { "destructiveHint": true, "readOnlyHint": false }]),
            json!({"other": "kept"}),
        );
        let r = reduce_tool(&t);
        assert_eq!(
            r["annotations"],
            json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true})
        );
        assert_eq!(r["_meta"], json!({"other": "kept"}));
        assert_eq!(r["inputSchema"], json!({"type": "object"}));
    }

    #[test]
    fn absent_annotations_become_explicit_defaults() {
        let doc = json!({"name": "a.b/c", "version": "1.0.0", "signature": {"tools": [
            {"name": "t", "inputSchema": {"type": "object"}}]}});
        let card = ServerCard::from_value(&doc, &Limits::default()).unwrap();
        assert_eq!(
            reduce_signature(&card.signature),
            json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}, "annotations":
                {"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true}}]})
        );
    }
}
