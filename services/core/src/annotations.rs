//! Tool hints: typed, normalised, ordered by danger, and reduced.
//!
//! Two families of hints describe a tool's behaviour:
//!
//! - **Annotations** (the tool's `annotations` object): the four core MCP
//!   `ToolAnnotations` hints, `taskHint`, `agencyHint` (SEP-1938) and
//!   `title`. In a signature, `annotations` may be one object or an array of
//!   every possible object (SEP-2091 "Tool Signatures with Annotation
//!   Arrays"); each element is one [`Annotations`] *possibility*.
//! - **Policy hints** (the tool's `_meta`, "tool policy hints" seed):
//!   `mcp.dev/effect`, `mcp.dev/idempotent`, `mcp.dev/requiresConfirmation`,
//!   `mcp.dev/resultSensitivity`. Following SEP-2091's "arrays where single
//!   values exist today", a signature may give each as an array of possible
//!   values ([`PolicyHints`]).
//!
//! # Normalisation
//!
//! | hint | when absent | read-only possibility |
//! |------|-------------|-----------------------|
//! | `readOnlyHint` | `false` | — |
//! | `destructiveHint` | `true` | forced `false` |
//! | `idempotentHint` | `false` | forced `true` |
//! | `openWorldHint` | `true` | — |
//! | `agencyHint` | `false` (SEP-1938: omitted means no agentic claim) | — |
//! | `mcp.dev/requiresConfirmation` | `false` | — |
//! | `mcp.dev/idempotent` | `false` | — |
//! | `mcp.dev/effect`, `mcp.dev/resultSensitivity` | no claim | — |
//!
//! `destructiveHint` and `idempotentHint` only mean something when the tool
//! may write, so a read-only possibility is taken as non-destructive and
//! idempotent. `title` is display text and never decides conformance.
//! Unknown hints are kept (compared by their canonical form).
//!
//! # Danger order
//!
//! Each safety hint has a *more dangerous* value: `readOnlyHint=false`,
//! `destructiveHint=true`, `idempotentHint=false`, `openWorldHint=true`,
//! `agencyHint=true`, `mcp.dev/requiresConfirmation=true`,
//! `mcp.dev/idempotent=false`; effects order `read < write < external <
//! delete`, sensitivities `public < internal < confidential < restricted`.
//! A possibility is *at most as dangerous* as another when it is on every
//! hint ([`Annotations::at_most_as_dangerous_as`]); an observation is
//! *less safe* than a signature when no declared possibility is at least as
//! dangerous. `docs/SEMANTICS.md` (section 3) describes normalisation and
//! the danger order for readers outside the code.

use std::cmp::Ordering;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::digest::{canonical_bytes, canonical_object_bytes};
use crate::error::{ValidationErrors, pointer_push};

/// `_meta` key of the effect policy hint.
pub const META_EFFECT: &str = "mcp.dev/effect";
/// `_meta` key of the idempotency policy hint.
pub const META_IDEMPOTENT: &str = "mcp.dev/idempotent";
/// `_meta` key of the confirmation policy hint.
pub const META_REQUIRES_CONFIRMATION: &str = "mcp.dev/requiresConfirmation";
/// `_meta` key of the result sensitivity policy hint.
pub const META_RESULT_SENSITIVITY: &str = "mcp.dev/resultSensitivity";

/// Names of the typed annotation hints (everything else is "unknown" and kept).
pub const KNOWN_ANNOTATIONS: &[&str] = &[
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
    "taskHint",
    "agencyHint",
    "title",
];

/// `mcp.dev/effect`: the primary side effect, ordered by severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// Reads only.
    Read,
    /// Mutates state.
    Write,
    /// Acts on an external system.
    External,
    /// Deletes.
    Delete,
}

/// `mcp.dev/resultSensitivity`: how sensitive results are, ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Sensitivity {
    /// Public.
    Public,
    /// Internal.
    Internal,
    /// Confidential.
    Confidential,
    /// Restricted.
    Restricted,
}

impl Effect {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "read" => Self::Read,
            "write" => Self::Write,
            "external" => Self::External,
            "delete" => Self::Delete,
            _ => return None,
        })
    }
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::External => "external",
            Self::Delete => "delete",
        }
    }
}

impl Sensitivity {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "public" => Self::Public,
            "internal" => Self::Internal,
            "confidential" => Self::Confidential,
            "restricted" => Self::Restricted,
            _ => return None,
        })
    }
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Public => "public",
            Self::Internal => "internal",
            Self::Confidential => "confidential",
            Self::Restricted => "restricted",
        }
    }
}

