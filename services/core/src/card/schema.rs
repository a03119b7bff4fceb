//! The JSON Schema dialect of a tool's `inputSchema` and `outputSchema`: a
//! declared schema must be valid against the meta-schema of its `$schema`
//! dialect (draft-04, -06, -07, 2019-09 or 2020-12; anything else is
//! checked as 2020-12, MCP's default). The bundled meta-schemas are
//! compiled once by the `jsonschema` crate; nothing remote is ever fetched.

use serde_json::Value;

use crate::error::{ValidationErrors, pointer_push};

const KNOWN_DIALECTS: &[&str] = &[
    "http://json-schema.org/draft-04/schema",
    "http://json-schema.org/draft-06/schema",
    "http://json-schema.org/draft-07/schema",
    "https://json-schema.org/draft/2019-09/schema",
    "https://json-schema.org/draft/2020-12/schema",
];

/// Checks that `s` is a valid JSON Schema object (validated against its
/// meta-schema, never fetching anything remote).
pub(super) fn check_schema(
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
