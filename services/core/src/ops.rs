//! Pure entry points behind the offline CLI (`pinfold signature
//! digest|reduce|verify|diff`) and the HTTP API. Inputs are parsed JSON
//! values (parse bytes with [`crate::json::parse_strict`] first); outputs
//! serialise to the shapes the HTTP API and the CLI share.
//!
//! Documents are validated under [`Limits::default`] unless a `_with`
//! variant takes explicit limits.

use serde::Serialize;
use serde_json::Value;

use crate::card::{Limits, ServerCard};
use crate::contain::{Mode, Observation, VerifyReport, check};
use crate::diff::Diff;
use crate::error::ValidationErrors;
use crate::scope::ScopeEnvelope;

/// Output of `pinfold signature digest`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DigestReport {
    /// `sha256:<hex>` of the RFC 8785 form.
    pub digest: String,
    /// The card's server name.
    pub name: String,
    /// The card's version.
    pub version: String,
    /// Size of the canonical document in bytes.
    pub canonical_bytes: usize,
}

/// Validates a server card and returns its digest.
pub fn digest_document(doc: &Value) -> Result<DigestReport, ValidationErrors> {
    let card = ServerCard::from_value(doc, &Limits::default())?;
    Ok(DigestReport {
        digest: card.digest().to_owned(),
        name: card.name.to_string(),
        version: card.version.to_string(),
        canonical_bytes: card.canonical_len(),
    })
}

/// The worst-case `tools/list` view of a server card: `{"tools": [...]}`
/// (see [`crate::reduce`]).
pub fn reduce_document(doc: &Value) -> Result<Value, ValidationErrors> {
    let card = ServerCard::from_value(doc, &Limits::default())?;
    Ok(crate::reduce::reduce_signature(&card.signature))
}

/// Checks an observation (see [`crate::contain`] for the accepted shapes)
/// against the signature of a server card. Errors in the signature
/// document have their messages prefixed with `signature document:`;
/// errors in the observation are reported as they are.
pub fn verify(
    signature_doc: &Value,
    observed: &Value,
    mode: Mode,
) -> Result<VerifyReport, ValidationErrors> {
    let card = ServerCard::from_value(signature_doc, &Limits::default()).map_err(|mut e| {
        for err in &mut e.errors {
            err.message = format!("signature document: {}", err.message);
        }
        e
    })?;
    verify_card(&card, observed, mode)
}

/// Checks an observation against an already validated card (the HTTP path).
pub fn verify_card(
    card: &ServerCard,
    observed: &Value,
    mode: Mode,
) -> Result<VerifyReport, ValidationErrors> {
    let obs = Observation::from_value(observed, &Limits::default())?;
    Ok(check(&card.signature, &obs, mode))
}

/// Checks a resolution result for `tool_name` (`{"tool"}`, a complete
/// tool-resolution result, or a `tools/annotations` result) against a card.
pub fn verify_resolved(
    card: &ServerCard,
    tool_name: &str,
    result: &Value,
    mode: Mode,
) -> Result<VerifyReport, ValidationErrors> {
    let obs = Observation::from_resolution(tool_name, result, &Limits::default())?;
    Ok(check(&card.signature, &obs, mode))
}

/// The capability diff between two server cards. Errors in either
/// document have their messages prefixed with `old document:` or
/// `new document:`.
pub fn diff(old: &Value, new: &Value) -> Result<Diff, ValidationErrors> {
    let parse = |doc: &Value, which: &str| {
        ServerCard::from_value(doc, &Limits::default()).map_err(|mut e| {
            for err in &mut e.errors {
                err.message = format!("{which} document: {}", err.message);
            }
            e
        })
    };
    let (old, new) = (parse(old, "old")?, parse(new, "new")?);
    Ok(crate::diff::diff(&old, &new))
}

/// The scope envelope of a card (per tool and the union).
pub fn scope_envelope(card: &ServerCard) -> ScopeEnvelope {
    crate::scope::scope_envelope(&card.signature)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        json!({"name": "io.github.acme/files", "version": "1.0.0", "description": "Files",
            "signature": {"tools": [{"name": "manage_files", "description": "Read or write files",
                "inputSchema": {"type": "object", "properties": {"operation": {"enum": ["read", "write", "delete"]}}},
                "annotations": [{"destructiveHint": false, "readOnlyHint": true}, {"destructiveHint": true, "readOnlyHint": false}],
                "securitySchemes": [{"type": "oauth2", "scopes": ["files:write"]}, {"type": "noauth"}]}]}})
    }

    #[test]
    fn cli_shapes() {
        let d = digest_document(&doc()).unwrap();
        assert!(crate::digest::is_digest(&d.digest));
        let reduced = reduce_document(&doc()).unwrap();
        assert_eq!(
            reduced["tools"][0]["annotations"]["destructiveHint"],
            json!(true)
        );

        // Here the worst case equals the second declared possibility.
        let report = verify(&doc(), &reduced, Mode::Strict).unwrap();
        assert!(report.conformant, "{report:?}");
        let mut flipped = reduced.clone();
        flipped["tools"][0]["annotations"]["agencyHint"] = json!(true);
        let report = verify(&doc(), &flipped, Mode::Strict).unwrap();
        let v = serde_json::to_value(&report).unwrap();
        assert_eq!(v["mode"], json!("strict"));
        assert_eq!(v["conformant"], json!(false));
        assert_eq!(v["blocking"], json!(true));
        assert_eq!(v["violations"][0]["kind"], json!("annotation_not_declared"));
        assert_eq!(v["violations"][0]["pointer"], json!("/tools/0/annotations"));
        assert_eq!(v["violations"][0]["less_safe"], json!(true));

        let ok = json!({"tools": [{"name": "manage_files", "inputSchema": doc()["signature"]["tools"][0]["inputSchema"],
            "annotations": {"readOnlyHint": true}}]});
        let report = verify(&doc(), &ok, Mode::Strict).unwrap();
        assert!(report.conformant && !report.fails());

        let d = diff(&doc(), &doc()).unwrap();
        assert!(d.changes.is_empty());
        let env = scope_envelope(&ServerCard::from_value(&doc(), &Limits::default()).unwrap());
        assert_eq!(env.scopes, ["files:write"]);
    }

    #[test]
    fn errors_name_their_document() {
        let e = verify(
            &json!({"version": "1.0.0"}),
            &json!({"tools": []}),
            Mode::Strict,
        )
        .unwrap_err();
        assert_eq!(e.errors[0].pointer, "/name");
        assert!(e.errors[0].message.starts_with("signature document:"));
        let e = diff(&doc(), &json!({})).unwrap_err();
        assert!(e.errors[0].message.starts_with("new document:"));
        let e = verify(&doc(), &json!([]), Mode::Strict).unwrap_err();
        assert_eq!(e.errors[0].code, "invalid_observation");
    }
}
