//! The console's one static asset (its stylesheet, compiled into the
//! binary so the console works offline) and the security headers of every
//! console answer.

/// The stylesheet, served at [`STYLESHEET_PATH`].
pub const STYLESHEET: &str = include_str!("../static/console.css");

/// Where the stylesheet is served.
pub const STYLESHEET_PATH: &str = "/console/static/console.css";

/// The `Content-Security-Policy` of every console answer: nothing but the
/// console's own stylesheet and images loads, no script runs (not even an
/// inline one), no plugin, no frame, forms post only to the console itself.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The CSP of a page whose form leads on to `origin` (the sign-in page,
/// whose form is answered by a redirect to the identity provider:
/// `form-action` governs where a form's redirects go too). Everything else
/// as [`CONTENT_SECURITY_POLICY`].
pub fn content_security_policy_to(origin: &str) -> String {
    CONTENT_SECURITY_POLICY.replace(
        "form-action 'self'",
        &format!("form-action 'self' {origin}"),
    )
}

/// Headers every console answer carries besides the CSP: no sniffing, no
/// referrer leaving the console, no framing, nothing cached by others.
pub const SECURITY_HEADERS: [(&str, &str); 4] = [
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "same-origin"),
    ("x-frame-options", "DENY"),
    ("cache-control", "no-store"),
];
