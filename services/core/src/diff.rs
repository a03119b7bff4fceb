//! Capability diff between two versions: what a reviewer reads.
//!
//! Every change is classified (the overall classification is the most
//! serious one present: escalation, else incompatible, else reduction,
//! else neutral). The classes follow one rule shared with `verify`
//! ([`violation_class`]): a change whose new side a live server would show
//! and `verify` would flag against the old version is `escalation` when
//! that violation is less safe, `incompatible` otherwise, and never
//! `neutral`.
//!
//! | change | kind | class |
//! |--------|------|-------|
//! | tool / prompt / resource / template added | `tool_added`, `prompt_added`, `resource_added`, `resource_template_added` | escalation |
//! | tool / prompt / resource / template removed | `tool_removed`, ... `_removed` | reduction |
//! | annotation possibility added, more dangerous on some hint than every old possibility | `annotation_possibility_added` | escalation |
//! | annotation possibility added, at most as dangerous as an old one | `annotation_possibility_added` | incompatible |
//! | annotation possibility removed | `annotation_possibility_removed` | reduction |
//! | `_meta` policy hint: a value more severe than every old value, a claim where there was none, or a claim dropped | `policy_hint_changed` | escalation |
//! | `_meta` policy hint: another value not among the old ones | `policy_hint_changed` | incompatible |
//! | `_meta` policy hint: values only removed | `policy_hint_changed` | reduction |
//! | scope added to / removed from a tool's envelope | `scope_added` / `scope_removed` | escalation / reduction |
//! | `securitySchemes` alternatives changed (same envelope): one added / only removed | `security_schemes_changed` | incompatible (escalation for a scheme type not judged) / reduction |
//! | an `inputSchema` property gains an `x-mcp-header` (a new property carrying one, or one naming another header; SEP-2243, see [`crate::param_headers`]) | `mcp_header_added` | escalation |
//! | `inputSchema`, `outputSchema`, prompt `arguments` changed | `input_schema_changed`, `output_schema_changed`, `prompt_arguments_changed` | incompatible |
//! | `resolve` / `dynamicAnnotations`, description, title changed | `resolve_changed`, `dynamic_annotations_changed`, `description_changed`, `title_changed` | neutral |
//! | card member changed (`remotes`, `repository`, ...; `version` ignored) | `card_field_changed` | neutral |
//!
//! "More dangerous" is the danger order of [`crate::annotations`]. Pointers
//! point into the new document, or into the old one for removals. Changes
//! are ordered: card members by key, then tools, prompts, resources and
//! templates by name, each item's changes in the order of the table.
//! `docs/SEMANTICS.md` (section 7) describes the same classification.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use crate::annotations::exceeds;
use crate::card::{ServerCard, SignatureTool};
use crate::digest::canonical_bytes;
use crate::error::{pointer_index, pointer_push};
use crate::param_headers;
use crate::scope::tool_scopes;

/// How a change affects what the server may do, from the least serious.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    /// Nothing a live server shows is checked differently: descriptions,
    /// titles, card members, a claim made where there was none of a
    /// hint's kind... never something `verify` flags.
    Neutral,
    /// Something was taken away.
    Reduction,
    /// Not less safe, but a server showing it fails `verify` against the
    /// old version (a schema changed, an annotation possibility no more
    /// dangerous than an old one was added, a new security scheme
    /// alternative within the envelope).
    Incompatible,
    /// Something less safe became possible.
    Escalation,
}

impl Class {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Neutral => "neutral",
            Class::Reduction => "reduction",
            Class::Incompatible => "incompatible",
            Class::Escalation => "escalation",
        }
    }
}

/// The class of a violation `verify` reports against a signature: the one
/// rule `diff` classifies by too, so that a change whose new side `verify`
/// would flag against the old version is never `neutral` (nor a
/// reduction): `escalation` when the violation is less safe than anything
/// declared, `incompatible` otherwise.
pub fn violation_class(less_safe: bool) -> Class {
    if less_safe {
        Class::Escalation
    } else {
        Class::Incompatible
    }
}

