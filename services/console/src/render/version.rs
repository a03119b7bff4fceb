//! A version's page: what it is, the escalations of its change against the
//! current approved version at the top, the decision forms (or why one is
//! missing), its attestation and reviews, every tool as a row with its
//! worst-case chips, markers and scopes, its prompts, resources and
//! templates, then every change side by side.

use maud::{Markup, html};
use pinfold_core::card::ServerCard;
use pinfold_core::diff::{Change, Class};
use serde_json::Value;

use super::layout::{Nav, Shell, page, version_href};
use crate::analysis::{Comparison, Headline, first_headline, schema_notes, tool_rows};

/// The facts of a version the page states.
#[derive(Debug, Clone)]
pub struct VersionInfo<'a> {
    /// The server's display name.
    pub server: &'a str,
    /// The version.
    pub version: &'a str,
    /// Its status (`pending`, `approved`, ...).
    pub status: &'a str,
    /// Its digest.
    pub digest: &'a str,
    /// Who published it.
    pub published_by: &'a str,
    /// When (RFC 3339).
    pub published_at: String,
    /// Who approved it, when it was.
    pub approved_by: Option<&'a str>,
    /// The reason of its last status change, if any.
    pub reason: Option<&'a str>,
}

/// One review of the history.
#[derive(Debug, Clone)]
pub struct ReviewLine<'a> {
    /// `approve` or `reject`.
    pub decision: &'a str,
    /// Who.
    pub reviewer: &'a str,
    /// When (RFC 3339).
    pub at: String,
    /// Their note.
    pub note: Option<&'a str>,
}

/// Whether an action is offered, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permit {
    /// The form is shown.
    Allowed,
    /// The form is not shown, and the page says why.
    Denied(String),
    /// Not applicable here (nothing said).
    Hidden,
}

/// The decision forms of the page.
#[derive(Debug, Clone)]
pub struct Decide<'a> {
    /// The session's CSRF token.
    pub csrf: &'a str,
    /// Approve.
    pub approve: Permit,
    /// Reject.
    pub reject: Permit,
    /// Deprecate and revoke.
    pub lifecycle: Permit,
}

/// The approved version the page compares with.
#[derive(Debug, Clone)]
pub struct Base<'a> {
    /// Its version.
    pub version: &'a str,
    /// The comparison (approved → this version).
    pub comparison: &'a Comparison,
}

/// Everything the version page shows.
#[derive(Debug, Clone)]
pub struct VersionPage<'a> {
    /// The shell.
    pub shell: Shell<'a>,
    /// The facts.
    pub info: VersionInfo<'a>,
    /// The version's card.
    pub card: &'a ServerCard,
    /// The approved version it is compared with, if any (and not itself).
    pub base: Option<Base<'a>>,
    /// The review history, oldest first.
    pub reviews: Vec<ReviewLine<'a>>,
    /// The signed attestation (compact JWS), for an approved version.
    pub attestation: Option<&'a str>,
    /// The decision forms (absent: read-only).
    pub decide: Option<Decide<'a>>,
    /// A message to show first (the outcome of a decision).
    pub flash: Option<&'a str>,
}

fn class_chip(class: Class) -> Markup {
    let css = match class {
        Class::Escalation => "chip danger",
        Class::Incompatible => "chip caution",
        Class::Reduction => "chip safe",
        Class::Neutral => "chip info",
    };
    html! { span class=(css) { (class.as_str()) } }
}

fn headline_text(h: &Headline) -> String {
    format!(
        "{} tool{} added, {} removed, {} changed; {} escalation{}",
        h.added,
        if h.added == 1 { "" } else { "s" },
        h.removed,
        h.changed,
        h.escalations,
        if h.escalations == 1 { "" } else { "s" }
    )
}

/// A value shown in a side of a change: strings as they are, anything
/// else as pretty JSON.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

