//! The readers of optional string and boolean members that the card rules
//! share: a member of the wrong type is recorded as `invalid_field` at its
//! pointer, and reads as absent (`None`, or `false` for a boolean).

use serde_json::{Map, Value};

use crate::error::{ValidationErrors, pointer_push};

/// The string member `key` of `obj`, if present; any other type is an
/// `invalid_field` error at `base/key`.
pub(super) fn opt_str<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
    base: &str,
    errors: &mut ValidationErrors,
) -> Option<&'a str> {
    match obj.get(key) {
        None => None,
        Some(Value::String(s)) => Some(s),
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

/// The boolean member `key` of `obj` (`false` when absent); any other type
/// is an `invalid_field` error at `base/key`.
pub(super) fn opt_bool(
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