/// One normalised annotation possibility.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Annotations {
    /// `readOnlyHint` (default `false`).
    pub read_only: bool,
    /// `destructiveHint` (default `true`; `false` when read-only).
    pub destructive: bool,
    /// `idempotentHint` (default `false`; `true` when read-only).
    pub idempotent: bool,
    /// `openWorldHint` (default `true`).
    pub open_world: bool,
    /// `agencyHint` (SEP-1938, default `false`).
    pub agency: bool,
    /// `taskHint` as given (`"never" | "optional" | "always"`), if any.
    pub task_hint: Option<String>,
    /// `title`: display only.
    pub title: Option<String>,
    /// Unknown hints, kept verbatim.
    pub extra: Map<String, Value>,
    extra_canonical: Vec<u8>,
}

impl Default for Annotations {
    fn default() -> Self {
        Self::from_parts(false, true, false, true, false, None, None, Map::new())
    }
}

impl Annotations {
    #[allow(clippy::too_many_arguments)]
    fn from_parts(
        read_only: bool,
        destructive: bool,
        idempotent: bool,
        open_world: bool,
        agency: bool,
        task_hint: Option<String>,
        title: Option<String>,
        extra: Map<String, Value>,
    ) -> Self {
        let extra_canonical = canonical_object_bytes(&extra);
        let mut a = Self {
            read_only,
            destructive,
            idempotent,
            open_world,
            agency,
            task_hint,
            title,
            extra,
            extra_canonical,
        };
        if a.read_only {
            a.destructive = false;
            a.idempotent = true;
        }
        a
    }

    /// Parses and normalises one annotation object; type errors are recorded
    /// in `errors` under `pointer` and the hint is taken at its default.
    pub fn parse(value: &Value, pointer: &str, errors: &mut ValidationErrors) -> Self {
        let Some(obj) = value.as_object() else {
            errors.push(
                pointer,
                "invalid_annotations",
                "annotations must be an object",
            );
            return Self::default();
        };
        let mut flag = |key: &str, default: bool| match obj.get(key) {
            None => default,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                errors.push(
                    pointer_push(pointer, key),
                    "invalid_hint",
                    format!("{key} must be a boolean"),
                );
                default
            }
        };
        let read_only = flag("readOnlyHint", false);
        let destructive = flag("destructiveHint", true);
        let idempotent = flag("idempotentHint", false);
        let open_world = flag("openWorldHint", true);
        let agency = flag("agencyHint", false);
        let mut string = |key: &str| match obj.get(key) {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                errors.push(
                    pointer_push(pointer, key),
                    "invalid_hint",
                    format!("{key} must be a string"),
                );
                None
            }
        };
        let task_hint = string("taskHint");
        let title = string("title");
        let extra: Map<String, Value> = obj
            .iter()
            .filter(|(k, _)| !KNOWN_ANNOTATIONS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Self::from_parts(
            read_only,
            destructive,
            idempotent,
            open_world,
            agency,
            task_hint,
            title,
            extra,
        )
    }

    /// The normalised object: the four core hints always, `agencyHint` only
    /// when `true`, then `taskHint`, `title` and unknown hints when present.
    pub fn to_value(&self) -> Value {
        let mut m = self.extra.clone();
        m.insert("readOnlyHint".into(), Value::Bool(self.read_only));
        m.insert("destructiveHint".into(), Value::Bool(self.destructive));
        m.insert("idempotentHint".into(), Value::Bool(self.idempotent));
        m.insert("openWorldHint".into(), Value::Bool(self.open_world));
        if self.agency {
            m.insert("agencyHint".into(), Value::Bool(true));
        }
        if let Some(t) = &self.task_hint {
            m.insert("taskHint".into(), Value::String(t.clone()));
        }
        if let Some(t) = &self.title {
            m.insert("title".into(), Value::String(t.clone()));
        }
        Value::Object(m)
    }

    /// Equality for conformance: every hint but `title`.
    pub fn conforms_to(&self, declared: &Annotations) -> bool {
        self.read_only == declared.read_only
            && self.destructive == declared.destructive
            && self.idempotent == declared.idempotent
            && self.open_world == declared.open_world
            && self.agency == declared.agency
            && self.task_hint == declared.task_hint
            && self.extra_canonical == declared.extra_canonical
    }

    /// The canonical bytes of the normalised object without `title`: two
    /// possibilities have the same key exactly when one
    /// [conforms to](Annotations::conforms_to) the other.
    pub fn conformance_key(&self) -> Vec<u8> {
        let mut v = self.to_value();
        if let Value::Object(m) = &mut v {
            m.remove("title");
        }
        canonical_bytes(&v)
    }

    fn danger(&self) -> [bool; 5] {
        [
            !self.read_only,
            self.destructive,
            !self.idempotent,
            self.open_world,
            self.agency,
        ]
    }

    /// True when `self` is at most as dangerous as `other` on every safety
    /// hint (see the module's danger order; `taskHint`, `title` and unknown
    /// hints are not ordered).
    pub fn at_most_as_dangerous_as(&self, other: &Annotations) -> bool {
        self.danger()
            .iter()
            .zip(other.danger())
            .all(|(a, b)| !a || b)
    }

    /// The hints on which `self` is more dangerous than `other`.
    pub fn more_dangerous_hints(&self, other: &Annotations) -> Vec<&'static str> {
        const NAMES: [&str; 5] = [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
            "agencyHint",
        ];
        self.danger()
            .iter()
            .zip(other.danger())
            .zip(NAMES)
            .filter(|((a, b), _)| **a && !b)
            .map(|(_, n)| n)
            .collect()
    }

    /// Worst-case reduction of possibilities (SEP-2091 "Reference
    /// Implementation"): see the table in [`crate::reduce`]. An empty slice
    /// reduces to the defaults.
    pub fn reduce(possibilities: &[Annotations]) -> Annotations {
        let Some(first) = possibilities.first() else {
            return Annotations::default();
        };
        let all = |f: fn(&Annotations) -> bool| possibilities.iter().all(f);
        let any = |f: fn(&Annotations) -> bool| possibilities.iter().any(f);
        let task_hint = if possibilities.iter().all(|p| p.task_hint == first.task_hint) {
            first.task_hint.clone()
        } else {
            None
        };
        let mut extra = Map::new();
        for (k, v) in &first.extra {
            let v_canon = canonical_bytes(v);
            if possibilities[1..].iter().all(|p| {
                p.extra
                    .get(k)
                    .is_some_and(|w| canonical_bytes(w) == v_canon)
            }) {
                extra.insert(k.clone(), v.clone());
            }
        }
        Self::from_parts(
            all(|p| p.read_only),
            any(|p| p.destructive),
            all(|p| p.idempotent),
            any(|p| p.open_world),
            any(|p| p.agency),
            task_hint,
            first.title.clone(),
            extra,
        )
    }
}

