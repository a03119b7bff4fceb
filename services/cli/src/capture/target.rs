//! The MCP server a capture speaks to, from the command line: a Streamable
//! HTTP endpoint with its `--header`s, or a program started for stdio; and
//! how an endpoint is shown (label, error texts) without the credentials
//! its URL or headers may carry.

use http::{HeaderName, HeaderValue};
use url::Url;

/// The MCP server to capture.
#[derive(Debug, Clone)]
pub enum Target {
    /// A Streamable HTTP endpoint and the headers to send it.
    Http {
        /// The endpoint.
        url: Url,
        /// Extra headers (values are sensitive).
        headers: Vec<(HeaderName, HeaderValue)>,
    },
    /// A local server started as a child process, spoken to over stdio.
    Stdio {
        /// The program.
        program: String,
        /// Its arguments.
        args: Vec<String>,
    },
}

/// Headers the MCP transport sets itself.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    "content-length",
    "host",
    "mcp-session-id",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "last-event-id",
    "connection",
    "transfer-encoding",
    "te",
    "upgrade",
    "keep-alive",
];

/// A `--header` as given ("Name: value"), checked by [`parse_header`] when
/// used. Its `Debug` shows the name only: the value is a credential.
#[derive(Clone)]
pub struct HeaderArg(String);

impl HeaderArg {
    /// The argument as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for HeaderArg {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(HeaderArg(s.to_owned()))
    }
}

impl std::fmt::Debug for HeaderArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = self.0.split_once(':').map_or("?", |(n, _)| n.trim());
        write!(f, "HeaderArg({name:?}: <redacted>)")
    }
}

/// Parses `Name: value` (the value is marked sensitive and never shown).
pub fn parse_header(raw: &str) -> Result<(HeaderName, HeaderValue), String> {
    let Some((name, value)) = raw.split_once(':') else {
        return Err("a --header is \"Name: value\"".into());
    };
    let name = name.trim();
    let header = HeaderName::try_from(name)
        .map_err(|_| format!("--header {name:?}: not a valid header name"))?;
    if RESERVED_HEADERS.contains(&header.as_str()) {
        return Err(format!(
            "--header {name}: set by the MCP transport itself, it cannot be given"
        ));
    }
    let mut value = HeaderValue::try_from(value.trim())
        .map_err(|_| format!("--header {name}: the value is not a valid header value"))?;
    value.set_sensitive(true);
    Ok((header, value))
}

impl Target {
    /// A Streamable HTTP target; `headers` as given to `--header`.
    pub fn http(url: &str, headers: &[HeaderArg]) -> Result<Target, String> {
        let parsed = Url::parse(url).map_err(|e| format!("{url:?} is not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(format!("{url:?} is not an http:// or https:// URL"));
        }
        let headers = headers
            .iter()
            .map(|h| parse_header(h.as_str()))
            .collect::<Result<_, _>>()?;
        Ok(Target::Http {
            url: parsed,
            headers,
        })
    }

    /// A stdio target from `--command "CMD ARGS"`.
    pub fn stdio(command: &str, headers: &[HeaderArg]) -> Result<Target, String> {
        if !headers.is_empty() {
            return Err("--header applies to HTTP servers, not to --command".into());
        }
        let words = shlex::split(command)
            .ok_or_else(|| format!("--command {command:?}: unbalanced quotes"))?;
        let mut words = words.into_iter();
        let program = words
            .next()
            .filter(|p| !p.is_empty())
            .ok_or("--command is empty")?;
        Ok(Target::Stdio {
            program,
            args: words.collect(),
        })
    }

    /// How the target is shown: the URL without credentials, query or
    /// fragment, or the program started.
    pub fn label(&self) -> String {
        match self {
            Target::Http { url, .. } => public_url(url),
            Target::Stdio { program, .. } => format!("`{program}` (stdio)"),
        }
    }
}

/// `url` without userinfo, query and fragment (any of which may carry a
/// credential).
pub(super) fn public_url(url: &Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.set_query(None);
    u.set_fragment(None);
    u.to_string()
}

/// Replaces every spelling of `url` in an error text by its public form:
/// the URL as given, the URL without its credentials (how reqwest names it
/// in its errors), and then any remaining trace of the query, fragment or
/// password, which may hold an API key.
pub(super) fn redact(text: &str, url: &Url) -> String {
    let shown = public_url(url);
    let mut out = text.replace(url.as_str(), &shown);
    let mut bare = url.clone();
    let _ = bare.set_username("");
    let _ = bare.set_password(None);
    out = out.replace(bare.as_str(), &shown);
    for secret in [url.query(), url.fragment(), url.password()]
        .into_iter()
        .flatten()
        .filter(|s| !s.is_empty())
    {
        out = out.replace(secret, "[redacted]");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_covers_every_spelling_of_the_url() {
        let url = Url::parse("http://u:pw-1@mcp.example/mcp?api_key=k-2#f-3").unwrap();
        for text in [
            "error sending request for url (http://u:pw-1@mcp.example/mcp?api_key=k-2#f-3)",
            // reqwest names the URL without its credentials.
            "error sending request for url (http://mcp.example/mcp?api_key=k-2#f-3)",
            "odd: api_key=k-2 and pw-1",
        ] {
            let out = redact(text, &url);
            for secret in ["pw-1", "k-2", "f-3"] {
                assert!(!out.contains(secret), "{out}");
            }
        }
        assert_eq!(
            redact("for url (http://mcp.example/mcp?api_key=k-2#f-3)", &url),
            "for url (http://mcp.example/mcp)"
        );
    }

    #[test]
    fn headers_are_checked_and_never_shown() {
        let (n, v) = parse_header("Authorization: Bearer s3cret").unwrap();
        assert_eq!(n.as_str(), "authorization");
        assert!(v.is_sensitive());
        assert!(!format!("{v:?}").contains("s3cret"));
        for bad in ["nocolon", "bad name: x", "Mcp-Session-Id: 1", "X: a\nb"] {
            let e = parse_header(bad).unwrap_err();
            assert!(!e.contains("s3cret"), "{e}");
        }
        assert!(
            parse_header("Accept: x")
                .unwrap_err()
                .contains("MCP transport")
        );
    }

    #[test]
    fn targets() {
        let t = Target::http("https://u:p@mcp.example/x?key=secret#f", &[]).unwrap();
        assert_eq!(t.label(), "https://mcp.example/x");
        assert!(Target::http("ftp://x/", &[]).is_err());
        assert!(Target::http("not a url", &[]).is_err());
        let s = Target::stdio("node 'my server.mjs' --port 0", &[]).unwrap();
        let Target::Stdio { program, args } = &s else {
            panic!()
        };
        assert_eq!(program, "node");
        assert_eq!(args, &["my server.mjs", "--port", "0"]);
        assert!(Target::stdio("a 'b", &[]).is_err());
        assert!(Target::stdio("   ", &[]).is_err());
        let h: HeaderArg = "X-Key: s3cret".parse().unwrap();
        assert!(Target::stdio("a", std::slice::from_ref(&h)).is_err());
        assert_eq!(format!("{h:?}"), "HeaderArg(\"X-Key\": <redacted>)");
        let u = Url::parse("http://h/p?token=abc").unwrap();
        assert_eq!(
            redact("error sending request for url (http://h/p?token=abc)", &u),
            "error sending request for url (http://h/p)"
        );
    }
}
