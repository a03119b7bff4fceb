//! Tool arguments mirrored into HTTP headers: the `x-mcp-header`
//! annotation of an `inputSchema` property.
//!
//! SEP-2243 ("HTTP Header Standardization for Streamable HTTP Transport"),
//! in its specification section "Custom Headers from Tool Parameters", lets
//! a server mark a property of a tool's `inputSchema` with
//! `"x-mcp-header": "<Name>"`. A client on the Streamable HTTP transport
//! then sends that argument's value a second time, in an
//! `Mcp-Param-<Name>` request header beside the JSON-RPC body, so that load
//! balancers, gateways and rate limiters can act on it without parsing the
//! body. The annotation may sit on a property at any depth, as long as the
//! property is reached from the schema's root through `properties` alone;
//! an annotation anywhere else makes clients drop the tool, so it mirrors
//! nothing and is not read here.
//!
//! For a reviewer that is a change of exposure: an argument that travelled
//! only inside the body now also travels where every intermediary on the
//! path reads it, and where HTTP access logs usually keep it. So the one
//! rule, [`added`], decides both sides of the comparison:
//!
//! - `diff` reports each property that gains an annotation against the
//!   older version (a new property carrying one, or an annotation that now
//!   names another header) as `mcp_header_added`, class escalation;
//! - `verify` marks the `input_schema_changed` violation of an observed
//!   tool whose schema adds such an annotation to the declared one as less
//!   safe.
//!
//! Header names compare case-insensitively, as HTTP field names do:
//! `Region` becoming `region` mirrors into the same header and is not new.

use serde_json::Value;

use crate::error::pointer_push;

/// The annotation's keyword.
pub const KEYWORD: &str = "x-mcp-header";

/// The prefix of the header a client sends an annotated argument in.
pub const HEADER_PREFIX: &str = "Mcp-Param-";

/// Deeper than this, a schema is not walked further (a card's own depth
/// limit is far below it; this only bounds a schema built by hand).
const MAX_DEPTH: usize = 128;

/// One annotated property of an `inputSchema`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ParamHeader {
    /// JSON pointer, within the `inputSchema`, of the annotated property's
    /// schema (`/properties/region`).
    pub pointer: String,
    /// The argument's path, property names joined with `.` (`region`,
    /// `options.limit`), for people to read.
    pub argument: String,
    /// The header name the annotation gives, as written (a value that is
    /// not a string as its JSON text).
    pub name: String,
}

impl ParamHeader {
    /// The header a client sends the argument in (`Mcp-Param-Region`).
    pub fn header(&self) -> String {
        format!("{HEADER_PREFIX}{}", self.name)
    }

    fn same_as(&self, other: &ParamHeader) -> bool {
        self.pointer == other.pointer && self.name.eq_ignore_ascii_case(&other.name)
    }
}

/// Every annotated property of `schema` reached through `properties`
/// alone, ordered by pointer.
pub fn param_headers(schema: &Value) -> Vec<ParamHeader> {
    let mut out = Vec::new();
    walk(schema, "", "", 0, &mut out);
    out.sort();
    out
}

fn walk(schema: &Value, pointer: &str, argument: &str, depth: usize, out: &mut Vec<ParamHeader>) {
    if depth >= MAX_DEPTH {
        return;
    }
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    let base = pointer_push(pointer, "properties");
    for (key, sub) in properties {
        let here = pointer_push(&base, key);
        let path = if argument.is_empty() {
            key.clone()
        } else {
            format!("{argument}.{key}")
        };
        if let Some(v) = sub.get(KEYWORD) {
            out.push(ParamHeader {
                pointer: here.clone(),
                argument: path.clone(),
                name: match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                },
            });
        }
        walk(sub, &here, &path, depth + 1, out);
    }
}

/// The annotated properties of `new` that `old` does not have: a property
/// whose annotation is new, or names another header (case-insensitively).
/// `None` stands for a tool without an `inputSchema`.
pub fn added(old: Option<&Value>, new: Option<&Value>) -> Vec<ParamHeader> {
    let Some(new) = new else {
        return Vec::new();
    };
    let before = old.map(param_headers).unwrap_or_default();
    param_headers(new)
        .into_iter()
        .filter(|h| !before.iter().any(|b| b.same_as(h)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn annotations_are_found_through_properties_at_any_depth_and_nowhere_else() {
        let schema = json!({"type": "object", "x-mcp-header": "Root", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "query": {"type": "string"},
            "options": {"type": "object", "properties": {
                "limit": {"type": "integer", "x-mcp-header": "Limit"}}},
            "tags": {"type": "array", "items": {"type": "string", "x-mcp-header": "Tag"}},
            "a/b": {"type": "boolean", "x-mcp-header": 7}},
            "$defs": {"x": {"type": "string", "x-mcp-header": "Defs"}}});
        let found: Vec<(String, String, String)> = param_headers(&schema)
            .into_iter()
            .map(|h| (h.pointer, h.argument, h.name))
            .collect();
        assert_eq!(
            found,
            [
                ("/properties/a~1b".into(), "a/b".into(), "7".into()),
                (
                    "/properties/options/properties/limit".into(),
                    "options.limit".into(),
                    "Limit".into()
                ),
                (
                    "/properties/region".into(),
                    "region".into(),
                    "Region".into()
                ),
            ]
        );
        assert_eq!(param_headers(&schema)[2].header(), "Mcp-Param-Region");
    }

    #[test]
    fn added_means_a_new_annotation_or_another_header_name() {
        let old = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "query": {"type": "string"}}});
        let names = |v: Vec<ParamHeader>| v.into_iter().map(|h| h.argument).collect::<Vec<_>>();
        // The same annotation, spelled in another case: nothing new.
        let same = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "REGION"},
            "query": {"type": "string"}}});
        assert!(added(Some(&old), Some(&same)).is_empty());
        // An existing property gains one; a new property carries one.
        let more = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "query": {"type": "string", "x-mcp-header": "Query"},
            "zone": {"type": "string", "x-mcp-header": "Zone"}}});
        assert_eq!(names(added(Some(&old), Some(&more))), ["query", "zone"]);
        // The annotation names another header.
        let renamed = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Location"}}});
        assert_eq!(names(added(Some(&old), Some(&renamed))), ["region"]);
        // Removing one adds nothing; no schema before: every one is new.
        assert!(added(Some(&more), Some(&old)).is_empty());
        assert_eq!(names(added(None, Some(&old))), ["region"]);
        assert!(added(Some(&old), None).is_empty());
    }
}
