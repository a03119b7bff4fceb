//! The limits a document must keep to (`[limits]` in the server's
//! configuration), and the nesting check that enforces the depth limit.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ValidationErrors, pointer_push};

/// Configurable limits on accepted documents (`[limits]` in the server's
/// configuration; every field is optional there and defaults as below).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
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
    /// Maximum length of a resource template's `uriTemplate` in characters
    /// (default 2,048).
    pub max_template_chars: usize,
    /// Maximum number of `{...}` expressions in one `uriTemplate` (default
    /// 32): each one widens what a template can match, and no real URI
    /// needs more.
    pub max_template_expressions: usize,
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
            max_template_chars: 2048,
            max_template_expressions: 32,
        }
    }
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