/// One change between two versions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// Its classification.
    pub class: Class,
    /// Machine-readable kind, e.g. `tool_added`.
    pub kind: &'static str,
    /// JSON pointer (new document; old document for removals).
    pub pointer: String,
    /// The tool, prompt, resource or member concerned.
    pub name: String,
    /// One human-readable sentence.
    pub message: String,
    /// The old value, when useful.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    /// The new value, when useful.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
}

/// The capability diff.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    /// The most serious class among the changes (`neutral` when none).
    pub classification: Class,
    /// Every change.
    pub changes: Vec<Change>,
}

struct Out(Vec<Change>);

impl Out {
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        class: Class,
        kind: &'static str,
        pointer: String,
        name: &str,
        message: String,
        before: Option<Value>,
        after: Option<Value>,
    ) {
        self.0.push(Change {
            class,
            kind,
            pointer,
            name: name.to_owned(),
            message,
            before,
            after,
        });
    }
}

/// Compares two cards.
pub fn diff(old: &ServerCard, new: &ServerCard) -> Diff {
    let mut out = Out(Vec::new());
    card_fields(old.raw(), new.raw(), &mut out);
    tools(old, new, &mut out);
    named_items(old, new, &mut out);
    let classification = out
        .0
        .iter()
        .map(|c| c.class)
        .max()
        .unwrap_or(Class::Neutral);
    Diff {
        classification,
        changes: out.0,
    }
}

fn card_fields(old: &Value, new: &Value, out: &mut Out) {
    let empty = serde_json::Map::new();
    let o = old.as_object().unwrap_or(&empty);
    let n = new.as_object().unwrap_or(&empty);
    let keys: BTreeSet<&String> = o.keys().chain(n.keys()).collect();
    for k in keys {
        if k == "signature" || k == "version" {
            continue;
        }
        let (a, b) = (o.get(k), n.get(k));
        if a.map(canonical_bytes) != b.map(canonical_bytes) {
            out.push(
                Class::Neutral,
                "card_field_changed",
                pointer_push("", k),
                k,
                format!("card member {k} changed"),
                a.cloned(),
                b.cloned(),
            );
        }
    }
}

fn tools(old: &ServerCard, new: &ServerCard, out: &mut Out) {
    let index = |c: &ServerCard| -> BTreeMap<String, (usize, SignatureTool)> {
        c.signature
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), (i, t.clone())))
            .collect()
    };
    let (o, n) = (index(old), index(new));
    let names: BTreeSet<&String> = o.keys().chain(n.keys()).collect();
    for name in names {
        match (o.get(name), n.get(name)) {
            (None, Some((i, _))) => out.push(
                Class::Escalation,
                "tool_added",
                format!("/signature/tools/{i}"),
                name,
                format!("tool {name:?} added"),
                None,
                None,
            ),
            (Some((i, _)), None) => out.push(
                Class::Reduction,
                "tool_removed",
                format!("/signature/tools/{i}"),
                name,
                format!("tool {name:?} removed"),
                None,
                None,
            ),
            (Some((_, a)), Some((i, b))) => {
                tool_changes(a, b, &format!("/signature/tools/{i}"), out)
            }
            (None, None) => {}
        }
    }
}

