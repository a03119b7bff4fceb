//! OpenAPI schemas of the containment report that verify and resolve send.
//!
//! The report types live in `pinfold_core::contain` and know nothing of
//! OpenAPI; these document-only twins describe their wire form (SEP-2091
//! "Enforcement Modes" and "Violations") so that a generated client gets
//! typed violations instead of free-form objects. The enumerations are built
//! from the core types' own lists and the unit tests below serialise real
//! core values and check them against these schemas, so the two cannot drift.

use std::borrow::Cow;

use pinfold_core::Mode;
use pinfold_core::contain::{NoticeKind, ViolationKind};
use serde::Serialize;
use serde_json::Value;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::{PartialSchema, ToSchema};

fn wire_name<T: Serialize>(v: T) -> String {
    match serde_json::to_value(v) {
        Ok(Value::String(s)) => s,
        _ => unreachable!("kinds serialise as strings"),
    }
}

fn string_enum(description: &str, values: Vec<String>) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(description))
        .enum_values(Some(values))
        .into()
}

/// The OpenAPI schema of [`Mode`], named `EnforcementMode` in the document.
pub struct EnforcementModeSchema;

impl PartialSchema for EnforcementModeSchema {
    fn schema() -> RefOr<Schema> {
        string_enum(
            "How a tenant treats a runtime observation outside a signature\n\
             (SEP-2091 \"Behavioral Requirements\": clients choose how strictly to\n\
             enforce).",
            Mode::ALL.iter().map(|m| m.as_str().to_owned()).collect(),
        )
    }
}

impl ToSchema for EnforcementModeSchema {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("EnforcementMode")
    }
}

/// The OpenAPI schema of [`ViolationKind`].
pub struct ViolationKindSchema;

impl PartialSchema for ViolationKindSchema {
    fn schema() -> RefOr<Schema> {
        string_enum(
            "Machine-readable kind of a violation of the signature.",
            ViolationKind::ALL.into_iter().map(wire_name).collect(),
        )
    }
}

impl ToSchema for ViolationKindSchema {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("ViolationKind")
    }
}

/// The OpenAPI schema of [`NoticeKind`].
pub struct NoticeKindSchema;

impl PartialSchema for NoticeKindSchema {
    fn schema() -> RefOr<Schema> {
        string_enum(
            "Machine-readable kind of a notice (a difference that is not a violation).",
            NoticeKind::ALL.into_iter().map(wire_name).collect(),
        )
    }
}

impl ToSchema for NoticeKindSchema {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("NoticeKind")
    }
}

/// One violation of the signature (wire form of `pinfold_core` `Violation`).
#[derive(ToSchema)]
#[schema(as = Violation)]
pub struct ViolationDoc {
    /// What kind of violation.
    #[schema(value_type = ViolationKindSchema)]
    pub kind: String,
    /// JSON pointer into the observation.
    pub pointer: String,
    /// True when the observation is less safe than anything declared
    /// (SEP-2091 containment).
    pub less_safe: bool,
    /// One human-readable sentence.
    pub message: String,
    /// The tool, prompt or resource concerned.
    #[schema(nullable = false)]
    pub name: Option<String>,
    /// The offending observed value (normalised for annotations), when useful.
    #[schema(value_type = Option<Value>, nullable = false)]
    pub observed: Option<Value>,
}

/// Something that differs but does not violate the signature.
#[derive(ToSchema)]
#[schema(as = Notice)]
pub struct NoticeDoc {
    /// What kind of notice.
    #[schema(value_type = NoticeKindSchema)]
    pub kind: String,
    /// JSON pointer into the observation.
    pub pointer: String,
    /// One human-readable sentence.
    pub message: String,
    /// The tool, prompt or resource concerned.
    #[schema(nullable = false)]
    pub name: Option<String>,
}

/// The outcome of checking an observation against a version's signature.
#[derive(ToSchema)]
#[schema(as = VerifyReport)]
pub struct VerifyReportDoc {
    /// True when there is no violation, whatever the mode.
    pub conformant: bool,
    /// True only in strict mode with violations: the observation must be refused.
    pub blocking: bool,
    /// The mode the report was made under.
    #[schema(value_type = EnforcementModeSchema)]
    pub mode: String,
    /// Violations, in document order.
    pub violations: Vec<ViolationDoc>,
    /// Notices, in document order.
    pub notices: Vec<NoticeDoc>,
    /// The version checked against.
    pub version: String,
    /// Its digest.
    pub digest: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use pinfold_core::contain::{Notice, VerifyReport, Violation};
    use serde_json::json;
    use std::collections::BTreeSet;

    fn object(schema: RefOr<Schema>) -> Value {
        serde_json::to_value(schema).unwrap()
    }

    /// Every member the value carries is a documented property, every
    /// required property is present, and enumerated strings are listed.
    fn conforms(schema: &Value, value: &Value) {
        let props = schema["properties"].as_object().expect("properties");
        let obj = value.as_object().expect("an object");
        for k in obj.keys() {
            assert!(props.contains_key(k), "{k} is sent but not documented");
        }
        for r in schema["required"].as_array().into_iter().flatten() {
            assert!(
                obj.contains_key(r.as_str().unwrap()),
                "{r} is required but not sent"
            );
        }
    }

    fn enum_values(schema: RefOr<Schema>) -> BTreeSet<String> {
        object(schema)["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn the_documented_report_matches_what_core_serialises() {
        let full = VerifyReport {
            conformant: false,
            blocking: true,
            mode: Mode::Strict,
            violations: vec![Violation {
                kind: ViolationKind::AnnotationNotDeclared,
                pointer: "/tools/0/annotations".into(),
                less_safe: true,
                message: "m".into(),
                name: Some("t".into()),
                observed: Some(json!({"readOnlyHint": false})),
            }],
            notices: vec![Notice {
                kind: NoticeKind::TitleChanged,
                pointer: "/tools/0/title".into(),
                message: "m".into(),
                name: Some("t".into()),
            }],
        };
        let mut sent = serde_json::to_value(&full).unwrap();
        sent["version"] = json!("1.0.0");
        sent["digest"] = json!("sha256:00");
        conforms(&object(VerifyReportDoc::schema()), &sent);
        conforms(&object(ViolationDoc::schema()), &sent["violations"][0]);
        conforms(&object(NoticeDoc::schema()), &sent["notices"][0]);

        // Optional members really are optional on the wire.
        let bare = Violation {
            name: None,
            observed: None,
            ..full.violations[0].clone()
        };
        conforms(
            &object(ViolationDoc::schema()),
            &serde_json::to_value(bare).unwrap(),
        );
    }

    #[test]
    fn enumerations_list_every_core_kind() {
        let violations = enum_values(ViolationKindSchema::schema());
        assert_eq!(violations.len(), ViolationKind::ALL.len());
        assert!(violations.contains("annotation_not_declared"));
        let notices = enum_values(NoticeKindSchema::schema());
        assert_eq!(notices.len(), NoticeKind::ALL.len());
        assert!(notices.contains("policy_hint_omitted"));
        let modes = enum_values(EnforcementModeSchema::schema());
        assert_eq!(
            modes,
            ["advisory", "permissive", "strict"]
                .map(String::from)
                .into()
        );
    }
}
