//! The audit log: filters (kind, actor, server, time) and the events,
//! each linked to its version.

use maud::html;

use super::layout::{Nav, Shell, next_link, page, tenant_href, version_href};

/// One audit event as the page lists it.
#[derive(Debug, Clone)]
pub struct AuditRow {
    /// The event id.
    pub id: i64,
    /// When (RFC 3339).
    pub at: String,
    /// Who.
    pub actor: String,
    /// What (`version.approved`, ...).
    pub kind: String,
    /// The server concerned.
    pub server: Option<String>,
    /// The version concerned.
    pub version: Option<String>,
    /// The event's details (compact JSON).
    pub data: String,
}

/// The filters as the form shows them.
#[derive(Debug, Clone, Default)]
pub struct AuditFilters {
    /// Event kind.
    pub kind: String,
    /// Actor (token subject).
    pub actor: String,
    /// Server name.
    pub server: String,
    /// From this time (RFC 3339 or a date), inclusive.
    pub since: String,
    /// Before this time (RFC 3339 or a date), exclusive.
    pub until: String,
}

/// The audit page.
pub fn audit_page(
    shell: &Shell<'_>,
    filters: &AuditFilters,
    rows: &[AuditRow],
    error: Option<&str>,
    next: Option<String>,
) -> String {
    let shell = Shell {
        title: "Audit log",
        nav: Nav::Audit,
        ..shell.clone()
    };
    let action = format!("{}/audit", tenant_href(shell.tenant));
    let field = |id: &str, label: &str, value: &str, hint: &str| {
        html! {
            div class="field" {
                label for=(id) { (label) }
                input id=(id) name=(id) value=(value) placeholder=(hint);
            }
        }
    };
    let body = html! {
        h1 { "Audit log" }
        form method="get" action=(action) class="filters" {
            (field("kind", "Kind", &filters.kind, "version.approved"))
            (field("actor", "Actor", &filters.actor, "subject"))
            (field("server", "Server", &filters.server, "io.github.acme/files"))
            (field("since", "Since", &filters.since, "2026-01-01"))
            (field("until", "Until", &filters.until, "2026-12-31T00:00:00Z"))
            button type="submit" { "Filter" }
        }
        @if let Some(e) = error { p class="error" role="alert" { (e) } }
        @if rows.is_empty() {
            p { "No event matches." }
        } @else {
            table class="audit" {
                thead { tr {
                    th scope="col" { "#" } th scope="col" { "At" } th scope="col" { "Actor" }
                    th scope="col" { "Kind" } th scope="col" { "Server" } th scope="col" { "Details" }
                } }
                tbody {
                    @for r in rows {
                        tr {
                            td { (r.id) }
                            td { (r.at) }
                            td { (r.actor) }
                            td { code { (r.kind) } }
                            td {
                                @match (&r.server, &r.version) {
                                    (Some(s), Some(v)) => { a href=(version_href(shell.tenant, s, v)) { (s) " " (v) } }
                                    (Some(s), None) => { (s) }
                                    _ => {}
                                }
                            }
                            td { code class="data" { (r.data) } }
                        }
                    }
                }
            }
        }
        (next_link(next))
    };
    page(&shell, body)
}
