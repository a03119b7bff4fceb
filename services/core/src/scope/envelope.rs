//! The scope envelope: every OAuth scope any tool of a signature could
//! ever require, shown to reviewers.
//!
//! A tool's `securitySchemes` lists alternatives — any one suffices
//! (SEP-1488 per-tool schemes; the tool-resolution seed's "Dynamic Security
//! Schemes" lets a resolved tool narrow them per call). An `oauth2`
//! alternative needs all its scopes together; `noauth` needs nothing. The
//! envelope of a tool is the union of the scopes of all its alternatives;
//! the signature's envelope is the union over its tools. Tools that declare
//! no `securitySchemes` fall back to the provider's default scopes at
//! planning time and are listed in [`ScopeEnvelope::tools_without_schemes`].
//! Planning the *least* privilege for concrete calls lives in the scope
//! service; this is only the ceiling (`docs/SEMANTICS.md`, section 8).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::schemes::declared_schemes;
use crate::card::{SecurityScheme, Signature};

/// The scope needs of one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolScopes {
    /// True when the tool declares `securitySchemes`.
    pub declared: bool,
    /// True when one alternative is `noauth`.
    pub noauth: bool,
    /// The declared alternatives, as published (scopes sorted).
    pub alternatives: Vec<SecurityScheme>,
    /// Every scope any alternative needs, sorted.
    pub scopes: Vec<String>,
}

/// The scope envelope of a signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScopeEnvelope {
    /// Every scope any tool could require, sorted.
    pub scopes: Vec<String>,
    /// Per tool, by name.
    pub tools: BTreeMap<String, ToolScopes>,
    /// Tools without `securitySchemes` (provider defaults apply), sorted.
    pub tools_without_schemes: Vec<String>,
}

/// The scope needs of one tool's declared schemes.
pub fn tool_scopes(schemes: Option<&[SecurityScheme]>) -> ToolScopes {
    let alternatives = schemes.map(<[SecurityScheme]>::to_vec).unwrap_or_default();
    let mut scopes = BTreeSet::new();
    let mut noauth = false;
    for s in &alternatives {
        match s {
            SecurityScheme::Noauth => noauth = true,
            SecurityScheme::Oauth2 { scopes: sc } => scopes.extend(sc.iter().cloned()),
            SecurityScheme::Other(_) => {}
        }
    }
    ToolScopes {
        declared: schemes.is_some(),
        noauth,
        alternatives,
        scopes: scopes.into_iter().collect(),
    }
}

/// The scope envelope of `sig`. A tool's schemes are read as the planner
/// reads them ([`declared_schemes`]): the top-level `securitySchemes`, else
/// the `_meta.securitySchemes` copy.
pub fn scope_envelope(sig: &Signature) -> ScopeEnvelope {
    let mut all = BTreeSet::new();
    let mut tools = BTreeMap::new();
    let mut without = Vec::new();
    for t in &sig.tools {
        let schemes = match declared_schemes(&t.raw, "") {
            Ok(d) => d.schemes,
            Err(_) => t.security_schemes.clone(),
        };
        let ts = tool_scopes(schemes.as_deref());
        if !ts.declared {
            without.push(t.name.clone());
        }
        all.extend(ts.scopes.iter().cloned());
        tools.insert(t.name.clone(), ts);
    }
    without.sort();
    ScopeEnvelope {
        scopes: all.into_iter().collect(),
        tools,
        tools_without_schemes: without,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::card::{Limits, ServerCard};
    use serde_json::json;

    #[test]
    fn envelope() {
        let doc = json!({"name": "a.b/c", "version": "1.0.0", "signature": {"tools": [
            {"name": "get_repo_contents", "inputSchema": {"type": "object"},
             "securitySchemes": [{"type": "noauth"}, {"type": "oauth2", "scopes": ["repo"]}]},
            {"name": "delete_repository", "inputSchema": {"type": "object"},
             "securitySchemes": [{"type": "oauth2", "scopes": ["repo", "delete_repo"]}]},
            {"name": "plain", "inputSchema": {"type": "object"}},
            {"name": "apps_sdk", "inputSchema": {"type": "object"},
             "_meta": {"securitySchemes": [{"type": "oauth2", "scopes": ["gist"]}]}}
        ]}});
        let card = ServerCard::from_value(&doc, &Limits::default()).unwrap();
        let e = scope_envelope(&card.signature);
        assert_eq!(e.scopes, ["delete_repo", "gist", "repo"]);
        assert_eq!(e.tools["apps_sdk"].scopes, ["gist"]);
        assert_eq!(e.tools_without_schemes, ["plain"]);
        assert!(e.tools["get_repo_contents"].noauth);
        assert_eq!(e.tools["delete_repository"].scopes, ["delete_repo", "repo"]);
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            v["tools"]["get_repo_contents"]["alternatives"],
            json!([{"type": "noauth"}, {"type": "oauth2", "scopes": ["repo"]}])
        );
    }
}
