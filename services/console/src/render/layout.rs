//! The page shell every console page shares, and the console's URLs.

use maud::{DOCTYPE, Markup, html};

use crate::assets::STYLESHEET_PATH;

/// Which navigation entry is the current page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    /// The review queue.
    Queue,
    /// The audit log.
    Audit,
    /// Sessions and grants.
    Ledger,
    /// None (a version, sign-in, a message).
    Other,
}

/// Who is signed in, as the shell shows it.
#[derive(Debug, Clone)]
pub struct Shell<'a> {
    /// The page title (before " · Pinfold console").
    pub title: &'a str,
    /// The tenant the page belongs to.
    pub tenant: &'a str,
    /// The signed-in subject and roles, when signed in.
    pub user: Option<(&'a str, &'a str)>,
    /// The session's CSRF token (for the sign-out form).
    pub csrf: Option<&'a str>,
    /// The current navigation entry.
    pub nav: Nav,
}

/// Percent-encodes one path segment (everything but RFC 3986 unreserved
/// characters), so a server name's `/` stays inside its segment.
pub fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The console's root for a tenant.
pub fn tenant_href(tenant: &str) -> String {
    format!("/console/t/{}", segment(tenant))
}

/// A version's page.
pub fn version_href(tenant: &str, server: &str, version: &str) -> String {
    format!(
        "{}/servers/{}/versions/{}",
        tenant_href(tenant),
        segment(server),
        segment(version)
    )
}

/// A whole HTML document around `body`.
pub fn page(shell: &Shell<'_>, body: Markup) -> String {
    let base = tenant_href(shell.tenant);
    let entry = |nav: Nav, href: String, label: &str| {
        html! {
            li {
                @if shell.nav == nav {
                    a href=(href) aria-current="page" { (label) }
                } @else {
                    a href=(href) { (label) }
                }
            }
        }
    };
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (shell.title) " · Pinfold console" }
                link rel="stylesheet" href=(STYLESHEET_PATH);
            }
            body {
                a class="skip" href="#main" { "Skip to content" }
                header class="top" {
                    span class="brand" { "Pinfold console" }
                    @if !shell.tenant.is_empty() {
                        span class="tenant" { "tenant " strong { (shell.tenant) } }
                    }
                    @if let Some((subject, roles)) = shell.user {
                        nav aria-label="Console" {
                            ul {
                                (entry(Nav::Queue, format!("{base}/queue"), "Review queue"))
                                (entry(Nav::Audit, format!("{base}/audit"), "Audit log"))
                                (entry(Nav::Ledger, format!("{base}/ledger"), "Ledger"))
                            }
                        }
                        div class="who" {
                            span { "Signed in as " strong { (subject) } " (" (roles) ")" }
                            @if let Some(csrf) = shell.csrf {
                                form method="post" action=(format!("{base}/sign-out")) class="inline" {
                                    input type="hidden" name="csrf" value=(csrf);
                                    button type="submit" { "Sign out" }
                                }
                            }
                        }
                    }
                }
                main id="main" { (body) }
            }
        }
    }
    .into_string()
}

/// A "next page" link, when there is one.
pub fn next_link(href: Option<String>) -> Markup {
    html! {
        @if let Some(href) = href {
            nav class="pager" aria-label="Pages" {
                a href=(href) rel="next" { "Next page" }
            }
        }
    }
}
