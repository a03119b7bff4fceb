//! JSON Schema keywords the OpenAPI document needs and `utoipa`'s schema
//! model has no field for (`not`, `const`), for the request schemas that
//! state every rule their handler enforces.

use serde_json::{Value, json};
use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType};

/// Members to write into a schema as they are. `utoipa` renders a schema's
/// extensions member for member next to its own (without the `x-` prefix
/// its builder would add), so `ObjectBuilder::extensions(keywords([("not",
/// ...)]))` renders a `not` keyword.
pub fn keywords<const N: usize>(members: [(&str, Value); N]) -> Option<Extensions> {
    Some(members.into_iter().collect())
}

/// `{"not": {}}`: the schema no value satisfies, for a member that must be
/// absent.
pub fn absent(description: &str) -> Schema {
    ObjectBuilder::new()
        .schema_type(SchemaType::AnyValue)
        .description(Some(description))
        .extensions(keywords([("not", json!({}))]))
        .build()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_render_as_schema_members() {
        let v = serde_json::to_value(absent("never")).unwrap();
        assert_eq!(v, json!({"description": "never", "not": {}}));
        let s: Schema = ObjectBuilder::new()
            .schema_type(utoipa::openapi::Type::String)
            .extensions(keywords([("not", json!({"pattern": "^a$"}))]))
            .into();
        assert_eq!(
            serde_json::to_value(s).unwrap(),
            json!({"type": "string", "not": {"pattern": "^a$"}})
        );
    }
}
