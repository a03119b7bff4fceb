//! What a reviewer is shown of a version, computed without IO: each tool's
//! worst-case chips and markers, the change against the current approved
//! version (core's diff, so the console classifies exactly as `diff` and
//! `verify` do) with its escalations first, the headline of a change, and
//! the notes of a changed schema.

use std::collections::BTreeSet;

use pinfold_core::annotations::Annotations;
use pinfold_core::card::{ServerCard, SignatureTool};
use pinfold_core::diff::{Change, Class, Diff, diff};
use pinfold_core::param_headers;
use pinfold_core::scope::tool_scopes;
use serde_json::Value;

/// How a chip reads: what it says about risk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Nothing to worry about (read-only, closed world, idempotent).
    Safe,
    /// Worth a look (writes, open world).
    Caution,
    /// The dangerous end (destructive, agency).
    Danger,
    /// A fact, not a judgement (a marker, a hint value).
    Info,
}

impl Tone {
    /// The CSS class of the tone.
    pub fn class(self) -> &'static str {
        match self {
            Tone::Safe => "chip safe",
            Tone::Caution => "chip caution",
            Tone::Danger => "chip danger",
            Tone::Info => "chip info",
        }
    }
}

/// One chip of a tool row: a worst-case annotation, a policy hint, a marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chip {
    /// What it says.
    pub label: String,
    /// How it reads.
    pub tone: Tone,
}

fn chip(label: impl Into<String>, tone: Tone) -> Chip {
    Chip {
        label: label.into(),
        tone,
    }
}

/// The chips of a tool's worst case (the reduction of every annotation
/// possibility, as a backward-compatible client is shown it), then its
/// reduced `_meta` policy hints.
pub fn tool_chips(tool: &SignatureTool) -> Vec<Chip> {
    let worst = Annotations::reduce(&tool.possibilities);
    let mut out = Vec::with_capacity(6);
    if worst.read_only {
        out.push(chip("read-only", Tone::Safe));
    } else {
        out.push(chip("writes", Tone::Caution));
    }
    if worst.destructive {
        out.push(chip("destructive", Tone::Danger));
    }
    if worst.idempotent && !worst.read_only {
        out.push(chip("idempotent", Tone::Safe));
    }
    if worst.open_world {
        out.push(chip("open world", Tone::Caution));
    } else {
        out.push(chip("closed world", Tone::Safe));
    }
    if worst.agency {
        out.push(chip("agency", Tone::Danger));
    }
    for (key, value) in tool.policy.reduced_values() {
        let key = key.trim_start_matches("mcp.dev/");
        let value = match value {
            Value::String(s) => s,
            other => other.to_string(),
        };
        out.push(chip(format!("{key}: {value}"), Tone::Info));
    }
    out
}

/// One row of a version's tool table.
#[derive(Debug, Clone)]
pub struct ToolRow<'a> {
    /// The tool.
    pub tool: &'a SignatureTool,
    /// Its worst-case chips.
    pub chips: Vec<Chip>,
    /// How many annotation possibilities it declares (more than one: its
    /// behaviour depends on the call).
    pub possibilities: usize,
    /// Resolvable per call (`tools/resolve`, SEP-1862).
    pub resolvable: bool,
    /// Annotations fetched per call (`tools/annotations`).
    pub dynamic: bool,
    /// Every scope any of its security scheme alternatives needs.
    pub scopes: Vec<String>,
}

/// The rows of every tool of `card`, in declared order.
pub fn tool_rows(card: &ServerCard) -> Vec<ToolRow<'_>> {
    card.signature
        .tools
        .iter()
        .map(|tool| ToolRow {
            tool,
            chips: tool_chips(tool),
            possibilities: tool.possibilities.len(),
            resolvable: tool.resolvable(),
            dynamic: tool.dynamic_annotations,
            scopes: tool_scopes(tool.security_schemes.as_deref()).scopes,
        })
        .collect()
}

/// The order escalations are listed in: behaviour first (annotations,
/// policy hints), then authority (scopes, security schemes), then
/// exposure (arguments newly sent in HTTP headers, `x-mcp-header`), then
/// what is new, then anything else.
fn escalation_rank(kind: &str) -> u8 {
    match kind {
        "annotation_possibility_added" => 0,
        "policy_hint_changed" => 1,
        "scope_added" => 2,
        "security_schemes_changed" => 3,
        "mcp_header_added" => 4,
        "tool_added" => 5,
        "prompt_added" | "resource_added" | "resource_template_added" => 6,
        _ => 7,
    }
}

/// A version compared with the current approved version of its server.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// Core's diff (old: the approved version, new: this one).
    pub diff: Diff,
    /// The escalations, in the order they are listed at the top.
    pub escalations: Vec<usize>,
    /// The headline.
    pub headline: Headline,
}

impl Comparison {
    /// The escalation changes, in listing order.
    pub fn escalations(&self) -> impl Iterator<Item = &Change> {
        self.escalations.iter().map(|i| &self.diff.changes[*i])
    }
}

