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
    /// rendered when it is cached: every hit sends these bytes, and the
    /// call that fetched it sends them with its own `source`.
    pub(crate) hit_body: OnceLock<HitBody>,
}

/// A rendered answer: `{"tool":…,"source":"cache",…}`, and where its
/// `,"source":"cache"` starts (right after the tool's JSON, whatever the
/// tool holds).
#[derive(Debug, Default)]
pub(crate) struct HitBody {
    pub(crate) bytes: Bytes,
    source_at: usize,
}

/// What follows the tool in a hit body.
const CACHE_SOURCE: &[u8] = b",\"source\":\"cache\"";
/// What stands there in the answer to the call that fetched it.
const UPSTREAM_SOURCE: &[u8] = b",\"source\":\"upstream\"";

impl HitBody {
    /// The same answer as the call that fetched it receives it
    /// (`source: upstream`): a copy with the source spliced in, instead of
    /// serializing the tool a second time.
    pub(crate) fn as_upstream(&self) -> Option<Bytes> {
        let b = &self.bytes;
        let end = self.source_at + CACHE_SOURCE.len();
        if b.get(self.source_at..end) != Some(CACHE_SOURCE) {
            return None;
        }
        let mut v = Vec::with_capacity(b.len() + UPSTREAM_SOURCE.len() - CACHE_SOURCE.len());
        v.extend_from_slice(&b[..self.source_at]);
        v.extend_from_slice(UPSTREAM_SOURCE);
        v.extend_from_slice(&b[end..]);
        Some(Bytes::from(v))
    }
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

    /// The body every cache hit of this answer sends: what serializing
    /// `self.served(Source::Cache)` gives, written field by field so that
    /// the position of its `source` is known. Written once, into a buffer
    /// sized from the declared tool's JSON length (a 1 MiB tool is not
    /// copied through ever larger buffers), the slack then given back: a
    /// cached body weighs what it holds.
    pub(crate) fn render_hit_body(&self) -> HitBody {
        let mut v = Vec::with_capacity(self.tool.json_len_hint() + 512);
        v.extend_from_slice(b"{\"tool\":");
        if serde_json::to_writer(&mut v, &self.tool).is_err() {
            return HitBody::default();
        }
        let source_at = v.len();
        v.extend_from_slice(CACHE_SOURCE);
        v.extend_from_slice(b",\"conformant\":");
        v.extend_from_slice(if self.conformant { b"true" } else { b"false" });
        v.extend_from_slice(b",\"violations\":");
        if serde_json::to_writer(&mut v, self.violations()).is_err() {
            return HitBody::default();
        }
        v.extend_from_slice(b",\"notices\":");
        if serde_json::to_writer(&mut v, self.notices()).is_err() {
            return HitBody::default();
        }
        v.push(b'}');
        v.shrink_to_fit();
        HitBody {
            bytes: Bytes::from(v),
            source_at,
        }
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
            + self.hit_body.get().map_or(0, |h| h.bytes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pinfold_core::card::Limits;
    use pinfold_resolve_check::PreparedSignature;
    use serde_json::{Value, json};

    /// The hand-written hit body is exactly what serializing the served
    /// answer gives, for each source it is sent with, whatever the tool
    /// holds (a description that contains the very bytes spliced).
    #[test]
    fn the_hit_body_is_the_served_answer_and_splices_its_source() {
        let mut card: Value =
            serde_json::from_str(include_str!("../../../examples/manage-files-1.0.0.json"))
                .unwrap();
        card["signature"]["tools"][0]["description"] =
            json!(r#"tricky: ,"source":"cache", and {"source":"cache"}"#);
        let sig = PreparedSignature::new(&card, &Limits::default()).unwrap();
        let t = sig.tool("manage_files").unwrap();
        let answers = [
            json!({"resultType": "complete", "name": "manage_files",
                   "annotations": {"readOnlyHint": true, "openWorldHint": false},
                   "_meta": {"x": {"source": "cache"}}}),
            json!({"resultType": "complete", "name": "manage_files",
                   "annotations": {"readOnlyHint": false, "destructiveHint": true, "openWorldHint": true, "source": "cache"}}),
        ];
        for answer in answers {
            let report = t.check(&answer, &Limits::default()).unwrap();
            let f = Fetched::new(
                t.served_tool(answer),
                report.conformant,
                report.violations,
                report.notices,
            );
            let hit = f.render_hit_body();
            assert_eq!(
                hit.bytes,
                serde_json::to_vec(&f.served(Source::Cache)).unwrap(),
                "{}",
                String::from_utf8_lossy(&hit.bytes)
            );
            assert_eq!(
                hit.as_upstream().unwrap(),
                serde_json::to_vec(&f.served(Source::Upstream)).unwrap()
            );
            assert_eq!(hit.bytes.len(), hit.bytes.as_ref().len());
        }
    }
}
