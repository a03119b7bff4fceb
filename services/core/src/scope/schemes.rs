//! Reading a tool's `securitySchemes` where clients find it.
//!
//! SEP-1488 puts `securitySchemes` on the tool object; OpenAI's Apps SDK
//! mirrors the same list at `_meta.securitySchemes`, and some servers
//! publish only that copy. We read both: the top-level field wins when
//! present, the `_meta` copy is used when it is the only one, and a copy
//! that says something else (a different set of alternatives, or one that
//! does not parse) is reported as a [`Notice`], never silently merged.
//!
//! Alternatives are compared as a set: their order carries no meaning
//! (any one suffices), and the scopes inside an `oauth2` alternative are
//! already sorted by the parser.

use serde::Serialize;
use serde_json::Value;

use crate::card::{SecurityScheme, parse_security_schemes};
use crate::error::{ValidationErrors, pointer_push};

/// Where the schemes in force were read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SchemeSource {
    /// The tool's own `securitySchemes`.
    TopLevel,
    /// `_meta.securitySchemes` (no top-level field).
    Meta,
    /// Neither: the provider's defaults apply.
    Undeclared,
}

/// Something worth telling the caller that did not stop the work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Notice {
    /// Stable code (`security_schemes_disagree`, ...).
    pub code: &'static str,
    /// One sentence.
    pub message: String,
}

/// A tool's declared schemes, with where they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredSchemes {
    /// The alternatives in force (`None`: nothing declared).
    pub schemes: Option<Vec<SecurityScheme>>,
    /// Where they came from.
    pub source: SchemeSource,
    /// Disagreement between the two copies, if any.
    pub notices: Vec<Notice>,
}

/// Reads the schemes of one tool object (a signature's tool or a resolved
/// tool), `pointer` being where the tool sits, for error messages. A
/// malformed list in force is an error; a malformed or different `_meta`
/// copy beside a valid top-level list is a notice.
pub fn declared_schemes(tool: &Value, pointer: &str) -> Result<DeclaredSchemes, ValidationErrors> {
    let top = tool.get("securitySchemes");
    let meta = tool.get("_meta").and_then(|m| m.get("securitySchemes"));
    let top_ptr = pointer_push(pointer, "securitySchemes");
    let meta_ptr = pointer_push(&pointer_push(pointer, "_meta"), "securitySchemes");
    let parse = |v: &Value, p: &str| {
        let mut errors = ValidationErrors::new();
        let s = parse_security_schemes(v, p, &mut errors);
        errors.into_result(s)
    };
    let mut notices = Vec::new();
    match (top, meta) {
        (None, None) => Ok(DeclaredSchemes {
            schemes: None,
            source: SchemeSource::Undeclared,
            notices,
        }),
        (None, Some(m)) => Ok(DeclaredSchemes {
            schemes: Some(parse(m, &meta_ptr)?),
            source: SchemeSource::Meta,
            notices,
        }),
        (Some(t), m) => {
            let schemes = parse(t, &top_ptr)?;
            match m.map(|m| parse(m, &meta_ptr)) {
                None => {}
                Some(Err(e)) => notices.push(Notice {
                    code: "meta_security_schemes_invalid",
                    message: format!(
                        "_meta.securitySchemes does not parse ({e}); the top-level securitySchemes is used"
                    ),
                }),
                Some(Ok(ms)) if !same_alternatives(&schemes, &ms) => notices.push(Notice {
                    code: "security_schemes_disagree",
                    message: "securitySchemes and _meta.securitySchemes list different alternatives; the top-level securitySchemes is used".to_owned(),
                }),
                Some(Ok(_)) => {}
            }
            Ok(DeclaredSchemes {
                schemes: Some(schemes),
                source: SchemeSource::TopLevel,
                notices,
            })
        }
    }
}

/// True when two lists hold the same alternatives, in any order.
fn same_alternatives(a: &[SecurityScheme], b: &[SecurityScheme]) -> bool {
    let key = |l: &[SecurityScheme]| {
        let mut v: Vec<String> = l
            .iter()
            .map(|s| serde_json::to_string(s).unwrap_or_default())
            .collect();
        v.sort();
        v.dedup();
        v
    };
    key(a) == key(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn top_level_wins_and_disagreement_is_noticed() {
        let t = json!({"name": "t",
            "securitySchemes": [{"type": "oauth2", "scopes": ["b", "a"]}, {"type": "noauth"}],
            "_meta": {"securitySchemes": [{"type": "noauth"}, {"type": "oauth2", "scopes": ["a", "b"]}]}});
        let d = declared_schemes(&t, "/tools/0").unwrap();
        assert_eq!(d.source, SchemeSource::TopLevel);
        assert!(d.notices.is_empty(), "same set in another order agrees");
        assert_eq!(
            d.schemes.unwrap()[0],
            SecurityScheme::Oauth2 {
                scopes: vec!["a".into(), "b".into()]
            }
        );

        let t = json!({"securitySchemes": [{"type": "oauth2", "scopes": ["repo"]}],
            "_meta": {"securitySchemes": [{"type": "noauth"}]}});
        let d = declared_schemes(&t, "").unwrap();
        assert_eq!(d.source, SchemeSource::TopLevel);
        assert_eq!(d.notices.len(), 1);
        assert_eq!(d.notices[0].code, "security_schemes_disagree");
        assert_eq!(
            d.schemes.unwrap(),
            [SecurityScheme::Oauth2 {
                scopes: vec!["repo".into()]
            }]
        );

        let t = json!({"securitySchemes": [{"type": "noauth"}],
            "_meta": {"securitySchemes": "nope"}});
        let d = declared_schemes(&t, "").unwrap();
        assert_eq!(d.notices[0].code, "meta_security_schemes_invalid");
    }

    #[test]
    fn meta_only_and_undeclared_and_errors() {
        let t = json!({"_meta": {"securitySchemes": [{"type": "oauth2", "scopes": ["x"]}]}});
        let d = declared_schemes(&t, "/calls/2").unwrap();
        assert_eq!(d.source, SchemeSource::Meta);
        assert_eq!(d.schemes.unwrap().len(), 1);
        let d = declared_schemes(&json!({"name": "t"}), "").unwrap();
        assert_eq!(d.source, SchemeSource::Undeclared);
        assert!(d.schemes.is_none());
        let e = declared_schemes(
            &json!({"_meta": {"securitySchemes": [{"type": "oauth2", "scopes": [1]}]}}),
            "/t",
        )
        .unwrap_err();
        assert_eq!(e.errors[0].pointer, "/t/_meta/securitySchemes/0/scopes/0");
        let e = declared_schemes(&json!({"securitySchemes": {}}), "/t").unwrap_err();
        assert_eq!(e.errors[0].pointer, "/t/securitySchemes");
    }
}