/// The declared values of the `_meta` policy hints of one tool. In a
/// signature each may be an array of possible values; an observation gives
/// one value each. Sets are sorted and de-duplicated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyHints {
    /// `mcp.dev/effect` values; empty = no claim.
    pub effect: Vec<Effect>,
    /// `mcp.dev/resultSensitivity` values; empty = no claim.
    pub sensitivity: Vec<Sensitivity>,
    /// `mcp.dev/requiresConfirmation` values; absent = `[false]`.
    pub requires_confirmation: Vec<bool>,
    /// `mcp.dev/idempotent` values; absent = `[false]`.
    pub idempotent: Vec<bool>,
    /// Which keys were present at all.
    pub present: [bool; 4],
}

fn values_of(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    }
}

impl PolicyHints {
    /// Parses the policy hints out of a tool's `_meta` (which may be absent).
    /// `pointer` is the pointer of `_meta` itself.
    pub fn parse(meta: Option<&Value>, pointer: &str, errors: &mut ValidationErrors) -> Self {
        let mut out = PolicyHints::default();
        let obj = meta.and_then(Value::as_object);
        let get = |k: &str| obj.and_then(|o| o.get(k));
        let check_empty = |v: &Value, key: &str, errors: &mut ValidationErrors| {
            if v.as_array().is_some_and(Vec::is_empty) {
                errors.push(
                    pointer_push(pointer, key),
                    "invalid_hint",
                    format!("{key} must not be an empty array"),
                );
            }
        };
        if let Some(v) = get(META_EFFECT) {
            out.present[0] = true;
            check_empty(v, META_EFFECT, errors);
            for (i, x) in values_of(v).into_iter().enumerate() {
                match x.as_str().and_then(Effect::parse) {
                    Some(e) => out.effect.push(e),
                    None => errors.push(
                        elem_pointer(pointer, META_EFFECT, v, i),
                        "invalid_hint",
                        "mcp.dev/effect must be one of read, write, external, delete",
                    ),
                }
            }
        }
        if let Some(v) = get(META_RESULT_SENSITIVITY) {
            out.present[1] = true;
            check_empty(v, META_RESULT_SENSITIVITY, errors);
            for (i, x) in values_of(v).into_iter().enumerate() {
                match x.as_str().and_then(Sensitivity::parse) {
                    Some(e) => out.sensitivity.push(e),
                    None => errors.push(
                        elem_pointer(pointer, META_RESULT_SENSITIVITY, v, i),
                        "invalid_hint",
                        "mcp.dev/resultSensitivity must be one of public, internal, confidential, restricted",
                    ),
                }
            }
        }
        for (slot, key, idx) in [
            (
                &mut out.requires_confirmation,
                META_REQUIRES_CONFIRMATION,
                2,
            ),
            (&mut out.idempotent, META_IDEMPOTENT, 3),
        ] {
            match get(key) {
                None => slot.push(false),
                Some(v) => {
                    out.present[idx] = true;
                    check_empty(v, key, errors);
                    for (i, x) in values_of(v).into_iter().enumerate() {
                        match x.as_bool() {
                            Some(b) => slot.push(b),
                            None => errors.push(
                                elem_pointer(pointer, key, v, i),
                                "invalid_hint",
                                format!("{key} must be a boolean"),
                            ),
                        }
                    }
                    if slot.is_empty() {
                        slot.push(false);
                    }
                }
            }
        }
        out.effect.sort();
        out.effect.dedup();
        out.sensitivity.sort();
        out.sensitivity.dedup();
        out.requires_confirmation.sort();
        out.requires_confirmation.dedup();
        out.idempotent.sort();
        out.idempotent.dedup();
        out
    }