fn tool_changes(a: &SignatureTool, b: &SignatureTool, p: &str, out: &mut Out) {
    let name = b.name.as_str();
    let ap = pointer_push(p, "annotations");
    for (k, nb) in b.possibilities.iter().enumerate() {
        if a.possibilities.iter().any(|x| nb.conforms_to(x)) {
            continue;
        }
        let escalates = !a
            .possibilities
            .iter()
            .any(|x| nb.at_most_as_dangerous_as(x));
        // `verify` against the old version flags it (annotation_not_declared),
        // less safe exactly when it escalates.
        out.push(
            violation_class(escalates),
            "annotation_possibility_added",
            if b.possibilities.len() > 1 {
                pointer_index(&ap, k)
            } else {
                ap.clone()
            },
            name,
            if escalates {
                format!("tool {name:?} may now behave less safely than any earlier possibility")
            } else {
                format!("tool {name:?} gained a possibility no more dangerous than an earlier one")
            },
            None,
            Some(nb.to_value()),
        );
    }
    for oa in &a.possibilities {
        if b.possibilities.iter().any(|x| oa.conforms_to(x)) {
            continue;
        }
        out.push(
            Class::Reduction,
            "annotation_possibility_removed",
            ap.clone(),
            name,
            format!("tool {name:?} lost an annotation possibility"),
            Some(oa.to_value()),
            None,
        );
    }
    // policy hints
    let mp = pointer_push(p, "_meta");
    let (pa, pb) = (&a.policy, &b.policy);
    let ordered =
        |present: (bool, bool), olds: Vec<u8>, news: Vec<u8>, key: &str, out: &mut Out| {
            if olds == news {
                return;
            }
            // A value the old version does not declare is what `verify`
            // flags (policy_hint_not_declared): less safe when the old
            // version made no claim or the value is more severe than every
            // old one.
            let added: Vec<&u8> = news.iter().filter(|v| !olds.contains(v)).collect();
            let class = match present {
                (true, false) => Class::Escalation,
                _ if !added.is_empty() => violation_class(
                    !present.0 || olds.is_empty() || added.iter().any(|v| exceeds(*v, &olds)),
                ),
                _ if olds.iter().any(|v| !news.contains(v)) => Class::Reduction,
                _ => Class::Neutral,
            };
            out.push(
                class,
                "policy_hint_changed",
                pointer_push(&mp, key),
                name,
                format!("tool {name:?} {key} values changed"),
                None,
                None,
            );
        };
    let rank_e = |v: &[crate::annotations::Effect]| v.iter().map(|e| *e as u8).collect::<Vec<_>>();
    let rank_s =
        |v: &[crate::annotations::Sensitivity]| v.iter().map(|e| *e as u8).collect::<Vec<_>>();
    ordered(
        (pa.present[0], pb.present[0]),
        rank_e(&pa.effect),
        rank_e(&pb.effect),
        crate::annotations::META_EFFECT,
        out,
    );
    ordered(
        (pa.present[1], pb.present[1]),
        rank_s(&pa.sensitivity),
        rank_s(&pb.sensitivity),
        crate::annotations::META_RESULT_SENSITIVITY,
        out,
    );
    // booleans: danger is `true` for requiresConfirmation, `false` for idempotent.
    let danger = |v: &[bool], dangerous: bool| {
        v.iter()
            .map(|b| u8::from(*b == dangerous))
            .collect::<Vec<_>>()
    };
    let both = |x: &[u8]| -> Vec<u8> {
        let mut x = x.to_vec();
        x.sort();
        x
    };
    ordered(
        (true, true),
        both(&danger(&pa.requires_confirmation, true)),
        both(&danger(&pb.requires_confirmation, true)),
        crate::annotations::META_REQUIRES_CONFIRMATION,
        out,
    );
    ordered(
        (true, true),
        both(&danger(&pa.idempotent, false)),
        both(&danger(&pb.idempotent, false)),
        crate::annotations::META_IDEMPOTENT,
        out,
    );
    // scopes
    let (sa, sb) = (
        tool_scopes(a.security_schemes.as_deref()),
        tool_scopes(b.security_schemes.as_deref()),
    );
    let sp = pointer_push(p, "securitySchemes");
    for s in sb.scopes.iter().filter(|s| !sa.scopes.contains(s)) {
        out.push(
            Class::Escalation,
            "scope_added",
            sp.clone(),
            name,
            format!("tool {name:?} may now require scope {s:?}"),
            None,
            Some(Value::String(s.clone())),
        );
    }
    for s in sa.scopes.iter().filter(|s| !sb.scopes.contains(s)) {
        out.push(
            Class::Reduction,
            "scope_removed",
            sp.clone(),
            name,
            format!("tool {name:?} no longer requires scope {s:?}"),
            Some(Value::String(s.clone())),
            None,
        );
    }
    if sa.alternatives != sb.alternatives && sa.scopes == sb.scopes {
        // A new alternative is what `verify` flags
        // (security_scheme_not_declared): within the same envelope it is
        // less safe only when of a scheme type Pinfold cannot judge.
        let new_ones: Vec<&crate::card::SecurityScheme> = sb
            .alternatives
            .iter()
            .filter(|x| !sa.alternatives.contains(x))
            .collect();
        let class = if new_ones.is_empty() {
            Class::Reduction
        } else {
            violation_class(
                new_ones
                    .iter()
                    .any(|x| matches!(x, crate::card::SecurityScheme::Other(_))),
            )
        };
        out.push(
            class,
            "security_schemes_changed",
            sp,
            name,
            format!("tool {name:?} security scheme alternatives changed"),
            serde_json::to_value(&sa.alternatives).ok(),
            serde_json::to_value(&sb.alternatives).ok(),
        );
    }
    let schema_eq = |x: &Option<Value>, y: &Option<Value>| {
        x.as_ref().map(canonical_bytes) == y.as_ref().map(canonical_bytes)
    };
    // Arguments mirrored into HTTP headers the old version kept in the
    // body (SEP-2243): the rule `verify` applies to a listed schema too.
    let headers = if schema_eq(&a.input_schema, &b.input_schema) {
        Vec::new()
    } else {
        param_headers::added(a.input_schema.as_ref(), b.input_schema.as_ref())
    };
    let ip = pointer_push(p, "inputSchema");
    for h in &headers {
        out.push(
            Class::Escalation,
            "mcp_header_added",
            format!("{ip}{}", h.pointer),
            name,
            format!(
                "tool {name:?} now sends argument {:?} in HTTP header {}",
                h.argument,
                h.header()
            ),
            None,
            Some(Value::String(h.header())),
        );
    }
    for (key, kind, x, y) in [
        (
            "inputSchema",
            "input_schema_changed",
            &a.input_schema,
            &b.input_schema,
        ),
        (
            "outputSchema",
            "output_schema_changed",
            &a.output_schema,
            &b.output_schema,
        ),
    ] {
        if !schema_eq(x, y) {
            // `verify` flags a listed tool whose schema differs from the
            // declared one (input_schema_changed, output_schema_changed);
            // when that is less safe (a new header above), the escalation
            // is `mcp_header_added`, not counted twice here.
            out.push(
                violation_class(false),
                kind,
                pointer_push(p, key),
                name,
                format!("tool {name:?} {key} changed"),
                x.clone(),
                y.clone(),
            );
        }
    }
    for (key, kind, x, y) in [
        ("resolve", "resolve_changed", a.resolve, b.resolve),
        (
            "dynamicAnnotations",
            "dynamic_annotations_changed",
            a.dynamic_annotations,
            b.dynamic_annotations,
        ),
    ] {
        if x != y {
            out.push(
                Class::Neutral,
                kind,
                pointer_push(p, key),
                name,
                format!("tool {name:?} {key} changed"),
                Some(Value::Bool(x)),
                Some(Value::Bool(y)),
            );
        }
    }
    for (key, kind, x, y) in [
        (
            "description",
            "description_changed",
            &a.description,
            &b.description,
        ),
        ("title", "title_changed", &a.title, &b.title),
    ] {
        if x != y {
            out.push(
                Class::Neutral,
                kind,
                pointer_push(p, key),
                name,
                format!("tool {name:?} {key} changed"),
                x.clone().map(Value::String),
                y.clone().map(Value::String),
            );
        }
    }
}

