//! Console rendering benchmarks (targets in bench/README.md): the version
//! page of the GitHub MCP server's real tool list (121 tools) ≤ 50 ms, and
//! its page with the diff against a modified copy ≤ 100 ms, each from the
//! stored document (parse, validate, compare, render), as a request does.
//!
//! Uses `$PINFOLD_REALDATA` or `../../../shared/realdata`; without it the
//! benchmark prints a notice and measures nothing.

#![allow(missing_docs)]

#[path = "../tests/common/github.rs"]
mod github;

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use pinfold_console::analysis::compare;
use pinfold_console::render::version::{Base, VersionInfo, VersionPage, version_page};
use pinfold_console::render::{Nav, Shell};
use pinfold_core::card::{Limits, ServerCard};

fn render(doc: &str, base: Option<&str>) -> String {
    let limits = Limits::default();
    let parse =
        |s: &str| ServerCard::from_value(&serde_json::from_str(s).unwrap(), &limits).unwrap();
    let card = parse(doc);
    let version = card.version.to_string();
    let approved = base.map(parse);
    let comparison = approved.as_ref().map(|a| compare(a, &card));
    let page = VersionPage {
        shell: Shell {
            title: "",
            tenant: "acme",
            user: Some(("alice", "reviewer")),
            csrf: Some("t"),
            nav: Nav::Other,
        },
        info: VersionInfo {
            server: "io.github.github/github-mcp-server",
            version: &version,
            status: "pending",
            digest: card.digest(),
            published_by: "ci",
            published_at: "2026-11-29T00:00:00Z".into(),
            approved_by: None,
            reason: None,
        },
        card: &card,
        base: comparison.as_ref().map(|c| Base {
            version: "0.30.0",
            comparison: c,
        }),
        reviews: Vec::new(),
        attestation: None,
        decide: None,
        flash: None,
    };
    version_page(&page)
}

fn bench(c: &mut Criterion) {
    let Some(realdata) = github::realdata() else {
        return;
    };
    let card = github::github_card(&realdata);
    let next = github::modified(&card);
    let (card, next) = (card.to_string(), next.to_string());
    eprintln!(
        "version page {} bytes, diff page {} bytes",
        render(&card, None).len(),
        render(&next, Some(&card)).len()
    );
    c.bench_function("console_version_page_github_121", |b| {
        b.iter(|| black_box(render(black_box(&card), None)))
    });
    c.bench_function("console_diff_page_github_121", |b| {
        b.iter(|| black_box(render(black_box(&next), Some(black_box(&card)))))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
