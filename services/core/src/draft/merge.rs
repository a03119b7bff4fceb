//! Folding several captures into one signature.
//!
//! A server may show different tools, or the same tool with different
//! hints, to different users or under different feature flags (SEP-2091
//! §Tools Not Initially Available, §Behavioral Requirements: the signature
//! is the union of everything it may ever offer). One capture per role or
//! flag, merged here, gives that union.
//!
//! # Rules
//!
//! | member | rule |
//! |--------|------|
//! | tools, prompts, resources, resource templates | union, keyed by `name`, `name`, `uri`, `uriTemplate`; each list sorted by its key; all four lists always present |
//! | tool `annotations` | every distinct possibility, compared normalised with `title` ignored (as containment compares them), in the order of their normalised form: one object when there is one, an array otherwise (SEP-2091 §Tool Signatures with Annotation Arrays); a capture without `annotations` contributes the defaults `{}` when another capture has some |
//! | tool `_meta` `mcp.dev/effect`, `mcp.dev/resultSensitivity` | every value seen, one string or an array in severity order |
//! | tool `_meta` `mcp.dev/requiresConfirmation`, `mcp.dev/idempotent` | every value seen, one boolean or `[false, true]`; a capture that omits a hint another capture gives contributes `false`, the hint's documented default |
//! | tool `securitySchemes` | the union of the alternatives |
//! | tool `resolve`, `dynamicAnnotations` | `true` when any capture says `true` |
//! | tool `inputSchema`, `outputSchema`, prompt `arguments` | equal (canonically, RFC 8785) in every capture, or a [`Conflict`] naming each version, where it was found and where it differs |
//! | anything else (descriptions, titles, other `_meta` keys, ...) | one value, chosen deterministically (the smallest canonical form); a [`Note`] when captures disagree |
//!
//! The result depends only on the set of captures: merging is
//! deterministic, commutative and idempotent. Without conflicts, each
//! capture is contained in the merged signature: [`crate::contain::check`]
//! finds no violation in it (descriptions and titles that differ are
//! notices there, as here).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::annotations::{
    Annotations, META_EFFECT, META_IDEMPOTENT, META_REQUIRES_CONFIRMATION, META_RESULT_SENSITIVITY,
    PolicyHints,
};
use crate::card::{Limits, Mode, parse_security_schemes, parse_signature};
use crate::digest::canonical_bytes;
use crate::error::{ValidationErrors, pointer_index, pointer_push};

/// The four lists of a signature, with the member naming each item.
const LISTS: [(&str, &str); 4] = [
    ("tools", "name"),
    ("prompts", "name"),
    ("resources", "uri"),
    ("resourceTemplates", "uriTemplate"),
];

/// The policy-hint keys merged value by value.
const POLICY_KEYS: [&str; 4] = [
    META_EFFECT,
    META_RESULT_SENSITIVITY,
    META_REQUIRES_CONFIRMATION,
    META_IDEMPOTENT,
];

/// One capture to merge: an object holding any of `tools`, `prompts`,
/// `resources` and `resourceTemplates` (a live capture, a saved list
/// result, or the `signature` of a card).
#[derive(Debug, Clone)]
pub struct Capture<'a> {
    /// Where it came from (a file name, a URL), as shown in conflicts.
    pub label: String,
    /// The JSON pointer of `lists` in its source document (`""` for a list
    /// result, `"/signature"` for a card), so that pointers in conflicts
    /// and errors point into that document.
    pub base: String,
    /// The object holding the lists.
    pub lists: &'a Value,
}

/// What two captures disagree on and a signature cannot hold both of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConflictKind {
    /// A tool's `inputSchema` differs.
    InputSchema,
    /// A tool's `outputSchema` differs (or is present in one capture only).
    OutputSchema,
    /// A prompt's `arguments` differ.
    PromptArguments,
}

/// Where a value was found.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Location {
    /// The capture's label.
    pub capture: String,
    /// JSON pointer to the value in that capture's document.
    pub pointer: String,
}

/// One of the versions in a conflict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConflictVersion {
    /// The value; absent when these captures do not have the member.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// Every place this version was found.
    pub found_in: Vec<Location>,
    /// JSON pointers, relative to the value, where this version differs
    /// from the first one (empty for the first; at most 16).
    pub differs_at: Vec<String>,
}

