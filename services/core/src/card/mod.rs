//! The published document: a server card with its capability signature.
//!
//! A server card (SEP-1649, extended by SEP-2091 "Extending Server Cards")
//! carries the official registry's `server.json` fields (`name`, `version`,
//! `title`, `description`, `websiteUrl`, `repository`, `remotes`,
//! `packages`, `_meta`, ...) plus an optional `signature` with `tools`,
//! `prompts`, `resources` and `resourceTemplates`: the complete universe of
//! what the server may ever offer (SEP-2091 "Behavioral Requirements").
//!
//! [`ServerCard::from_value`] validates the whole document at once and
//! reports every problem with its JSON pointer ([`ValidationErrors`]). The
//! parsed card keeps the original [`Value`] so that the digest is always
//! taken over exactly what was published; unknown fields are preserved.
//!
//! # Validation rules
//!
//! | where | rule | code |
//! |-------|------|------|
//! | document | canonical size ≤ [`Limits::max_document_bytes`] | `document_too_large` |
//! | document | nesting ≤ [`Limits::max_depth`] | `too_deep` |
//! | `/name` | required; registry server name ([`ServerName`]) | `missing_field`, `invalid_server_name` |
//! | `/version` | required; exact SemVer, no `latest`, no ranges, no build metadata ([`Version`]) | `missing_field`, `invalid_version` |
//! | `/description` | non-empty string, ≤ [`Limits::max_card_description_chars`] | `invalid_field`, `description_empty`, `description_too_long` |
//! | `/title` | string of 1–100 characters | `invalid_field` |
//! | `/websiteUrl`, `/repository/url`, `/remotes/i/url` | `http(s)://` URL | `invalid_url` |
//! | `/packages/i/version` | non-empty, not `latest` | `invalid_package_version` |
//! | `/packages/i/packageArguments/j` | positional needs `value` or `valueHint`; named needs `name` | `invalid_argument` |
//! | `/signature/tools` | ≤ [`Limits::max_tools`] tools | `too_many_tools` |
//! | `/signature/tools/i/name` | 1–128 chars of `[A-Za-z0-9_.-]`, unique | `invalid_tool_name`, `duplicate_name` |
//! | `/signature/tools/i/inputSchema` | required object with `"type": "object"`, valid JSON Schema | `missing_field`, `invalid_input_schema` |
//! | `/signature/tools/i/annotations` | object or non-empty array of ≤ [`Limits::max_possibilities`] objects | `invalid_annotations`, `too_many_possibilities` |
//! | `/signature/tools/i/securitySchemes` | array of `{type, ...}`; `oauth2` scopes are strings | `invalid_security_scheme` |
//! | `/signature/prompts/i/name` | 1–128 chars, unique | `invalid_name`, `duplicate_name` |
//! | `/signature/resources/i/uri`, `/signature/resourceTemplates/i/uriTemplate` | required string | `missing_field` |
//! | `/signature/resourceTemplates/i/uriTemplate` | ≤ [`Limits::max_template_chars`] characters, ≤ [`Limits::max_template_expressions`] expressions | `uri_template_too_long`, `too_many_template_expressions` |
//!
//! The rules live by concern: `metadata` (the `server.json` members),
//! `signature` (tools, prompts, resources, templates and their hints),
//! `schema` (the JSON Schema dialect of `inputSchema` / `outputSchema`),
//! `limits` ([`Limits`] and the nesting check) and `fields` (the readers of
//! optional members the others share). This module composes them into a
//! [`ServerCard`].

mod fields;
mod limits;
mod metadata;
mod schema;
mod signature;

use serde_json::{Map, Value};

use crate::digest::{canonical_bytes, digest_bytes};
use crate::error::ValidationErrors;
use crate::names::{ServerName, Version};

pub use limits::{Limits, check_depth};
pub use signature::{
    AnnotationsForm, Prompt, Resource, ResourceTemplate, SecurityScheme, Signature, SignatureTool,
};
pub(crate) use signature::{
    Mode, check_signature, parse_security_schemes, parse_signature, parse_tool,
};

