//! A checked upstream answer: the complete tool to serve, whether it
//! conforms to the signature, its violations and notices, and, once it is
//! cached, the body its cache hits send. The engine makes one per upstream
//! answer and the cache holds it.

use std::sync::OnceLock;

use axum::body::Bytes;
use pinfold_core::contain::{Notice, Violation};
use pinfold_resolve_check::prepared::ServedTool;

use crate::resolution::{Resolution, Source};

/// A checked upstream answer (what the cache holds).
#[derive(Debug)]
pub(crate) struct Fetched {
    /// The served tool: the declared tool (shared with the prepared
    /// signature) and what the answer changed of it.
    pub(crate) tool: ServedTool,
    pub(crate) conformant: bool,
    /// Violations and notices; absent when there are none (the usual
    /// case).
    findings: Option<Box<Findings>>,
    /// The JSON of this answer served from the cache (`source: cache`),
    /// rendered when it is cached: every hit sends these bytes.
    pub(crate) hit_body: OnceLock<Bytes>,
}

#[derive(Debug)]
struct Findings {
    violations: Vec<Violation>,
    notices: Vec<Notice>,
}

impl Fetched {
    pub(crate) fn new(
        tool: ServedTool,
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

    /// This answer served as it is, from `source`.
    pub(crate) fn served(&self, source: Source) -> Resolution {
        Resolution {
            tool: self.tool.clone(),
            source,
            conformant: self.conformant,
            violations: self.violations().to_vec(),
            notices: self.notices().to_vec(),
            reason: None,
            events: Vec::new(),
            body: None,
        }
    }

    /// The body every cache hit of this answer sends, in an allocation of
    /// its own size (a cached body weighs what it holds). Written once,
    /// into a buffer sized from the declared tool's JSON length, so even a
    /// 1 MiB tool is not copied through ever larger buffers; the slack is
    /// then given back.
    pub(crate) fn render_hit_body(&self) -> Bytes {
        let mut v = Vec::with_capacity(self.tool.json_len_hint() + 512);
        if serde_json::to_writer(&mut v, &self.served(Source::Cache)).is_err() {
            return Bytes::new();
        }
        v.shrink_to_fit();
        Bytes::from(v)
    }

    pub(crate) fn violations(&self) -> &[Violation] {
        self.findings.as_ref().map_or(&[], |f| &f.violations)
    }

    pub(crate) fn notices(&self) -> &[Notice] {
        self.findings.as_ref().map_or(&[], |f| &f.notices)
    }

    /// Heap bytes this answer keeps alive, measured from what it holds:
    /// its own allocation, the members of the served tool that are its
    /// own (the declared tool is shared, and weighed with the prepared
    /// signature), the findings, and the rendered hit body.
    pub(crate) fn heap_bytes(&self) -> usize {
        let findings = self.findings.as_ref().map_or(0, |f| {
            std::mem::size_of::<Findings>()
                + f.violations.capacity() * std::mem::size_of::<Violation>()
                + f.notices.capacity() * std::mem::size_of::<Notice>()
                // The strings inside, as long as their JSON (a little more
                // than what they hold).
                + serde_json::to_vec(&f.violations).map_or(0, |v| v.len())
                + serde_json::to_vec(&f.notices).map_or(0, |v| v.len())
        });
        // The `Arc` around it: two counters and the value.
        2 * std::mem::size_of::<usize>()
            + std::mem::size_of::<Fetched>()
            + self.tool.own_heap_bytes()
            + findings
            + self.hit_body.get().map_or(0, Bytes::len)
    }
}
