//! The `server.json` view of a published card: what the official schema
//! requires of the document a subregistry entry carries.

use serde_json::{Map, Value};

/// Longest `description` the official `server.json` schema allows.
pub const MAX_DESCRIPTION_CHARS: usize = 100;

/// Shortens `s` to at most `max` characters, ending with `…` when cut.
pub(super) fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

/// The `server.json` view of a published card: the card without its
/// `signature`. The official schema requires a `description` of 1 to 100
/// characters where a card may have none (or, under raised limits, a longer
/// one): a missing or blank description becomes the card's title, or else
/// its name; a longer one is cut to 100 characters ending with `…`. Every
/// other member is passed through as published.
pub fn server_view(mut card: Map<String, Value>) -> Map<String, Value> {
    card.remove("signature");
    let description = match card.get("description").and_then(Value::as_str) {
        Some(d) if !d.trim().is_empty() => shorten(d, MAX_DESCRIPTION_CHARS),
        _ => {
            let fallback = ["title", "name"]
                .iter()
                .filter_map(|k| card.get(*k).and_then(Value::as_str))
                .find(|s| !s.trim().is_empty())
                .unwrap_or("MCP server");
            shorten(fallback, MAX_DESCRIPTION_CHARS)
        }
    };
    card.insert("description".into(), Value::String(description));
    card
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_server_view_drops_the_signature_and_fits_the_description() {
        let card = json!({"name": "io.github.a/b", "version": "1.0.0", "title": "B",
            "description": "d", "signature": {"tools": []}, "_meta": {"x": 1}});
        let v = server_view(card.as_object().unwrap().clone());
        assert_eq!(
            Value::Object(v),
            json!({"name": "io.github.a/b", "version": "1.0.0", "title": "B",
                "description": "d", "_meta": {"x": 1}})
        );
        let no_desc = json!({"name": "io.github.a/b", "version": "1.0.0", "title": "Bee"});
        let v = server_view(no_desc.as_object().unwrap().clone());
        assert_eq!(v["description"], "Bee");
        let blank = json!({"name": "io.github.a/b", "version": "1.0.0", "description": "  "});
        let v = server_view(blank.as_object().unwrap().clone());
        assert_eq!(v["description"], "io.github.a/b");
        let long =
            json!({"name": "io.github.a/b", "version": "1.0.0", "description": "é".repeat(150)});
        let v = server_view(long.as_object().unwrap().clone());
        let d = v["description"].as_str().unwrap();
        assert_eq!(d.chars().count(), 100);
        assert!(d.ends_with('…'));
        assert!(d.starts_with("éé"));
    }
}