/// A validated server card.
#[derive(Debug, Clone)]
pub struct ServerCard {
    /// `name`.
    pub name: ServerName,
    /// `version`.
    pub version: Version,
    /// `title`, if any.
    pub title: Option<String>,
    /// `description`, if any.
    pub description: Option<String>,
    /// `websiteUrl`, if any.
    pub website_url: Option<String>,
    /// `repository`, if any (as given).
    pub repository: Option<Value>,
    /// `remotes` (as given).
    pub remotes: Vec<Value>,
    /// `packages` (as given).
    pub packages: Vec<Value>,
    /// `_meta`, if any.
    pub meta: Option<Map<String, Value>>,
    /// The signature (empty when the card has none).
    pub signature: Signature,
    raw: Value,
    digest: String,
    canonical: Vec<u8>,
}

impl ServerCard {
    /// Validates `doc` as a server card under `limits`; every problem is
    /// reported at once.
    pub fn from_value(doc: &Value, limits: &Limits) -> Result<ServerCard, ValidationErrors> {
        let mut card = Self::parse(doc, limits)?;
        card.raw = doc.clone();
        Ok(card)
    }

    /// As [`ServerCard::from_value`], taking the document by value so it is
    /// kept without a copy (the publish path).
    pub fn from_owned(doc: Value, limits: &Limits) -> Result<ServerCard, ValidationErrors> {
        let mut card = Self::parse(&doc, limits)?;
        card.raw = doc;
        Ok(card)
    }

    /// Checks `doc` as a server card under every rule of
    /// [`ServerCard::from_value`], in one pass and without building the
    /// signature model (no copy of any part of the document): what the
    /// publish path needs to store a version. The errors are exactly those
    /// `from_value` reports for the same document.
    pub fn check(doc: &Value, limits: &Limits) -> Result<CheckedCard, ValidationErrors> {
        let c = inspect(doc, limits, false)?;
        Ok(CheckedCard {
            name: c.name,
            version: c.version,
            title: c.meta.title.map(str::to_owned),
            description: c.meta.description.map(str::to_owned),
            tools: c.tools,
            digest: c.digest,
            canonical: c.canonical,
        })
    }

    fn parse(doc: &Value, limits: &Limits) -> Result<ServerCard, ValidationErrors> {
        let c = inspect(doc, limits, true)?;
        let m = c.meta;
        Ok(ServerCard {
            name: c.name,
            version: c.version,
            title: m.title.map(str::to_owned),
            description: m.description.map(str::to_owned),
            website_url: m.website_url.map(str::to_owned),
            repository: m.repository.cloned(),
            remotes: m.remotes.to_vec(),
            packages: m.packages.to_vec(),
            meta: m.meta.cloned(),
            signature: c.signature,
            digest: c.digest,
            canonical: c.canonical,
            raw: Value::Null,
        })
    }

    /// The document exactly as published.
    pub fn raw(&self) -> &Value {
        &self.raw
    }

    /// `sha256:<hex>` of the canonical document: the version's identity.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Size of the canonical document in bytes.
    pub fn canonical_len(&self) -> usize {
        self.canonical.len()
    }

    /// The RFC 8785 canonical bytes of the document.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        self.canonical.clone()
    }

    /// The RFC 8785 canonical form, computed once at validation (the bytes
    /// the digest covers).
    pub fn canonical(&self) -> &[u8] {
        &self.canonical
    }
}

fn unreachable_card<T>() -> Result<T, ValidationErrors> {
    // Only reached when name or version failed, which always pushed an error.
    Err(ValidationErrors::single(
        "",
        "invalid_document",
        "name and version are required",
    ))
}

/// A card that passed [`ServerCard::check`]: what a stored version needs
/// (identity, listing fields, canonical bytes and digest), computed once.
#[derive(Debug, Clone)]
pub struct CheckedCard {
    /// `name`.
    pub name: ServerName,
    /// `version`.
    pub version: Version,
    /// `title`, if any.
    pub title: Option<String>,
    /// `description`, if any.
    pub description: Option<String>,
    /// Number of tools in the signature.
    pub tools: usize,
    digest: String,
    canonical: Vec<u8>,
}

impl CheckedCard {
    /// `sha256:<hex>` of the canonical document: the version's identity.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The RFC 8785 canonical form (the bytes the digest covers).
    pub fn canonical(&self) -> &[u8] {
        &self.canonical
    }
}

/// One validation pass over a card, borrowing the document.
struct Inspected<'a> {
    name: ServerName,
    version: Version,
    meta: metadata::Metadata<'a>,
    signature: Signature,
    tools: usize,
    digest: String,
    canonical: Vec<u8>,
}