fn change_row(change: &Change) -> Markup {
    let notes = match (change.kind, &change.before, &change.after) {
        ("input_schema_changed" | "output_schema_changed", Some(b), Some(a)) => schema_notes(b, a),
        _ => Vec::new(),
    };
    html! {
        tr {
            td { (class_chip(change.class)) }
            td { code { (change.name) } }
            td {
                (change.message)
                @if !notes.is_empty() {
                    ul class="notes" { @for n in &notes { li { (n) } } }
                }
            }
        }
        @if change.before.is_some() || change.after.is_some() {
            tr class="sides" {
                td colspan="3" {
                    div class="side-by-side" {
                        div {
                            span class="side" { "approved" }
                            pre { @if let Some(b) = &change.before { (shown(b)) } @else { "(none)" } }
                        }
                        div {
                            span class="side" { "this version" }
                            pre { @if let Some(a) = &change.after { (shown(a)) } @else { "(none)" } }
                        }
                    }
                }
            }
        }
    }
}

fn decide_forms(href: &str, info: &VersionInfo<'_>, d: &Decide<'_>) -> Markup {
    let why = |p: &Permit| match p {
        Permit::Denied(why) => Some(why.clone()),
        _ => None,
    };
    let confirm = format!("{} {}", info.server, info.version);
    html! {
        section aria-labelledby="decide" class="decide" {
            h2 id="decide" { "Decide" }
            @if d.approve == Permit::Allowed || d.reject == Permit::Allowed {
                form method="post" action=(format!("{href}/review")) {
                    input type="hidden" name="csrf" value=(d.csrf);
                    label for="note" { "Note (optional, at most 2,000 characters)" }
                    textarea id="note" name="note" maxlength="2000" rows="3" {}
                    div class="buttons" {
                        @if d.approve == Permit::Allowed {
                            button type="submit" name="decision" value="approve" class="primary" { "Approve " (info.version) }
                        }
                        @if d.reject == Permit::Allowed {
                            button type="submit" name="decision" value="reject" { "Reject " (info.version) }
                        }
                    }
                }
            }
            @if let Some(why) = why(&d.approve) {
                p class="why" id="why-no-approve" { strong { "No approve button: " } (why) }
            }
            @if let Some(why) = why(&d.reject) {
                p class="why" { strong { "No reject button: " } (why) }
            }
            @if d.lifecycle == Permit::Allowed {
                form method="post" action=(format!("{href}/status")) class="lifecycle" {
                    input type="hidden" name="csrf" value=(d.csrf);
                    fieldset {
                        legend { "Deprecate or revoke" }
                        div {
                            input type="radio" id="st-deprecated" name="status" value="deprecated" required;
                            label for="st-deprecated" { "Deprecate (no longer offered as latest)" }
                        }
                        div {
                            input type="radio" id="st-revoked" name="status" value="revoked";
                            label for="st-revoked" { "Revoke (withdrawn for good)" }
                        }
                    }
                    label for="reason" { "Reason (required)" }
                    textarea id="reason" name="reason" maxlength="2000" rows="2" required {}
                    div {
                        input type="checkbox" id="confirm" name="confirm" value=(confirm) required;
                        label for="confirm" { "I confirm this change to " strong { (info.server) } " version " strong { (info.version) } }
                    }
                    button type="submit" { "Change the status of " (info.server) " " (info.version) }
                }
            }
            @if let Some(why) = why(&d.lifecycle) {
                p class="why" { strong { "No deprecate or revoke: " } (why) }
            }
        }
    }
}

fn named_items(title: &str, id: &str, items: Vec<(String, Option<String>)>) -> Markup {
    html! {
        @if !items.is_empty() {
            section aria-labelledby=(id) {
                h2 id=(id) { (title) " (" (items.len()) ")" }
                table {
                    thead { tr { th scope="col" { "Name" } th scope="col" { "Description" } } }
                    tbody {
                        @for (name, desc) in &items {
                            tr { td { code { (name) } } td { @if let Some(d) = desc { (d) } } }
                        }
                    }
                }
            }
        }
    }
}

