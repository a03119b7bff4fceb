//! A checked upstream answer: the complete tool to serve, whether it
//! conforms to the signature, its violations and notices, and the body its
//! cache hits send, rendered once. The engine makes one per upstream answer
//! and the cache holds it.

use std::sync::{Arc, OnceLock};

use axum::body::Bytes;
use pinfold_core::contain::{Notice, Violation};
use serde_json::Value;

/// A checked upstream answer (what the cache holds).
#[derive(Debug)]
pub(crate) struct Fetched {
    pub(crate) tool: Arc<Value>,
    pub(crate) conformant: bool,
    /// Violations and notices; absent when there are none (the usual
    /// case), which keeps an entry as small as before `hit_body` existed.
    findings: Option<Box<Findings>>,
    /// The JSON of this answer served from the cache (`source: cache`),
    /// rendered at the first hit: every later hit sends these bytes.
    pub(crate) hit_body: OnceLock<Bytes>,
}

#[derive(Debug)]
struct Findings {
    violations: Vec<Violation>,
    notices: Vec<Notice>,
}

impl Fetched {
    pub(crate) fn new(
        tool: Arc<Value>,
        conformant: bool,
        violations: Vec<Violation>,
        notices: Vec<Notice>,
    ) -> Fetched {
        let findings = (!violations.is_empty() || !notices.is_empty()).then(|| {
            Box::new(Findings {
                violations,
                notices,
            })
        });
        Fetched {
            tool,
            conformant,
            findings,
            hit_body: OnceLock::new(),
        }
    }

    pub(crate) fn violations(&self) -> &[Violation] {
        self.findings.as_ref().map_or(&[], |f| &f.violations)
    }

    pub(crate) fn notices(&self) -> &[Notice] {
        self.findings.as_ref().map_or(&[], |f| &f.notices)
    }
}