    /// Worst-case reduction to one value per declared key (see the table in
    /// [`crate::reduce`]); keys that were absent stay absent.
    pub fn reduced_values(&self) -> Vec<(&'static str, Value)> {
        let mut out = Vec::new();
        if let Some(e) = self.effect.iter().max() {
            out.push((META_EFFECT, Value::String(e.as_str().into())));
        }
        if let Some(s) = self.sensitivity.iter().max() {
            out.push((META_RESULT_SENSITIVITY, Value::String(s.as_str().into())));
        }
        if self.present[2] {
            out.push((
                META_REQUIRES_CONFIRMATION,
                Value::Bool(self.requires_confirmation.contains(&true)),
            ));
        }
        if self.present[3] {
            out.push((
                META_IDEMPOTENT,
                Value::Bool(!self.idempotent.contains(&false)),
            ));
        }
        out
    }
}

fn elem_pointer(base: &str, key: &str, v: &Value, i: usize) -> String {
    let p = pointer_push(base, key);
    if v.is_array() { format!("{p}/{i}") } else { p }
}

/// Severity comparison helper used by containment and diff: `Greater` when
/// `observed` exceeds every declared value.
pub fn exceeds<T: Ord>(observed: &T, declared: &[T]) -> bool {
    declared
        .iter()
        .max()
        .is_none_or(|m| observed.cmp(m) == Ordering::Greater)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ann(v: Value) -> Annotations {
        let mut e = ValidationErrors::new();
        let a = Annotations::parse(&v, "/a", &mut e);
        assert!(e.is_empty(), "{e:?}");
        a
    }

    #[test]
    fn defaults_and_read_only_normalisation() {
        let a = ann(json!({}));
        assert!(!a.read_only && a.destructive && !a.idempotent && a.open_world && !a.agency);
        let r =
            ann(json!({"readOnlyHint": true, "destructiveHint": true, "idempotentHint": false}));
        assert!(r.read_only && !r.destructive && r.idempotent);
        assert_eq!(
            r.to_value(),
            json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": true})
        );
        // agencyHint false is the same as absent
        assert!(ann(json!({"agencyHint": false})).conforms_to(&ann(json!({}))));
        // title never decides
        assert!(ann(json!({"title": "x"})).conforms_to(&ann(json!({"title": "y"}))));
        // unknown hints do, canonically
        assert!(ann(json!({"x": 1})).conforms_to(&ann(json!({"x": 1.0}))));
        assert!(!ann(json!({"x": 1})).conforms_to(&ann(json!({"x": 2}))));
    }

    #[test]
    fn type_errors_have_pointers() {
        let mut e = ValidationErrors::new();
        Annotations::parse(&json!({"readOnlyHint": "yes", "title": 3}), "/t", &mut e);
        let ptrs: Vec<_> = e.errors.iter().map(|e| e.pointer.as_str()).collect();
        assert_eq!(ptrs, ["/t/readOnlyHint", "/t/title"]);
        let mut e = ValidationErrors::new();
        PolicyHints::parse(
            Some(&json!({"mcp.dev/effect": ["read", "nuke"]})),
            "/m",
            &mut e,
        );
        assert_eq!(e.errors[0].pointer, "/m/mcp.dev~1effect/1");
    }

    #[test]
    fn danger_order() {
        let ro = ann(json!({"readOnlyHint": true, "openWorldHint": false}));
        let w = ann(json!({"destructiveHint": false}));
        assert!(ro.at_most_as_dangerous_as(&w));
        assert!(!w.at_most_as_dangerous_as(&ro));
        assert_eq!(
            w.more_dangerous_hints(&ro),
            ["readOnlyHint", "idempotentHint", "openWorldHint"]
        );
    }
}