/// Every card rule over `doc`, all problems at once; the signature model is
/// built only when `build` is set.
fn inspect<'a>(
    doc: &'a Value,
    limits: &Limits,
    build: bool,
) -> Result<Inspected<'a>, ValidationErrors> {
    let canonical = canonical_bytes(doc);
    if canonical.len() > limits.max_document_bytes {
        return Err(ValidationErrors::single(
            "",
            "document_too_large",
            format!(
                "document is {} bytes in canonical form; the limit is {}",
                canonical.len(),
                limits.max_document_bytes
            ),
        ));
    }
    check_depth(doc, limits.max_depth)?;
    let mut errors = ValidationErrors::new();
    let Some(obj) = doc.as_object() else {
        return Err(ValidationErrors::single(
            "",
            "invalid_document",
            "a server card must be a JSON object",
        ));
    };
    let mut meta = metadata::parse_metadata(obj, limits, &mut errors);
    let (signature, tools) = match obj.get("signature") {
        None => (Signature::default(), 0),
        Some(sig) if build => {
            let s = parse_signature(sig, "/signature", limits, Mode::Declared, &mut errors);
            let n = s.tools.len();
            (s, n)
        }
        Some(sig) => (
            Signature::default(),
            check_signature(sig, "/signature", limits, &mut errors),
        ),
    };
    if errors.exceeds_limits() {
        errors
            .errors
            .retain(|e| crate::error::LIMIT_CODES.contains(&e.code));
    }
    let (Some(name), Some(version)) = (meta.name.take(), meta.version.take()) else {
        return errors.into_result(()).and_then(|_| unreachable_card());
    };
    let digest = digest_bytes(&canonical);
    errors.into_result(Inspected {
        name,
        version,
        meta,
        signature,
        tools,
        digest,
        canonical,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn card(v: Value) -> Result<ServerCard, ValidationErrors> {
        ServerCard::from_value(&v, &Limits::default())
    }

    fn pointers(e: &ValidationErrors) -> Vec<(&str, &str)> {
        e.errors
            .iter()
            .map(|e| (e.pointer.as_str(), e.code))
            .collect()
    }

    #[test]
    fn minimal_card() {
        let c = card(json!({"name": "io.github.user/weather", "version": "1.0.2"})).unwrap();
        assert_eq!(c.name.as_str(), "io.github.user/weather");
        assert!(c.signature.tools.is_empty());
        assert!(crate::digest::is_digest(c.digest()));
    }

    #[test]
    fn all_errors_at_once() {
        let e = card(json!({
            "name": "nope",
            "version": "latest",
            "description": "x".repeat(101),
            "packages": [{"registryType": "npm", "identifier": "x", "version": "latest",
                "transport": {"type": "stdio"}, "packageArguments": [{"type": "positional"}]}],
            "signature": {"tools": [
                {"name": "a", "inputSchema": {"type": "object"}},
                {"name": "a", "inputSchema": {"type": "object"}},
                {"name": "bad name", "inputSchema": {"type": "string"}},
                {"name": "c", "inputSchema": {"type": "object", "properties": 3}, "annotations": []},
                {"name": "d", "inputSchema": {"type": "object"}, "annotations": [{"readOnlyHint": 1}],
                 "securitySchemes": [{"type": "oauth2", "scopes": [1]}]},
                {"name": "e"}
            ], "prompts": [{"name": "p"}, {"name": "p"}], "resources": [{}]}
        }))
        .unwrap_err();
        assert_eq!(
            pointers(&e),
            [
                ("/description", "description_too_long"),
                ("/name", "invalid_server_name"),
                ("/packages/0/packageArguments/0", "invalid_argument"),
                ("/packages/0/version", "invalid_package_version"),
                ("/signature/prompts/1/name", "duplicate_name"),
                ("/signature/resources/0/uri", "missing_field"),
                ("/signature/tools/1/name", "duplicate_name"),
                (
                    "/signature/tools/2/inputSchema/type",
                    "invalid_input_schema"
                ),
                ("/signature/tools/2/name", "invalid_tool_name"),
                ("/signature/tools/3/annotations", "invalid_annotations"),
                (
                    "/signature/tools/3/inputSchema/properties",
                    "invalid_input_schema"
                ),
                (
                    "/signature/tools/4/annotations/0/readOnlyHint",
                    "invalid_hint"
                ),
                (
                    "/signature/tools/4/securitySchemes/0/scopes/0",
                    "invalid_security_scheme"
                ),
                ("/signature/tools/5/inputSchema", "missing_field"),
                ("/version", "invalid_version"),
            ]
        );
    }

    #[test]
    fn limits() {
        let l = Limits {
            max_tools: 1,
            ..Limits::default()
        };
        let t = json!({"name": "a", "inputSchema": {"type": "object"}});
        let doc =
            json!({"name": "a.b/c", "version": "1.0.0", "signature": {"tools": [t.clone(), t]}});
        let e = ServerCard::from_value(&doc, &l).unwrap_err();
        assert_eq!(pointers(&e), [("/signature/tools", "too_many_tools")]);
        assert!(e.exceeds_limits());

        let l = Limits {
            max_document_bytes: 10,
            ..Limits::default()
        };
        let e = ServerCard::from_value(&doc, &l).unwrap_err();
        assert_eq!(pointers(&e), [("", "document_too_large")]);

        let mut deep = json!(1);
        for _ in 0..70 {
            deep = json!([deep]);
        }
        let e = card(json!({"name": "a.b/c", "version": "1.0.0", "x": deep})).unwrap_err();
        assert_eq!(e.errors[0].code, "too_deep");
        assert!(e.errors[0].pointer.starts_with("/x/0/0"));

        let many: Vec<Value> = (0..65).map(|_| json!({})).collect();
        let e = card(
            json!({"name": "a.b/c", "version": "1.0.0", "signature": {"tools": [
            {"name": "a", "inputSchema": {"type": "object"}, "annotations": many}]}}),
        )
        .unwrap_err();
        assert_eq!(
            pointers(&e),
            [("/signature/tools/0/annotations", "too_many_possibilities")]
        );
    }

    /// `check` (the publish path) applies exactly the rules of `from_value`:
    /// the same errors for a bad card, the same identity for a good one.
    #[test]
    fn check_agrees_with_the_full_model() {
        let bad = json!({
            "name": "nope", "version": "latest", "title": "",
            "remotes": [{"type": "ws", "url": "ftp://x"}],
            "signature": {"tools": [
                {"name": "a", "inputSchema": {"type": "object"}},
                {"name": "a", "inputSchema": {"type": "string"}},
                {"name": "b", "inputSchema": {"type": "object", "properties": 3},
                 "outputSchema": {"type": 7}, "annotations": [{"readOnlyHint": 1}]},
                {"name": 3}
            ], "prompts": [{"name": "p"}, {"name": "p"}],
               "resourceTemplates": [{"uriTemplate": 1}]}
        });
        let full = ServerCard::from_value(&bad, &Limits::default()).unwrap_err();
        let checked = ServerCard::check(&bad, &Limits::default()).unwrap_err();
        assert!(full.errors.len() >= 10, "{full:?}");
        assert_eq!(pointers(&checked), pointers(&full));

        let good = json!({"name": "io.github.a/b", "version": "2.0.0", "title": "B",
            "description": "d", "signature": {"tools": [
                {"name": "t", "inputSchema": {"type": "object"}},
                {"name": "u", "inputSchema": {"type": "object"}}]}});
        let full = ServerCard::from_value(&good, &Limits::default()).unwrap();
        let checked = ServerCard::check(&good, &Limits::default()).unwrap();
        assert_eq!(checked.digest(), full.digest());
        assert_eq!(checked.canonical(), full.canonical());
        assert_eq!(checked.tools, 2);
        assert_eq!(checked.name, full.name);
        assert_eq!(checked.title.as_deref(), Some("B"));
        assert_eq!(checked.description.as_deref(), Some("d"));

        let l = Limits {
            max_tools: 1,
            ..Limits::default()
        };
        let e = ServerCard::check(&good, &l).unwrap_err();
        assert_eq!(pointers(&e), [("/signature/tools", "too_many_tools")]);
    }

    #[test]
    fn depth_convention() {
        assert!(check_depth(&json!({"a": [1]}), 2).is_ok());
        assert!(check_depth(&json!({"a": [1]}), 1).is_err());
        assert!(check_depth(&json!(1), 0).is_ok());
    }
}
