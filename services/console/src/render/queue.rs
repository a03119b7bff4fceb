//! The review queue: pending versions of the tenant, oldest first, with who
//! published each and when, and the headline of its change against the
//! current approved version.

use maud::html;

use super::layout::{Nav, Shell, next_link, page, version_href};
use crate::analysis::Headline;

/// One pending version.
#[derive(Debug, Clone)]
pub struct QueueRow {
    /// The server's display name.
    pub server: String,
    /// The version.
    pub version: String,
    /// Who published it.
    pub published_by: String,
    /// When (RFC 3339).
    pub published_at: String,
    /// The approved version it is compared with (`None`: a first version).
    pub base: Option<String>,
    /// The headline of the change.
    pub headline: Headline,
}

/// The queue page: `rows` in the order given, a next-page link when there
/// is one.
pub fn queue_page(shell: &Shell<'_>, rows: &[QueueRow], next: Option<String>) -> String {
    let shell = Shell {
        title: "Review queue",
        nav: Nav::Queue,
        ..shell.clone()
    };
    let body = html! {
        h1 { "Review queue" }
        @if rows.is_empty() {
            p { "No version is waiting for review." }
        } @else {
            table class="queue" {
                caption { "Pending versions, oldest first" }
                thead { tr {
                    th scope="col" { "Server" } th scope="col" { "Version" } th scope="col" { "Published" }
                    th scope="col" { "Against" } th scope="col" { "Tools added" } th scope="col" { "Removed" }
                    th scope="col" { "Changed" } th scope="col" { "Escalations" }
                } }
                tbody {
                    @for r in rows {
                        tr {
                            td { (r.server) }
                            td { a href=(version_href(shell.tenant, &r.server, &r.version)) { (r.version) } }
                            td { (r.published_by) br; (r.published_at) }
                            td {
                                @if let Some(b) = &r.base {
                                    a href=(version_href(shell.tenant, &r.server, b)) { (b) }
                                } @else { "first version" }
                            }
                            td { (r.headline.added) }
                            td { (r.headline.removed) }
                            td { (r.headline.changed) }
                            td {
                                @if r.headline.escalations > 0 {
                                    span class="chip danger" { (r.headline.escalations) }
                                } @else { "0" }
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
