//! The sign-in page (the identity provider's button, and in dev mode on
//! loopback the one-click buttons) and the plain message page.

use maud::html;

use super::layout::{Nav, Shell, page, tenant_href};

/// What the sign-in page offers.
#[derive(Debug, Clone)]
pub struct SignIn<'a> {
    /// The identity provider's name, when the console has a client there.
    pub provider: Option<&'a str>,
    /// The dev identities offered (`(value, label)`), in dev mode on loopback.
    pub dev: Vec<(&'a str, &'a str)>,
    /// The pre-session token the forms carry (double-submitted with its
    /// cookie).
    pub token: &'a str,
    /// Why the last attempt failed.
    pub error: Option<&'a str>,
}

/// The sign-in page.
pub fn signin_page(tenant: &str, s: &SignIn<'_>) -> String {
    let shell = Shell {
        title: "Sign in",
        tenant,
        user: None,
        csrf: None,
        nav: Nav::Other,
    };
    let base = tenant_href(tenant);
    let body = html! {
        h1 { "Sign in" }
        @if let Some(e) = s.error { p class="error" role="alert" { (e) } }
        @if let Some(provider) = s.provider {
            form method="post" action=(format!("{base}/sign-in/oidc")) {
                input type="hidden" name="token" value=(s.token);
                button type="submit" class="primary" { "Sign in with " (provider) }
            }
        }
        @if !s.dev.is_empty() {
            section aria-labelledby="dev" {
                h2 id="dev" { "Development sign-in" }
                p { "Dev mode on loopback: sign in as a dev identity of this tenant, signed by the dev key." }
                @for (value, label) in &s.dev {
                    form method="post" action=(format!("{base}/sign-in/dev")) class="inline" {
                        input type="hidden" name="token" value=(s.token);
                        input type="hidden" name="as" value=(value);
                        button type="submit" { "Sign in as " (label) }
                    }
                }
            }
        }
        @if s.provider.is_none() && s.dev.is_empty() {
            p { "No sign-in is configured for the console: see docs/CONSOLE.md." }
        }
    };
    page(&shell, body)
}

/// A page saying one thing (an error, a refusal), with a link onwards.
pub fn message_page(
    shell: &Shell<'_>,
    title: &str,
    message: &str,
    link: Option<(&str, &str)>,
) -> String {
    let shell = Shell {
        title,
        nav: Nav::Other,
        ..shell.clone()
    };
    let body = html! {
        h1 { (title) }
        p { (message) }
        @if let Some((href, label)) = link { p { a href=(href) { (label) } } }
    };
    page(&shell, body)
}

/// The console's front page: which tenant to sign in to.
pub fn tenant_choice_page() -> String {
    let shell = Shell {
        title: "Pinfold console",
        tenant: "",
        user: None,
        csrf: None,
        nav: Nav::Other,
    };
    let body = html! {
        h1 { "Pinfold console" }
        form method="get" action="/console" {
            label for="tenant" { "Tenant" }
            input id="tenant" name="tenant" required;
            button type="submit" { "Continue" }
        }
    };
    page(&shell, body)
}