/// Compares `card` with `approved` (the current approved version).
pub fn compare(approved: &ServerCard, card: &ServerCard) -> Comparison {
    let diff = diff(approved, card);
    let mut escalations: Vec<usize> = diff
        .changes
        .iter()
        .enumerate()
        .filter(|(_, c)| c.class == Class::Escalation)
        .map(|(i, _)| i)
        .collect();
    escalations.sort_by_key(|i| escalation_rank(diff.changes[*i].kind));
    let headline = headline(&diff);
    Comparison {
        diff,
        escalations,
        headline,
    }
}

/// The headline of a change: what a queue row says of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Headline {
    /// Tools added.
    pub added: usize,
    /// Tools removed.
    pub removed: usize,
    /// Tools present on both sides with at least one change.
    pub changed: usize,
    /// Escalations (of any item).
    pub escalations: usize,
}

/// The headline of `diff`.
pub fn headline(diff: &Diff) -> Headline {
    let mut h = Headline::default();
    let mut changed = BTreeSet::new();
    for c in &diff.changes {
        match c.kind {
            "tool_added" => h.added += 1,
            "tool_removed" => h.removed += 1,
            _ if c.pointer.starts_with("/signature/tools/") => {
                changed.insert(c.name.as_str());
            }
            _ => {}
        }
        if c.class == Class::Escalation {
            h.escalations += 1;
        }
    }
    h.changed = changed.len();
    h
}

/// The headline of a first version (nothing approved to compare with):
/// every tool is new.
pub fn first_headline(card: &ServerCard) -> Headline {
    Headline {
        added: card.signature.tools.len(),
        escalations: card.signature.tools.len()
            + card.signature.prompts.len()
            + card.signature.resources.len()
            + card.signature.resource_templates.len(),
        ..Headline::default()
    }
}

/// What changed between two JSON Schemas, in sentences: properties added
/// and removed, required ones added, types widened or changed, enum values
/// added and removed, down to nested `properties` and `items`.
pub fn schema_notes(before: &Value, after: &Value) -> Vec<String> {
    let mut notes = Vec::new();
    schema_walk("", before, after, &mut notes, 0);
    notes
}

