//! Rendering the console's pages: escaping, chips, escalations first, the
//! decision forms and why one is missing, and the size of the GitHub MCP
//! server's version page (real data; skipped with a notice when absent).

#[path = "common/github.rs"]
mod github;

use std::time::Instant;

use pinfold_console::analysis::{Comparison, compare};
use pinfold_console::render::version::{
    Base, Decide, Permit, VersionInfo, VersionPage, version_page,
};
use pinfold_console::render::{Nav, Shell};
use pinfold_core::card::{Limits, ServerCard};
use serde_json::{Value, json};

fn card(doc: &Value) -> ServerCard {
    ServerCard::from_value(doc, &Limits::default()).unwrap()
}

fn shell() -> Shell<'static> {
    Shell {
        title: "",
        tenant: "acme",
        user: Some(("alice", "reviewer")),
        csrf: Some("csrf-token-1"),
        nav: Nav::Other,
    }
}

fn page<'a>(
    card: &'a ServerCard,
    version: &'a str,
    base: Option<(&'a str, &'a Comparison)>,
    decide: Option<Decide<'a>>,
) -> String {
    version_page(&VersionPage {
        shell: shell(),
        info: VersionInfo {
            server: "io.github.acme/files",
            version,
            status: "pending",
            digest: card.digest(),
            published_by: "bob",
            published_at: "2026-11-29T00:00:00Z".into(),
            approved_by: None,
            reason: None,
        },
        card,
        base: base.map(|(version, comparison)| Base {
            version,
            comparison,
        }),
        reviews: Vec::new(),
        attestation: None,
        decide,
        flash: None,
    })
}

fn files(version: &str, tools: Value) -> Value {
    json!({"name": "io.github.acme/files", "version": version,
        "description": "Files", "signature": {"tools": tools}})
}

#[test]
fn a_script_in_a_description_renders_as_text() {
    let c = card(&files(
        "1.0.0",
        json!([{"name": "read", "description": "<script>alert(1)</script> & \"quotes\"",
            "title": "<img src=x onerror=alert(2)>", "inputSchema": {"type": "object"}}]),
    ));
    let html = page(&c, "1.0.0", None, None);
    assert!(!html.contains("<script>"), "{html}");
    assert!(!html.contains("<img"), "{html}");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quotes&quot;"));
    assert!(!html.contains("<script"), "no script element at all");
    assert!(
        !html.contains(" style="),
        "no inline style (the CSP forbids them)"
    );
}

#[test]
fn escalations_are_listed_before_the_tools_and_the_changes() {
    let old = card(&files(
        "1.0.0",
        json!([{"name": "read", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}]),
    ));
    let new = card(&files(
        "1.1.0",
        json!([{"name": "read", "inputSchema": {"type": "object"},
            "annotations": [{"readOnlyHint": true}, {"readOnlyHint": false, "destructiveHint": true}]}]),
    ));
    let cmp = compare(&old, &new);
    let html = page(&new, "1.1.0", Some(("1.0.0", &cmp)), None);
    let esc = html
        .find("class=\"escalations\"")
        .expect("escalations listed");
    let tools = html.find("id=\"tools\"").unwrap();
    let changes = html.find("id=\"changes\"").unwrap();
    assert!(esc < tools && tools < changes);
    assert!(html[esc..tools].contains("less safely"), "{html}");
    assert!(html.contains("class=\"chip danger\">destructive<"));
    assert!(html.contains("2 possibilities"));
}

#[test]
fn the_page_says_why_the_approve_button_is_missing() {
    let c = card(&files("1.0.0", json!([])));
    let decide = Decide {
        csrf: "csrf-token-1",
        approve: Permit::Denied("you published this version".into()),
        reject: Permit::Allowed,
        lifecycle: Permit::Hidden,
    };
    let html = page(&c, "1.0.0", None, Some(decide));
    assert!(!html.contains("value=\"approve\""));
    assert!(html.contains("value=\"reject\""));
    assert!(html.contains("No approve button: </strong>you published this version"));
    assert!(html.contains("name=\"csrf\" value=\"csrf-token-1\""));
    let allowed = page(
        &c,
        "1.0.0",
        None,
        Some(Decide {
            csrf: "t",
            approve: Permit::Allowed,
            reject: Permit::Allowed,
            lifecycle: Permit::Allowed,
        }),
    );
    assert!(allowed.contains("value=\"approve\""));
    assert!(allowed.contains("value=\"io.github.acme/files 1.0.0\" required"));
}