fn named_items(old: &ServerCard, new: &ServerCard, out: &mut Out) {
    type Keyed<'a> = BTreeMap<&'a str, (usize, &'a Value)>;
    let lists: [(&str, &str, Keyed<'_>, Keyed<'_>); 3] = [
        (
            "prompts",
            "prompt",
            old.signature
                .prompts
                .iter()
                .enumerate()
                .map(|(i, p)| (p.name.as_str(), (i, &p.raw)))
                .collect(),
            new.signature
                .prompts
                .iter()
                .enumerate()
                .map(|(i, p)| (p.name.as_str(), (i, &p.raw)))
                .collect(),
        ),
        (
            "resources",
            "resource",
            old.signature
                .resources
                .iter()
                .enumerate()
                .map(|(i, p)| (p.uri.as_str(), (i, &p.raw)))
                .collect(),
            new.signature
                .resources
                .iter()
                .enumerate()
                .map(|(i, p)| (p.uri.as_str(), (i, &p.raw)))
                .collect(),
        ),
        (
            "resourceTemplates",
            "resource_template",
            old.signature
                .resource_templates
                .iter()
                .enumerate()
                .map(|(i, p)| (p.uri_template.as_str(), (i, &p.raw)))
                .collect(),
            new.signature
                .resource_templates
                .iter()
                .enumerate()
                .map(|(i, p)| (p.uri_template.as_str(), (i, &p.raw)))
                .collect(),
        ),
    ];
    for (list, what, o, n) in lists {
        let keys: BTreeSet<&str> = o.keys().chain(n.keys()).copied().collect();
        for key in keys {
            match (o.get(key), n.get(key)) {
                (None, Some((i, _))) => out.push(
                    Class::Escalation,
                    added_kind(what),
                    format!("/signature/{list}/{i}"),
                    key,
                    format!("{what} {key:?} added"),
                    None,
                    None,
                ),
                (Some((i, _)), None) => out.push(
                    Class::Reduction,
                    removed_kind(what),
                    format!("/signature/{list}/{i}"),
                    key,
                    format!("{what} {key:?} removed"),
                    None,
                    None,
                ),
                (Some((_, a)), Some((i, b))) => {
                    let p = format!("/signature/{list}/{i}");
                    if what == "prompt" {
                        let args = |v: &Value| v.get("arguments").map(canonical_bytes);
                        if args(a) != args(b) {
                            out.push(
                                violation_class(false),
                                "prompt_arguments_changed",
                                pointer_push(&p, "arguments"),
                                key,
                                format!("prompt {key:?} arguments changed"),
                                a.get("arguments").cloned(),
                                b.get("arguments").cloned(),
                            );
                        }
                    }
                    for (field, kind) in [
                        ("description", "description_changed"),
                        ("title", "title_changed"),
                    ] {
                        if a.get(field) != b.get(field) {
                            out.push(
                                Class::Neutral,
                                kind,
                                pointer_push(&p, field),
                                key,
                                format!("{what} {key:?} {field} changed"),
                                a.get(field).cloned(),
                                b.get(field).cloned(),
                            );
                        }
                    }
                }
                (None, None) => {}
            }
        }
    }
}

fn added_kind(what: &str) -> &'static str {
    match what {
        "prompt" => "prompt_added",
        "resource" => "resource_added",
        _ => "resource_template_added",
    }
}

