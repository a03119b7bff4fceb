//! One redaction of URLs and headers for logs, errors and audit: a URL is
//! shown as its origin (`scheme://host[:port]`) with `/…` where a path or
//! query was (either may carry a credential: `?api_key=`, `/t/<token>/`),
//! and headers by name only.

use url::Url;

/// `url` as it may be shown: its origin, with `/…` when anything followed.
pub fn redact_url(url: &str) -> String {
    let Ok(u) = Url::parse(url) else {
        return "<invalid url>".into();
    };
    let origin = u.origin().ascii_serialization();
    let bare = u.path() == "/" && u.query().is_none() && u.fragment().is_none();
    if bare {
        origin
    } else {
        format!("{origin}/…")
    }
}

/// `text` with every spelling of `url` in it (as given, and as a parser
/// writes it back, which reqwest's errors use) replaced by its redacted
/// form.
pub fn redact_in(text: &str, url: &str) -> String {
    let shown = redact_url(url);
    let mut out = text.replace(url, &shown);
    if let Ok(parsed) = Url::parse(url) {
        out = out.replace(parsed.as_str(), &shown);
    }
    out
}

/// The names of `headers`, for a log line (values never appear).
pub fn header_names<'a>(headers: impl IntoIterator<Item = &'a str>) -> String {
    let names: Vec<&str> = headers.into_iter().collect();
    format!("{names:?} (values redacted)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_queries_are_cut() {
        assert_eq!(
            redact_url("https://mcp.example:8443/t/secret-token/mcp?api_key=k"),
            "https://mcp.example:8443/…"
        );
        assert_eq!(redact_url("https://mcp.example"), "https://mcp.example");
        assert_eq!(
            redact_url("https://mcp.example/?k=v"),
            "https://mcp.example/…"
        );
        let text = "error sending request for url (https://mcp.example/mcp?api_key=k)";
        let r = redact_in(text, "https://mcp.example/mcp?api_key=k");
        assert!(
            !r.contains("api_key") && r.contains("https://mcp.example/…"),
            "{r}"
        );
        assert!(!header_names(["Authorization"]).contains("Bearer"));
    }
}