fn types_of(schema: &Value) -> BTreeSet<String> {
    match schema.get("type") {
        Some(Value::String(s)) => [s.clone()].into(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => BTreeSet::new(),
    }
}

fn strings_of(schema: &Value, key: &str) -> Vec<String> {
    schema
        .get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn schema_walk(at: &str, before: &Value, after: &Value, notes: &mut Vec<String>, depth: usize) {
    if depth > 8 {
        return;
    }
    let here = if at.is_empty() { "the input" } else { at };
    let (tb, ta) = (types_of(before), types_of(after));
    if tb != ta {
        let widened = !tb.is_empty() && (ta.is_empty() || tb.is_subset(&ta));
        let fmt = |t: &BTreeSet<String>| {
            if t.is_empty() {
                "any type".to_owned()
            } else {
                t.iter().cloned().collect::<Vec<_>>().join(" | ")
            }
        };
        notes.push(format!(
            "{here}: type {} from {} to {}",
            if widened { "widened" } else { "changed" },
            fmt(&tb),
            fmt(&ta)
        ));
    }
    let (eb, ea) = (strings_of(before, "enum"), strings_of(after, "enum"));
    let added: Vec<&String> = ea.iter().filter(|v| !eb.contains(v)).collect();
    let removed: Vec<&String> = eb.iter().filter(|v| !ea.contains(v)).collect();
    if !eb.is_empty() && !added.is_empty() {
        notes.push(format!("{here}: new enum values {}", join_quoted(&added)));
    }
    if !eb.is_empty() && ea.is_empty() && after.get("enum").is_none() {
        notes.push(format!("{here}: enum removed (any value accepted)"));
    } else if !removed.is_empty() {
        notes.push(format!(
            "{here}: enum values removed {}",
            join_quoted(&removed)
        ));
    }
    let (hb, ha) = (
        before.get(param_headers::KEYWORD),
        after.get(param_headers::KEYWORD),
    );
    if hb != ha && !at.is_empty() {
        let header = |v: &Value| match v {
            Value::String(s) => format!("{}{s}", param_headers::HEADER_PREFIX),
            other => other.to_string(),
        };
        notes.push(match (hb, ha) {
            (_, Some(a)) => format!("{here}: now sent in HTTP header {}", header(a)),
            (Some(b), None) => format!("{here}: no longer sent in HTTP header {}", header(b)),
            (None, None) => unreachable!("they differ"),
        });
    }
    let (rb, ra) = (
        strings_of(before, "required"),
        strings_of(after, "required"),
    );
    let newly: Vec<&String> = ra.iter().filter(|v| !rb.contains(v)).collect();
    if !newly.is_empty() {
        notes.push(format!("{here}: now requires {}", join_quoted(&newly)));
    }
    let empty = serde_json::Map::new();
    let pb = before
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let pa = after
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for (k, v) in pa {
        let path = if at.is_empty() {
            k.clone()
        } else {
            format!("{at}.{k}")
        };
        match pb.get(k) {
            None => {
                notes.push(format!("property {path} added"));
                if let Some(h) = v.get(param_headers::KEYWORD) {
                    let h = h.as_str().map_or_else(|| h.to_string(), str::to_owned);
                    notes.push(format!(
                        "{path}: sent in HTTP header {}{h}",
                        param_headers::HEADER_PREFIX
                    ));
                }
            }
            Some(old) if old != v => schema_walk(&path, old, v, notes, depth + 1),
            Some(_) => {}
        }
    }
    for k in pb.keys().filter(|k| !pa.contains_key(*k)) {
        let path = if at.is_empty() {
            k.clone()
        } else {
            format!("{at}.{k}")
        };
        notes.push(format!("property {path} removed"));
    }
    if let (Some(ib), Some(ia)) = (before.get("items"), after.get("items"))
        && ib != ia
    {
        schema_walk(
            &format!("{}[]", if at.is_empty() { "items" } else { at }),
            ib,
            ia,
            notes,
            depth + 1,
        );
    }
    if before.get("additionalProperties") != after.get("additionalProperties") {
        notes.push(format!("{here}: additionalProperties changed"));
    }
}

fn join_quoted(items: &[&String]) -> String {
    items
        .iter()
        .map(|s| format!("{s:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pinfold_core::card::Limits;
    use serde_json::json;

    fn card(tools: Value) -> ServerCard {
        ServerCard::from_value(
            &json!({"name": "io.github.acme/files", "version": "1.0.0",
                "signature": {"tools": tools}}),
            &Limits::default(),
        )
        .unwrap()
    }

    #[test]
    fn chips_show_the_worst_case_of_every_possibility() {
        let c = card(json!([{"name": "manage", "inputSchema": {"type": "object"},
            "annotations": [{"readOnlyHint": true, "openWorldHint": false}, {"readOnlyHint": false, "destructiveHint": true, "openWorldHint": false}]}]));
        let labels: Vec<String> = tool_chips(&c.signature.tools[0])
            .into_iter()
            .map(|c| c.label)
            .collect();
        assert_eq!(labels, ["writes", "destructive", "closed world"]);
    }

    #[test]
    fn escalations_come_first_in_behaviour_order() {
        let old = card(json!([{"name": "read", "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true}}]));
        let new = card(json!([
            {"name": "delete", "inputSchema": {"type": "object"}},
            {"name": "read", "inputSchema": {"type": "object"},
                "annotations": [{"readOnlyHint": true}, {"readOnlyHint": false}]}]));
        let cmp = compare(&old, &new);
        let kinds: Vec<&str> = cmp.escalations().map(|c| c.kind).collect();
        assert_eq!(kinds, ["annotation_possibility_added", "tool_added"]);
        assert_eq!(
            cmp.headline,
            Headline {
                added: 1,
                removed: 0,
                changed: 1,
                escalations: 2
            }
        );
    }

    #[test]
    fn a_new_x_mcp_header_is_listed_among_the_escalations_with_its_note() {
        let old = card(
            json!([{"name": "query", "annotations": {"readOnlyHint": true},
            "inputSchema": {"type": "object", "properties": {"region": {"type": "string"}}}}]),
        );
        let new = card(
            json!([{"name": "query", "annotations": {"readOnlyHint": true},
            "inputSchema": {"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "zone": {"type": "string", "x-mcp-header": "Zone"}}}},
            {"name": "other", "inputSchema": {"type": "object"}}]),
        );
        let cmp = compare(&old, &new);
        let kinds: Vec<&str> = cmp.escalations().map(|c| c.kind).collect();
        assert_eq!(
            kinds,
            ["mcp_header_added", "mcp_header_added", "tool_added"]
        );
        assert_eq!(cmp.headline.escalations, 3);
        let schema = |c: &ServerCard| {
            let tool = c.signature.tools.iter().find(|t| t.name == "query");
            tool.and_then(|t| t.input_schema.clone()).unwrap()
        };
        assert_eq!(
            schema_notes(&schema(&old), &schema(&new)),
            [
                "region: now sent in HTTP header Mcp-Param-Region",
                "property zone added",
                "zone: sent in HTTP header Mcp-Param-Zone",
            ]
        );
    }

    #[test]
    fn schema_notes_name_properties_types_and_enums() {
        let before = json!({"type": "object", "required": ["a"], "properties": {
            "a": {"type": "string", "enum": ["x"]}, "gone": {"type": "string"}}});
        let after = json!({"type": "object", "required": ["a", "b"], "properties": {
            "a": {"type": ["string", "number"], "enum": ["x", "y"]}, "b": {"type": "string"}}});
        assert_eq!(
            schema_notes(&before, &after),
            [
                "the input: now requires \"b\"",
                "a: type widened from string to number | string",
                "a: new enum values \"y\"",
                "property b added",
                "property gone removed",
            ]
        );
    }
}
