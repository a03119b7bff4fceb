//! The ledger, read-only: the tenant's resolve sessions and its grants,
//! grants holding more than their plan needs flagged.

use maud::html;

use super::layout::{Nav, Shell, next_link, page};

/// One grant of the ledger.
#[derive(Debug, Clone)]
pub struct GrantRow {
    /// Its id.
    pub id: String,
    /// The provider profile.
    pub provider: String,
    /// Who asked for it.
    pub principal: String,
    /// Its state (`pending`, `granted`, ...).
    pub status: String,
    /// Scopes requested.
    pub requested: Vec<String>,
    /// Scopes granted.
    pub granted: Vec<String>,
    /// Scopes the plan needs.
    pub needed: Vec<String>,
    /// Granted scopes the plan does not need.
    pub excess: Vec<String>,
    /// When it was created (RFC 3339).
    pub created_at: String,
}

/// One resolve session of the ledger.
#[derive(Debug, Clone)]
pub struct SessionRow {
    /// Its id.
    pub id: String,
    /// Who opened it.
    pub principal: String,
    /// The server and version it resolves against.
    pub server: String,
    /// Its version.
    pub version: String,
    /// The enforcement mode.
    pub mode: String,
    /// Until when it lives, or when it ended (RFC 3339).
    pub until: String,
}

/// The ledger page.
pub fn ledger_page(
    shell: &Shell<'_>,
    sessions: &[SessionRow],
    grants: &[GrantRow],
    next: Option<String>,
) -> String {
    let shell = Shell {
        title: "Ledger",
        nav: Nav::Ledger,
        ..shell.clone()
    };
    let list = |scopes: &[String]| html! { @for s in scopes { code { (s) } " " } };
    let body = html! {
        h1 { "Ledger" }
        section aria-labelledby="grants" {
            h2 id="grants" { "Grants (" (grants.len()) ")" }
            @if grants.is_empty() { p { "No grant." } } @else {
                table {
                    thead { tr {
                        th scope="col" { "Grant" } th scope="col" { "Provider" } th scope="col" { "Principal" }
                        th scope="col" { "Status" } th scope="col" { "Requested" } th scope="col" { "Granted" }
                        th scope="col" { "Needed" } th scope="col" { "Flag" }
                    } }
                    tbody {
                        @for g in grants {
                            tr {
                                td { code { (g.id) } br; (g.created_at) }
                                td { (g.provider) } td { (g.principal) } td { (g.status) }
                                td { (list(&g.requested)) } td { (list(&g.granted)) } td { (list(&g.needed)) }
                                td {
                                    @if !g.excess.is_empty() {
                                        span class="chip danger" { "over-privileged" } " " (list(&g.excess))
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        section aria-labelledby="sessions" {
            h2 id="sessions" { "Resolve sessions (" (sessions.len()) ")" }
            @if sessions.is_empty() { p { "No session." } } @else {
                table {
                    thead { tr {
                        th scope="col" { "Session" } th scope="col" { "Principal" } th scope="col" { "Server" }
                        th scope="col" { "Mode" } th scope="col" { "Until" }
                    } }
                    tbody {
                        @for s in sessions {
                            tr {
                                td { code { (s.id) } } td { (s.principal) } td { (s.server) " " (s.version) }
                                td { (s.mode) } td { (s.until) }
                            }
                        }
                    }
                }
            }
        }
        (next_link(next))
    };
    page(&shell, body)
}
