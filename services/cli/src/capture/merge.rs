//! The `--merge` files of `pinfold capture`: read strictly, and where
//! their lists are (a card's `signature`, saved list results, or a
//! JSON-RPC answer's `result`).

use std::path::Path;

use serde_json::{Map, Value};

/// One `--merge` file: its path, its document, and where the lists are.
pub(super) struct MergeFile {
    pub(super) label: String,
    doc: Value,
    pub(super) base: &'static str,
}

impl MergeFile {
    pub(super) fn lists(&self) -> &Value {
        match self.base {
            "/signature" => &self.doc["signature"],
            "/result" => &self.doc["result"],
            _ => &self.doc,
        }
    }

    pub(super) fn card(&self) -> Option<&Map<String, Value>> {
        (self.base == "/signature")
            .then(|| self.doc.as_object())
            .flatten()
    }
}

pub(super) fn load_merge_file(path: &Path) -> Result<MergeFile, String> {
    let label = path.display().to_string();
    if (label.starts_with("http://") || label.starts_with("https://")) && !path.exists() {
        return Err(format!(
            "--merge takes files, not {label:?}: give the server's URL before --merge"
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {label}: {e}"))?;
    let doc = pinfold_core::json::parse_strict(&bytes, pinfold_core::json::DEFAULT_MAX_DEPTH)
        .map_err(|e| format!("{label} is not acceptable JSON: {e}"))?;
    let has_lists = |v: &Value| {
        ["tools", "prompts", "resources", "resourceTemplates"]
            .iter()
            .any(|k| v.get(k).is_some())
    };
    let base = if doc.get("signature").is_some_and(Value::is_object) {
        "/signature"
    } else if has_lists(&doc) {
        ""
    } else if doc.get("result").is_some_and(has_lists) {
        "/result"
    } else {
        return Err(format!(
            "{label} holds neither a card with a signature nor tools, prompts, resources or resourceTemplates"
        ));
    };
    Ok(MergeFile { label, doc, base })
}