fn text_of(raw: &Value, key: &str) -> Option<String> {
    raw.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// The version page.
pub fn version_page(p: &VersionPage<'_>) -> String {
    let info = &p.info;
    let href = version_href(p.shell.tenant, info.server, info.version);
    let rows = tool_rows(p.card);
    let sig = &p.card.signature;
    let prompts = sig
        .prompts
        .iter()
        .map(|x| (x.name.clone(), text_of(&x.raw, "description")))
        .collect();
    let resources = sig
        .resources
        .iter()
        .map(|x| (x.uri.clone(), text_of(&x.raw, "description")))
        .collect();
    let templates = sig
        .resource_templates
        .iter()
        .map(|x| (x.uri_template.clone(), text_of(&x.raw, "description")))
        .collect();
    let body = html! {
        @if let Some(flash) = p.flash {
            p class="flash" role="status" { (flash) }
        }
        h1 { (info.server) " " (info.version) " " span class=(format!("status {}", info.status)) { (info.status) } }
        dl class="facts" {
            dt { "Published by" } dd { (info.published_by) " at " (info.published_at) }
            dt { "Digest" } dd { code { (info.digest) } }
            @if let Some(a) = info.approved_by { dt { "Approved by" } dd { (a) } }
            @if let Some(r) = info.reason { dt { "Reason" } dd { (r) } }
        }
        section aria-labelledby="summary" class="summary" {
            h2 id="summary" { "Summary" }
            @match &p.base {
                Some(base) => {
                    p { "Compared with the approved version " a href=(version_href(p.shell.tenant, info.server, base.version)) { (base.version) } ": " (headline_text(&base.comparison.headline)) "." }
                    @if base.comparison.escalations.is_empty() {
                        p { "No escalation." }
                    } @else {
                        h3 { "Escalations" }
                        ol class="escalations" {
                            @for c in base.comparison.escalations() {
                                li { (class_chip(c.class)) " " code { (c.name) } " " (c.message) }
                            }
                        }
                    }
                }
                None => {
                    p { "No approved version to compare with: everything below is new (" (headline_text(&first_headline(p.card))) ")." }
                }
            }
        }
        @if let Some(d) = &p.decide { (decide_forms(&href, info, d)) }
        @if let Some(jws) = p.attestation {
            section aria-labelledby="attestation" {
                h2 id="attestation" { "Attestation" }
                p { "Signed by the tenant's key; verify it offline against the tenant's " code { "jwks.json" } "." }
                pre class="jws" { (jws) }
            }
        }
        @if !p.reviews.is_empty() {
            section aria-labelledby="reviews" {
                h2 id="reviews" { "Reviews" }
                ul {
                    @for r in &p.reviews {
                        li { strong { (r.decision) } " by " (r.reviewer) " at " (r.at) @if let Some(n) = r.note { ": " q { (n) } } }
                    }
                }
            }
        }
        section aria-labelledby="tools" {
            h2 id="tools" { "Tools (" (rows.len()) ")" }
            table class="tools" {
                thead { tr { th scope="col" { "Tool" } th scope="col" { "Worst case" } th scope="col" { "Markers" } th scope="col" { "Scopes" } } }
                tbody {
                    @for r in &rows {
                        tr {
                            td {
                                code { (r.tool.name) }
                                @if let Some(t) = &r.tool.title { " " span class="title" { (t) } }
                                @if let Some(d) = &r.tool.description { p class="desc" { (d) } }
                            }
                            td { @for c in &r.chips { span class=(c.tone.class()) { (c.label) } " " } }
                            td {
                                @if r.resolvable { span class="chip info" { "resolvable" } " " }
                                @if r.dynamic { span class="chip info" { "dynamic" } " " }
                                @if r.possibilities > 1 { span class="chip info" { (r.possibilities) " possibilities" } }
                            }
                            td { @for s in &r.scopes { code { (s) } " " } }
                        }
                    }
                }
            }
        }
        (named_items("Prompts", "prompts", prompts))
        (named_items("Resources", "resources", resources))
        (named_items("Resource templates", "templates", templates))
        @if let Some(base) = &p.base {
            section aria-labelledby="changes" {
                h2 id="changes" { "Changes against " (base.version) " (" (base.comparison.diff.changes.len()) ")" }
                @if base.comparison.diff.changes.is_empty() {
                    p { "The signature is the same." }
                } @else {
                    table class="changes" {
                        thead { tr { th scope="col" { "Class" } th scope="col" { "Item" } th scope="col" { "Change" } } }
                        tbody { @for c in &base.comparison.diff.changes { (change_row(c)) } }
                    }
                }
            }
        }
    };
    let title = format!("{} {}", info.server, info.version);
    let shell = Shell {
        title: &title,
        nav: Nav::Other,
        ..p.shell.clone()
    };
    page(&shell, body)
}