/// Captures that disagree on something a signature must hold exactly once.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Conflict {
    /// What differs.
    pub kind: ConflictKind,
    /// The tool or prompt concerned.
    pub item: String,
    /// One sentence.
    pub message: String,
    /// The distinct versions (two or more), in canonical order.
    pub versions: Vec<ConflictVersion>,
}

/// Captures disagree on a value that does not decide conformance; one was
/// kept.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Note {
    /// `tools`, `prompts`, `resources` or `resourceTemplates`.
    pub list: String,
    /// The item's name, URI or URI template.
    pub item: String,
    /// JSON pointer of the member within the item (`/description`,
    /// `/_meta/vendor~1key`).
    pub member: String,
    /// How many distinct values the captures had.
    pub distinct: usize,
    /// The value kept.
    pub kept: Value,
}

/// The outcome of [`merge`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Merged {
    /// `{"tools", "prompts", "resources", "resourceTemplates"}`. When there
    /// are conflicts it holds one of the versions and must not be used as
    /// a signature.
    pub signature: Value,
    /// What the captures disagree on irreconcilably.
    pub conflicts: Vec<Conflict>,
    /// Values the captures disagree on that do not decide conformance.
    pub notes: Vec<Note>,
}

impl Merged {
    /// True when the signature holds every capture.
    pub fn is_clean(&self) -> bool {
        self.conflicts.is_empty()
    }
}

/// One item of one capture.
struct Occ<'a> {
    capture: usize,
    pointer: String,
    raw: &'a Map<String, Value>,
}

struct Ctx<'c, 'a> {
    captures: &'c [Capture<'a>],
    conflicts: Vec<Conflict>,
    notes: Vec<Note>,
}

/// Merges `captures` (see the module's rules). Each capture is first
/// checked as an observation (shape only); problems are reported with
/// pointers into its document and its label in the message.
pub fn merge(captures: &[Capture<'_>], limits: &Limits) -> Result<Merged, ValidationErrors> {
    let mut errors = ValidationErrors::new();
    for c in captures {
        let mut e = ValidationErrors::new();
        parse_signature(c.lists, &c.base, limits, Mode::Observed, &mut e);
        for mut err in e.errors {
            err.message = format!("{}: {}", c.label, err.message);
            errors.errors.push(err);
        }
    }
    errors.into_result(())?;
    let mut ctx = Ctx {
        captures,
        conflicts: Vec::new(),
        notes: Vec::new(),
    };
    let mut signature = Map::new();
    for (list, key) in LISTS {
        let mut items: BTreeMap<&str, Vec<Occ<'_>>> = BTreeMap::new();
        for (ci, c) in captures.iter().enumerate() {
            let Some(Value::Array(arr)) = c.lists.get(list) else {
                continue;
            };
            let lp = pointer_push(&c.base, list);
            for (i, item) in arr.iter().enumerate() {
                let Some(raw) = item.as_object() else {
                    continue;
                };
                let Some(k) = raw.get(key).and_then(Value::as_str) else {
                    continue;
                };
                items.entry(k).or_default().push(Occ {
                    capture: ci,
                    pointer: pointer_index(&lp, i),
                    raw,
                });
            }
        }
        let merged: Vec<Value> = items
            .iter()
            .map(|(k, occ)| {
                Value::Object(match list {
                    "tools" => ctx.tool(k, occ),
                    "prompts" => ctx.prompt(k, occ),
                    _ => ctx.plain(list, k, occ, &[]),
                })
            })
            .collect();
        signature.insert(list.to_owned(), Value::Array(merged));
    }
    Ok(Merged {
        signature: Value::Object(signature),
        conflicts: ctx.conflicts,
        notes: ctx.notes,
    })
}

/// The value kept among canonically equal or differing values: the
/// smallest canonical form, then the smallest plain text (so that `1` and
/// `1.0`, canonically equal, still pick one deterministically).
fn representative<'v>(values: impl IntoIterator<Item = &'v Value>) -> Option<&'v Value> {
    values
        .into_iter()
        .min_by_key(|v| (canonical_bytes(v), v.to_string()))
}