#[test]
fn the_github_version_page_is_small_and_fast() {
    let Some(realdata) = github::realdata() else {
        return;
    };
    let doc = github::github_card(&realdata);
    let next = github::modified(&doc);
    let (old, new) = (card(&doc), card(&next));
    assert_eq!(old.signature.tools.len(), 121);
    let started = Instant::now();
    let html = page(&old, "0.30.0", None, None);
    let plain = started.elapsed();
    assert!(
        html.len() <= 150 * 1024,
        "version page is {} bytes",
        html.len()
    );
    let started = Instant::now();
    let cmp = compare(&old, &new);
    let diffed = page(&new, "0.31.0", Some(("0.30.0", &cmp)), None);
    let with_diff = started.elapsed();
    assert!(
        diffed.len() <= 150 * 1024,
        "diff page is {} bytes",
        diffed.len()
    );
    eprintln!(
        "github: version page {} bytes in {plain:?}, diff page {} bytes in {with_diff:?}",
        html.len(),
        diffed.len()
    );
    // The escalations lead: the new destructive tool, the read-only tools
    // that may now write, the added scope.
    let esc = &diffed
        [diffed.find("class=\"escalations\"").unwrap()..diffed.find("id=\"tools\"").unwrap()];
    assert!(esc.contains("purge_repository"));
    assert!(esc.contains("admin:org"));
    assert_eq!(cmp.headline.added, 2);
    assert_eq!(cmp.headline.removed, 2);
    // The tag in the new tool's description is text.
    assert!(diffed.contains("Deletes &lt;b&gt;every&lt;/b&gt; branch"));
    assert!(diffed.contains("property force added"));
    assert!(diffed.contains("new enum values"));
    // Debug builds are slow; the budget holds in release (the benchmark).
    if !cfg!(debug_assertions) {
        assert!(plain.as_millis() <= 50 && with_diff.as_millis() <= 100);
    }
}

#[test]
fn lists_escape_what_they_show_and_flag_over_privileged_grants() {
    use pinfold_console::render::audit::{AuditFilters, AuditRow, audit_page};
    use pinfold_console::render::ledger::{GrantRow, ledger_page};
    let rows = [AuditRow {
        id: 7,
        at: "2026-11-29T00:00:00.000Z".into(),
        actor: "<b>eve</b>".into(),
        kind: "version.approved".into(),
        server: Some("io.github.acme/files".into()),
        version: Some("1.0.0".into()),
        data: r#"{"note":"<script>x</script>"}"#.into(),
    }];
    let filters = AuditFilters {
        actor: "\"><script>".into(),
        ..AuditFilters::default()
    };
    let html = audit_page(
        &shell(),
        &filters,
        &rows,
        None,
        Some("/console/t/acme/audit?after=7".into()),
    );
    assert!(
        !html.contains("<script") && !html.contains("<b>eve"),
        "{html}"
    );
    assert!(
        html.contains("href=\"/console/t/acme/servers/io.github.acme%2Ffiles/versions/1.0.0\"")
    );
    assert!(html.contains("rel=\"next\""));
    let grants = [GrantRow {
        id: "g1".into(),
        provider: "github".into(),
        principal: "carl".into(),
        status: "exchanged".into(),
        requested: vec!["repo".into()],
        granted: vec!["repo".into()],
        needed: vec!["public_repo".into()],
        excess: vec!["repo".into()],
        created_at: "2026-11-29T00:00:00.000Z".into(),
    }];
    let html = ledger_page(&shell(), &[], &grants, None);
    assert!(html.contains("over-privileged"));
}