fn removed_kind(what: &str) -> &'static str {
    match what {
        "prompt" => "prompt_removed",
        "resource" => "resource_removed",
        _ => "resource_template_removed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::card::Limits;
    use serde_json::json;

    fn card(tools: Value, extra: Value) -> ServerCard {
        let mut doc = json!({"name": "a.b/c", "version": "1.0.0", "signature": {"tools": tools,
            "prompts": [{"name": "p", "arguments": []}], "resources": [{"uri": "x://a"}]}});
        if let Value::Object(m) = extra {
            for (k, v) in m {
                doc[k] = v;
            }
        }
        ServerCard::from_value(&doc, &Limits::default()).unwrap()
    }

    fn t(annotations: Value) -> Value {
        json!({"name": "t", "inputSchema": {"type": "object"}, "annotations": annotations})
    }

    fn kinds(d: &Diff) -> Vec<(Class, &str)> {
        d.changes.iter().map(|c| (c.class, c.kind)).collect()
    }

    /// The rule shared with `verify`: whatever `verify` flags when a live
    /// server shows the new version against the old signature is a change
    /// of the same item in the diff, of the class [`violation_class`]
    /// gives that violation, and never neutral.
    #[test]
    fn a_change_verify_flags_is_never_neutral() {
        let tool = |patch: Value| {
            let mut t = json!({"name": "t", "inputSchema": {"type": "object"},
                "annotations": {"readOnlyHint": false, "destructiveHint": true}});
            if let Value::Object(m) = patch {
                for (k, v) in m {
                    t[k] = v;
                }
            }
            t
        };
        let scheme = |scopes: &[&str]| json!({"type": "oauth2", "scopes": scopes});
        let cases = [
            (
                tool(json!({})),
                tool(json!({"inputSchema": {"type": "object", "required": ["x"]}})),
            ),
            (
                tool(json!({})),
                tool(json!({"outputSchema": {"type": "object"}})),
            ),
            (
                tool(json!({})),
                tool(json!({"annotations": [
                    {"readOnlyHint": false, "destructiveHint": true},
                    {"readOnlyHint": true}
                ]})),
            ),
            (
                tool(json!({"annotations": {"readOnlyHint": true}})),
                tool(json!({"annotations": {"readOnlyHint": false, "destructiveHint": true}})),
            ),
            (
                tool(json!({"_meta": {"mcp.dev/effect": "write"}})),
                tool(json!({"_meta": {"mcp.dev/effect": ["read", "write"]}})),
            ),
            (
                tool(json!({"_meta": {"mcp.dev/effect": "write"}})),
                tool(json!({"_meta": {"mcp.dev/effect": "delete"}})),
            ),
            (
                tool(json!({})),
                tool(json!({"_meta": {"mcp.dev/effect": "read"}})),
            ),
            (
                tool(json!({"securitySchemes": [scheme(&["a", "b"])]})),
                tool(json!({"securitySchemes": [scheme(&["a", "b"]), scheme(&["a"])]})),
            ),
            (
                tool(json!({"securitySchemes": [scheme(&["a"])]})),
                tool(json!({"securitySchemes": [scheme(&["a", "b"])]})),
            ),
            (tool(json!({})), tool(json!({"description": "new words"}))),
            (
                tool(json!({"inputSchema": {"type": "object", "properties": {
                    "region": {"type": "string"}}}})),
                tool(json!({"inputSchema": {"type": "object", "properties": {
                    "region": {"type": "string", "x-mcp-header": "Region"}}}})),
            ),
        ];
        let mut flagged = 0;
        for (i, (old_tool, new_tool)) in cases.into_iter().enumerate() {
            let old = card(json!([old_tool]), Value::Null);
            let new = card(json!([new_tool]), Value::Null);
            let d = diff(&old, &new);
            let obs = crate::contain::Observation::from_value(
                &new.raw()["signature"],
                &Limits::default(),
            )
            .unwrap();
            let report = crate::contain::check(&old.signature, &obs, crate::Mode::Strict);
            for v in &report.violations {
                flagged += 1;
                let class = violation_class(v.less_safe);
                assert_ne!(class, Class::Neutral);
                assert!(
                    d.changes
                        .iter()
                        .any(|c| Some(&c.name) == v.name.as_ref() && c.class == class),
                    "case {i}: verify flags {v:?} as {class:?}; the diff says {:?}",
                    kinds(&d)
                );
                assert!(d.classification >= class, "case {i}");
            }
            if report.violations.is_empty() {
                assert!(
                    d.classification <= Class::Reduction,
                    "case {i}: {:?}",
                    kinds(&d)
                );
            }
        }
        assert!(flagged >= 10, "the cases exercise verify: {flagged}");
    }

    /// SEP-2243: an argument newly mirrored into an `Mcp-Param-*` header is
    /// an escalation, whether an existing property gains the annotation, a
    /// new property carries one or the annotation names another header;
    /// dropping one is not.
    #[test]
    fn a_new_x_mcp_header_is_an_escalation() {
        let with = |props: Value| {
            let mut tool = t(json!({"readOnlyHint": true}));
            tool["inputSchema"] = json!({"type": "object", "properties": props});
            card(json!([tool]), Value::Null)
        };
        let plain = with(json!({"region": {"type": "string"}}));
        let annotated = with(json!({"region": {"type": "string", "x-mcp-header": "Region"}}));
        let d = diff(&plain, &annotated);
        assert_eq!(
            kinds(&d),
            [
                (Class::Escalation, "mcp_header_added"),
                (Class::Incompatible, "input_schema_changed"),
            ]
        );
        assert_eq!(d.classification, Class::Escalation);
        let c = &d.changes[0];
        assert_eq!(c.name, "t");
        assert_eq!(
            c.pointer,
            "/signature/tools/0/inputSchema/properties/region"
        );
        assert_eq!(c.after, Some(json!("Mcp-Param-Region")));
        assert!(c.message.contains("\"region\"") && c.message.contains("Mcp-Param-Region"));
        // A new nested property that carries one.
        let nested = with(
            json!({"region": {"type": "string", "x-mcp-header": "Region"},
            "options": {"type": "object", "properties": {
                "limit": {"type": "integer", "x-mcp-header": "Limit"}}}}),
        );
        let d = diff(&annotated, &nested);
        assert_eq!(kinds(&d)[0], (Class::Escalation, "mcp_header_added"));
        assert_eq!(
            d.changes[0].pointer,
            "/signature/tools/0/inputSchema/properties/options/properties/limit"
        );
        // Another header name for the same argument.
        let renamed = with(json!({"region": {"type": "string", "x-mcp-header": "Location"}}));
        assert_eq!(diff(&annotated, &renamed).classification, Class::Escalation);
        // The same name in another case, or the annotation dropped: no escalation.
        let upper = with(json!({"region": {"type": "string", "x-mcp-header": "REGION"}}));
        assert_eq!(
            kinds(&diff(&annotated, &upper)),
            [(Class::Incompatible, "input_schema_changed")]
        );
        assert_eq!(
            kinds(&diff(&annotated, &plain)),
            [(Class::Incompatible, "input_schema_changed")]
        );
    }

    #[test]
    fn identical_is_empty() {
        let a = card(json!([t(json!({"readOnlyHint": true}))]), Value::Null);
        let d = diff(&a, &a);
        assert!(d.changes.is_empty());
        assert_eq!(d.classification, Class::Neutral);
        assert_eq!(
            serde_json::to_value(&d).unwrap(),
            json!({"classification": "neutral", "changes": []})
        );
    }

    #[test]
    fn tools_added_removed() {
        let a = card(json!([t(json!({}))]), Value::Null);
        let b = card(json!([]), json!({"version": "1.1.0"}));
        assert_eq!(kinds(&diff(&a, &b)), [(Class::Reduction, "tool_removed")]);
        let d = diff(&b, &a);
        assert_eq!(kinds(&d), [(Class::Escalation, "tool_added")]);
        assert_eq!(d.classification, Class::Escalation);
        assert_eq!(d.changes[0].pointer, "/signature/tools/0");
    }

    #[test]
    fn possibilities() {
        let ro = json!({"readOnlyHint": true});
        let w = json!({"destructiveHint": false});
        let a = card(json!([t(json!([ro]))]), Value::Null);
        let b = card(json!([t(json!([ro, w]))]), Value::Null);
        assert_eq!(
            kinds(&diff(&a, &b)),
            [(Class::Escalation, "annotation_possibility_added")]
        );
        assert_eq!(
            kinds(&diff(&b, &a)),
            [(Class::Reduction, "annotation_possibility_removed")]
        );
        // adding a safer possibility is neutral
        let c = card(json!([t(json!([w, ro]))]), Value::Null);
        let d = card(json!([t(json!([w]))]), Value::Null);
        assert_eq!(
            kinds(&diff(&d, &c)),
            [(Class::Incompatible, "annotation_possibility_added")]
        );
    }

    #[test]
    fn policy_scopes_and_fields() {
        let mut ta = t(json!({}));
        ta["_meta"] = json!({"mcp.dev/effect": ["read"]});
        ta["securitySchemes"] = json!([{"type": "oauth2", "scopes": ["read:org"]}]);
        let mut tb = ta.clone();
        tb["_meta"] =
            json!({"mcp.dev/effect": ["read", "delete"], "mcp.dev/requiresConfirmation": true});
        tb["securitySchemes"] = json!([{"type": "oauth2", "scopes": ["admin:org"]}]);
        tb["description"] = json!("new");
        tb["inputSchema"] = json!({"type": "object", "properties": {}});
        let a = card(json!([ta]), Value::Null);
        let b = card(json!([tb]), json!({"websiteUrl": "https://x.example"}));
        assert_eq!(
            kinds(&diff(&a, &b)),
            [
                (Class::Neutral, "card_field_changed"),
                (Class::Escalation, "policy_hint_changed"),
                (Class::Escalation, "policy_hint_changed"),
                (Class::Escalation, "scope_added"),
                (Class::Reduction, "scope_removed"),
                (Class::Incompatible, "input_schema_changed"),
                (Class::Neutral, "description_changed"),
            ]
        );
        let back = diff(&b, &a);
        assert_eq!(back.changes[1].class, Class::Reduction);
    }
}