impl Ctx<'_, '_> {
    fn location(&self, o: &Occ<'_>, member: &str) -> Location {
        Location {
            capture: self.captures[o.capture].label.clone(),
            pointer: if member.is_empty() {
                o.pointer.clone()
            } else {
                pointer_push(&o.pointer, member)
            },
        }
    }

    /// Members merged with the generic rule: one value kept, a note when
    /// captures disagree. `skip` lists members handled elsewhere.
    fn plain(
        &mut self,
        list: &str,
        item: &str,
        occ: &[Occ<'_>],
        skip: &[&str],
    ) -> Map<String, Value> {
        let mut keys: BTreeSet<&str> = BTreeSet::new();
        for o in occ {
            keys.extend(o.raw.keys().map(String::as_str));
        }
        let mut out = Map::new();
        for k in keys {
            if skip.contains(&k) {
                continue;
            }
            let values: Vec<&Value> = occ.iter().filter_map(|o| o.raw.get(k)).collect();
            if let Some(v) = self.pick(list, item, &pointer_push("", k), &values) {
                out.insert(k.to_owned(), v);
            }
        }
        out
    }

    /// One value among `values` (a note when they differ).
    fn pick(&mut self, list: &str, item: &str, member: &str, values: &[&Value]) -> Option<Value> {
        let kept = representative(values.iter().copied())?.clone();
        let distinct: BTreeSet<Vec<u8>> = values.iter().map(|v| canonical_bytes(v)).collect();
        if distinct.len() > 1 {
            self.notes.push(Note {
                list: list.to_owned(),
                item: item.to_owned(),
                member: member.to_owned(),
                distinct: distinct.len(),
                kept: kept.clone(),
            });
        }
        Some(kept)
    }

    /// A member that must be equal everywhere: its value, or a conflict.
    /// `absent_as` is what an absent member counts as (`None`: absence is
    /// its own version).
    fn exact(
        &mut self,
        kind: ConflictKind,
        item: &str,
        member: &str,
        occ: &[Occ<'_>],
        absent_as: Option<&Value>,
    ) -> Option<Value> {
        // Group by canonical form; absent members group under `None`.
        let mut groups: BTreeMap<Option<Vec<u8>>, Vec<&Occ<'_>>> = BTreeMap::new();
        for o in occ {
            let key = o.raw.get(member).or(absent_as).map(canonical_bytes);
            groups.entry(key).or_default().push(o);
        }
        fn value_of<'a>(g: &[&Occ<'a>], member: &str) -> Option<&'a Value> {
            representative(g.iter().filter_map(|o| o.raw.get(member)))
        }
        if groups.len() == 1 {
            let g = groups.values().next().expect("one group");
            return value_of(g, member).cloned();
        }
        let mut versions: Vec<ConflictVersion> = groups
            .values()
            .map(|g| {
                let mut found_in: Vec<Location> =
                    g.iter().map(|o| self.location(o, member)).collect();
                found_in.sort();
                ConflictVersion {
                    value: value_of(g, member).cloned(),
                    found_in,
                    differs_at: Vec::new(),
                }
            })
            .collect();
        let first = versions[0].value.clone().or_else(|| absent_as.cloned());
        for v in versions.iter_mut().skip(1) {
            let this = v.value.clone().or_else(|| absent_as.cloned());
            let mut at = Vec::new();
            match (&first, &this) {
                (Some(a), Some(b)) => differences(a, b, "", &mut at),
                _ => at.push(String::new()),
            }
            v.differs_at = at;
        }
        let what = match kind {
            ConflictKind::InputSchema => format!(
                "tool {item:?} has {} different inputSchemas",
                versions.len()
            ),
            ConflictKind::OutputSchema => format!(
                "tool {item:?} has {} different outputSchemas (absent counts as one)",
                versions.len()
            ),
            ConflictKind::PromptArguments => format!(
                "prompt {item:?} has {} different argument lists",
                versions.len()
            ),
        };
        self.conflicts.push(Conflict {
            kind,
            item: item.to_owned(),
            message: format!("{what}; a signature declares exactly one"),
            versions,
        });
        // Keep the first version so the (unusable) signature stays well formed.
        first
    }

    fn prompt(&mut self, name: &str, occ: &[Occ<'_>]) -> Map<String, Value> {
        let mut out = self.plain("prompts", name, occ, &["arguments"]);
        let empty = Value::Array(Vec::new());
        if let Some(args) = self.exact(
            ConflictKind::PromptArguments,
            name,
            "arguments",
            occ,
            Some(&empty),
        ) && occ.iter().any(|o| o.raw.contains_key("arguments"))
        {
            out.insert("arguments".into(), args);
        }
        out
    }

    fn tool(&mut self, name: &str, occ: &[Occ<'_>]) -> Map<String, Value> {
        let special = [
            "inputSchema",
            "outputSchema",
            "annotations",
            "_meta",
            "securitySchemes",
            "resolve",
            "dynamicAnnotations",
        ];
        let mut out = self.plain("tools", name, occ, &special);
        for (member, kind) in [
            ("inputSchema", ConflictKind::InputSchema),
            ("outputSchema", ConflictKind::OutputSchema),
        ] {
            if let Some(v) = self.exact(kind, name, member, occ, None) {
                out.insert(member.into(), v);
            }
        }
        if let Some(a) = merge_annotations(occ) {
            out.insert("annotations".into(), a);
        }
        if let Some(m) = self.merge_meta(name, occ) {
            out.insert("_meta".into(), Value::Object(m));
        }
        if let Some(s) = merge_schemes(occ) {
            out.insert("securitySchemes".into(), s);
        }
        for flag in ["resolve", "dynamicAnnotations"] {
            let seen: Vec<bool> = occ
                .iter()
                .filter_map(|o| o.raw.get(flag).and_then(Value::as_bool))
                .collect();
            if !seen.is_empty() {
                out.insert(flag.into(), Value::Bool(seen.contains(&true)));
            }
        }
        out
    }

    fn merge_meta(&mut self, tool: &str, occ: &[Occ<'_>]) -> Option<Map<String, Value>> {
        let metas: Vec<&Map<String, Value>> = occ
            .iter()
            .filter_map(|o| o.raw.get("_meta").and_then(Value::as_object))
            .collect();
        if metas.is_empty() {
            return None;
        }
        let mut out = Map::new();
        // Policy hints, value by value; an absent `_meta` parses to "no claim".
        let hints: Vec<PolicyHints> = occ
            .iter()
            .map(|o| {
                let mut ignored = ValidationErrors::new();
                PolicyHints::parse(o.raw.get("_meta"), "", &mut ignored)
            })
            .collect();
        let effects: BTreeSet<_> = hints
            .iter()
            .flat_map(|h| h.effect.iter().copied())
            .collect();
        if !effects.is_empty() {
            let vals: Vec<Value> = effects.iter().map(|e| Value::from(e.as_str())).collect();
            out.insert(META_EFFECT.into(), one_or_array(vals));
        }
        let sens: BTreeSet<_> = hints
            .iter()
            .flat_map(|h| h.sensitivity.iter().copied())
            .collect();
        if !sens.is_empty() {
            let vals: Vec<Value> = sens.iter().map(|s| Value::from(s.as_str())).collect();
            out.insert(META_RESULT_SENSITIVITY.into(), one_or_array(vals));
        }
        for (key, idx) in [(META_REQUIRES_CONFIRMATION, 2), (META_IDEMPOTENT, 3)] {
            if !hints.iter().any(|h| h.present[idx]) {
                continue;
            }
            // Absent parses to `[false]`, the default a capture without the
            // hint stands for.
            let vals: BTreeSet<bool> = hints
                .iter()
                .flat_map(|h| {
                    if idx == 2 {
                        h.requires_confirmation.clone()
                    } else {
                        h.idempotent.clone()
                    }
                })
                .collect();
            out.insert(
                key.into(),
                one_or_array(vals.into_iter().map(Value::Bool).collect()),
            );
        }
        let mut others: BTreeSet<&str> = BTreeSet::new();
        for m in &metas {
            others.extend(
                m.keys()
                    .map(String::as_str)
                    .filter(|k| !POLICY_KEYS.contains(k)),
            );
        }
        for k in others {
            let values: Vec<&Value> = metas.iter().filter_map(|m| m.get(k)).collect();
            let member = pointer_push("/_meta", k);
            if let Some(v) = self.pick("tools", tool, &member, &values) {
                out.insert(k.to_owned(), v);
            }
        }
        Some(out)
    }
}

fn one_or_array(mut vals: Vec<Value>) -> Value {
    if vals.len() == 1 {
        vals.pop().expect("one value")
    } else {
        Value::Array(vals)
    }
}

/// Every distinct possibility, ordered by its normalised form.
fn merge_annotations(occ: &[Occ<'_>]) -> Option<Value> {
    fn present<'a>(o: &Occ<'a>) -> Option<&'a Value> {
        o.raw.get("annotations").filter(|v| !v.is_null())
    }
    if !occ.iter().any(|o| present(o).is_some()) {
        return None;
    }
    let defaults = Value::Object(Map::new());
    let mut groups: BTreeMap<Vec<u8>, Vec<&Value>> = BTreeMap::new();
    for o in occ {
        let items: Vec<&Value> = match present(o) {
            None => vec![&defaults],
            Some(Value::Array(items)) => items.iter().collect(),
            Some(v) => vec![v],
        };
        for a in items {
            let mut ignored = ValidationErrors::new();
            let key = Annotations::parse(a, "", &mut ignored).conformance_key();
            groups.entry(key).or_default().push(a);
        }
    }
    let reps: Vec<Value> = groups
        .values()
        .filter_map(|g| representative(g.iter().copied()).cloned())
        .collect();
    Some(one_or_array(reps))
}

/// The union of `securitySchemes` alternatives, compared as containment
/// compares them (oauth2 scopes as a set).
fn merge_schemes(occ: &[Occ<'_>]) -> Option<Value> {
    let lists: Vec<&Vec<Value>> = occ
        .iter()
        .filter_map(|o| o.raw.get("securitySchemes").and_then(Value::as_array))
        .collect();
    if lists.is_empty() {
        return None;
    }
    let mut groups: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for s in lists.into_iter().flatten() {
        let mut ignored = ValidationErrors::new();
        let parsed = parse_security_schemes(&Value::Array(vec![s.clone()]), "", &mut ignored);
        let key = serde_json::to_string(&parsed).unwrap_or_default();
        groups.entry(key).or_default().push(s);
    }
    Some(Value::Array(
        groups
            .values()
            .filter_map(|g| representative(g.iter().copied()).cloned())
            .collect(),
    ))
}

/// JSON pointers (relative to `base`) where `a` and `b` differ, at most 16.
fn differences(a: &Value, b: &Value, base: &str, out: &mut Vec<String>) {
    const MAX: usize = 16;
    if out.len() >= MAX || canonical_bytes(a) == canonical_bytes(b) {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let p = pointer_push(base, k);
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => differences(u, v, &p, out),
                    _ => {
                        if out.len() < MAX {
                            out.push(p);
                        }
                    }
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                differences(u, v, &pointer_index(base, i), out);
            }
        }
        _ => out.push(base.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contain::{Mode as EnforcementMode, Observation, check};
    use serde_json::json;

    fn cap<'a>(label: &str, lists: &'a Value) -> Capture<'a> {
        Capture {
            label: label.into(),
            base: String::new(),
            lists,
        }
    }

    fn merged(docs: &[&Value]) -> Merged {
        let caps: Vec<Capture<'_>> = docs
            .iter()
            .enumerate()
            .map(|(i, d)| cap(&format!("c{i}"), d))
            .collect();
        merge(&caps, &Limits::default()).unwrap()
    }

    fn tool(name: &str, ann: Value) -> Value {
        json!({"name": name, "description": "d", "inputSchema": {"type": "object"}, "annotations": ann})
    }

    #[test]
    fn union_of_items_sorted_and_all_lists_present() {
        let a = json!({"tools": [tool("b", json!({})), tool("a", json!({}))]});
        let b =
            json!({"prompts": [{"name": "p"}], "resources": [{"uri": "file:///x", "name": "x"}]});
        let m = merged(&[&a, &b]);
        assert!(m.is_clean());
        let names: Vec<&str> = m.signature["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(m.signature["prompts"], json!([{"name": "p"}]));
        assert_eq!(m.signature["resourceTemplates"], json!([]));
    }

    #[test]
    fn annotations_become_an_array_of_every_possibility() {
        let ro = json!({"readOnlyHint": true, "openWorldHint": false});
        let w = json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": false});
        let a = json!({"tools": [tool("t", ro.clone())]});
        let b = json!({"tools": [tool("t", w.clone())]});
        let m = merged(&[&a, &b]);
        let anns = m.signature["tools"][0]["annotations"].as_array().unwrap();
        assert_eq!(anns.len(), 2);
        assert!(anns.contains(&ro) && anns.contains(&w));
        // The same possibility written differently (defaults spelled out,
        // another title) is one possibility.
        let ro2 = json!({"readOnlyHint": true, "destructiveHint": true, "openWorldHint": false, "title": "x"});
        let c = json!({"tools": [tool("t", ro2)]});
        let m2 = merged(&[&a, &c]);
        assert!(m2.signature["tools"][0]["annotations"].is_object());
        // Absent annotations are the defaults when another capture has some.
        let d = json!({"tools": [{"name": "t", "description": "d", "inputSchema": {"type": "object"}}]});
        let m3 = merged(&[&a, &d]);
        assert!(
            m3.signature["tools"][0]["annotations"]
                .as_array()
                .unwrap()
                .contains(&json!({}))
        );
        // ... and stay absent when no capture has any.
        let m4 = merged(&[&d, &d]);
        assert!(m4.signature["tools"][0].get("annotations").is_none());
    }

    #[test]
    fn policy_hints_collect_values() {
        let meta = |m: Value| json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}, "_meta": m}]});
        let a = meta(
            json!({"mcp.dev/effect": "write", "mcp.dev/requiresConfirmation": true, "vendor/x": 1}),
        );
        let b = meta(
            json!({"mcp.dev/effect": ["read", "delete"], "mcp.dev/resultSensitivity": "internal", "vendor/x": 2}),
        );
        let m = merged(&[&a, &b]);
        let got = &m.signature["tools"][0]["_meta"];
        assert_eq!(got["mcp.dev/effect"], json!(["read", "write", "delete"]));
        assert_eq!(got["mcp.dev/resultSensitivity"], json!("internal"));
        // b omits requiresConfirmation: its default false joins the values.
        assert_eq!(got["mcp.dev/requiresConfirmation"], json!([false, true]));
        assert!(got.get("mcp.dev/idempotent").is_none());
        assert_eq!(got["vendor/x"], json!(1));
        assert_eq!(m.notes.len(), 1);
        assert_eq!(m.notes[0].member, "/_meta/vendor~1x");
        assert_eq!(m.notes[0].distinct, 2);
    }

    #[test]
    fn schema_conflicts_name_both_versions() {
        let s1 = json!({"type": "object", "properties": {"path": {"type": "string"}}});
        let s2 = json!({"type": "object", "properties": {"path": {"type": "string"}, "force": {"type": "boolean"}}});
        let a = json!({"tools": [{"name": "t", "inputSchema": s1}]});
        let b = json!({"tools": [{"name": "u", "inputSchema": {"type": "object"}}, {"name": "t", "inputSchema": s2}]});
        let caps = [
            Capture {
                label: "admin.json".into(),
                base: "/signature".into(),
                lists: &a,
            },
            cap("user", &b),
        ];
        let m = merge(&caps, &Limits::default()).unwrap();
        assert!(!m.is_clean());
        assert_eq!(m.conflicts.len(), 1);
        let c = &m.conflicts[0];
        assert_eq!(c.kind, ConflictKind::InputSchema);
        assert_eq!(c.item, "t");
        assert_eq!(c.versions.len(), 2);
        let places: Vec<(&str, &str)> = c
            .versions
            .iter()
            .map(|v| {
                (
                    v.found_in[0].capture.as_str(),
                    v.found_in[0].pointer.as_str(),
                )
            })
            .collect();
        assert!(places.contains(&("admin.json", "/signature/tools/0/inputSchema")));
        assert!(places.contains(&("user", "/tools/1/inputSchema")));
        assert!(c.versions.iter().any(|v| v.value == Some(s1.clone())));
        assert!(c.versions.iter().any(|v| v.value == Some(s2.clone())));
        assert_eq!(c.versions[1].differs_at, ["/properties/force"]);
        let text = serde_json::to_value(c).unwrap();
        assert_eq!(text["kind"], "input_schema");
    }

    #[test]
    fn output_schema_absent_and_present_conflict_prompt_arguments_too() {
        let a = json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}}],
            "prompts": [{"name": "p"}]});
        let b = json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}}],
            "prompts": [{"name": "p", "arguments": []}]});
        let c = json!({"prompts": [{"name": "p", "arguments": [{"name": "x"}]}]});
        let m = merged(&[&a, &b]);
        assert_eq!(m.conflicts.len(), 1, "{:?}", m.conflicts);
        assert_eq!(m.conflicts[0].kind, ConflictKind::OutputSchema);
        assert_eq!(m.conflicts[0].versions[0].value, None);
        assert_eq!(m.conflicts[0].versions[1].differs_at, [""]);
        // Absent and empty arguments agree; a real list does not.
        let m = merged(&[&b, &c]);
        assert_eq!(m.conflicts[0].kind, ConflictKind::PromptArguments);
    }

    #[test]
    fn schemes_and_flags() {
        let a = json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}, "resolve": true,
            "securitySchemes": [{"type": "oauth2", "scopes": ["b", "a"]}]}]});
        let b = json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}, "resolve": false,
            "securitySchemes": [{"type": "oauth2", "scopes": ["a", "b"]}, {"type": "noauth"}]}]});
        let m = merged(&[&a, &b]);
        let t = &m.signature["tools"][0];
        assert_eq!(t["resolve"], true);
        assert_eq!(t["securitySchemes"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn every_capture_is_contained_in_the_merge() {
        let a = json!({"tools": [
            tool("t", json!({"readOnlyHint": true})),
            {"name": "v", "inputSchema": {"type": "object"}, "_meta": {"mcp.dev/idempotent": true}}
        ]});
        let b = json!({"tools": [
            tool("t", json!({"destructiveHint": false})),
            {"name": "v", "inputSchema": {"type": "object"}, "securitySchemes": [{"type": "noauth"}]}
        ], "resources": [{"uri": "file:///a", "name": "a"}]});
        let m = merged(&[&a, &b]);
        let card = json!({"name": "a.b/c", "version": "1.0.0", "signature": m.signature});
        let card = crate::card::ServerCard::from_value(&card, &Limits::default()).unwrap();
        for obs in [&a, &b] {
            let o = Observation::from_value(obs, &Limits::default()).unwrap();
            let r = check(&card.signature, &o, EnforcementMode::Strict);
            assert!(r.conformant, "{r:?}");
        }
    }

    #[test]
    fn bad_captures_are_reported_with_their_label() {
        let a = json!({"tools": [{"description": "no name"}]});
        let e = merge(&[cap("live", &a)], &Limits::default()).unwrap_err();
        assert_eq!(e.errors[0].pointer, "/tools/0/name");
        assert!(e.errors[0].message.starts_with("live: "), "{e:?}");
        let e = merge(&[cap("x", &json!([]))], &Limits::default()).unwrap_err();
        assert!(e.errors[0].message.contains("object"), "{e:?}");
    }

    #[test]
    fn differences_are_bounded() {
        let a = json!({"a": 1, "b": [1, 2], "c": {"d": 1}});
        let b = json!({"a": 2, "b": [1, 3], "c": {"e": 1}, "f": 0});
        let mut out = Vec::new();
        differences(&a, &b, "", &mut out);
        assert_eq!(out, ["/a", "/b/1", "/c/d", "/c/e", "/f"]);
        let big_a = Value::Object((0..40).map(|i| (format!("k{i:02}"), json!(i))).collect());
        let mut out = Vec::new();
        differences(&big_a, &json!({}), "", &mut out);
        assert_eq!(out.len(), 16);
    }
}
