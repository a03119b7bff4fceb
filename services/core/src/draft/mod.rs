//! Draft server cards from what a live server showed.
//!
//! `pinfold capture` lists what an MCP server offers and writes a draft
//! card that can be published as is. This module is the pure part:
//!
//! - [`merge`] folds one or more captures into one signature (see the
//!   rules in [`merge`]'s module); a single capture goes through it too,
//!   so one capture and its own merge give the same document;
//! - [`identity`] turns the server's `serverInfo` into the card's registry
//!   members (a reverse-DNS name, an exact SemVer version, a title and
//!   description within the registry's limits), saying what it had to
//!   change;
//! - [`draft_card`] assembles the card; [`with_signature`] puts a merged
//!   signature into an existing card.
//!
//! The card is not validated here: callers run [`crate::card::ServerCard`]
//! validation on it, exactly as the registry does on publish.

pub mod merge;

use serde_json::{Map, Value};

use crate::error::ValidationErrors;
use crate::names::{ServerName, Version};

pub use merge::{Capture, Conflict, ConflictKind, ConflictVersion, Location, Merged, Note, merge};

/// Namespace of a draft's name when the server's own name is not a
/// registry name and no DNS host suggests one.
pub const FALLBACK_NAMESPACE: &str = "local.capture";

/// Version of a draft when the server's is not usable.
pub const FALLBACK_VERSION: &str = "0.0.0";

/// What a server says about itself (`serverInfo` of `initialize`, or of
/// `server/discover`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerInfo {
    /// `name`.
    pub name: String,
    /// `version`.
    pub version: String,
    /// `title`, if any.
    pub title: Option<String>,
    /// `description`, if any.
    pub description: Option<String>,
    /// `websiteUrl`, if any.
    pub website_url: Option<String>,
}

/// Where a capture was taken.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    /// The DNS host of a Streamable HTTP endpoint (not an IP address), used
    /// for a default namespace.
    pub host: Option<String>,
    /// The endpoint, without credentials, query or fragment: the card's
    /// `remotes` entry.
    pub remote_url: Option<String>,
}

/// Name and version chosen by the user, winning over the server's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// The server name (`namespace/name`).
    pub name: Option<String>,
    /// The version (exact SemVer).
    pub version: Option<String>,
}

/// The registry members of a draft and what was changed to get them.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    /// `name`, `version`, and `title`, `description`, `websiteUrl`,
    /// `remotes` when known.
    pub members: Map<String, Value>,
    /// One sentence per adjustment (a derived name, a repaired version, a
    /// shortened description, ...).
    pub notes: Vec<String>,
}

/// Longest `title` the registry accepts.
const MAX_TITLE: usize = 100;
/// Longest `description` the registry accepts by default.
const MAX_DESCRIPTION: usize = 100;

/// The card members for a server: its name and version (or the
/// overrides), title, description, website and remote endpoint. Invalid
/// overrides are errors at `/name` or `/version`; everything the server
/// said is made acceptable, with a note.
pub fn identity(
    info: &ServerInfo,
    origin: &Origin,
    overrides: &Overrides,
) -> Result<Identity, ValidationErrors> {
    let mut notes = Vec::new();
    let mut errors = ValidationErrors::new();
    let mut members = Map::new();
    let name = match &overrides.name {
        Some(n) => match ServerName::parse(n) {
            Ok(n) => Some(n.to_string()),
            Err(e) => {
                errors.push("/name", "invalid_server_name", format!("{n:?}: {e}"));
                None
            }
        },
        None => Some(default_name(&info.name, origin.host.as_deref(), &mut notes)),
    };
    let version = match &overrides.version {
        Some(v) => match Version::parse(v) {
            Ok(v) => Some(v.to_string()),
            Err(e) => {
                errors.push("/version", "invalid_version", format!("{v:?}: {e}"));
                None
            }
        },
        None => Some(default_version(&info.version, &mut notes)),
    };
    let (Some(name), Some(version)) = (name, version) else {
        return Err(errors);
    };
    members.insert("name".into(), Value::String(name));
    members.insert("version".into(), Value::String(version));
    if let Some(t) = info
        .title
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        let kept = shorten(t, MAX_TITLE);
        if kept != t {
            notes.push(format!(
                "the server's title is longer than {MAX_TITLE} characters; shortened"
            ));
        }
        members.insert("title".into(), Value::String(kept));
    }
    if let Some(d) = info
        .description
        .as_deref()
        .map(str::trim)
        .filter(|d| !d.is_empty())
    {
        let kept = shorten(d, MAX_DESCRIPTION);
        if kept != d {
            notes.push(format!(
                "the server's description is longer than the registry's {MAX_DESCRIPTION} characters; shortened"
            ));
        }
        members.insert("description".into(), Value::String(kept));
    }
    if let Some(w) = info.website_url.as_deref() {
        if is_http_url(w) {
            members.insert("websiteUrl".into(), Value::String(w.to_owned()));
        } else {
            notes.push(format!(
                "the server's websiteUrl {w:?} is not an http(s) URL; left out"
            ));
        }
    }
    if let Some(u) = &origin.remote_url {
        if is_http_url(u) {
            let mut remote = Map::new();
            remote.insert("type".into(), Value::from("streamable-http"));
            remote.insert("url".into(), Value::String(u.clone()));
            members.insert("remotes".into(), Value::Array(vec![Value::Object(remote)]));
        } else {
            notes.push(format!("{u:?} is not an http(s) URL; no remote recorded"));
        }
    }
    Ok(Identity { members, notes })
}

/// A draft card: the identity's members and the signature.
pub fn draft_card(identity: &Identity, signature: Value) -> Value {
    let mut card = identity.members.clone();
    card.insert("signature".into(), signature);
    Value::Object(card)
}

/// `card` with its `signature` replaced and the overrides applied: how a
/// merge of saved captures keeps the first card's registry members.
pub fn with_signature(
    card: &Map<String, Value>,
    signature: Value,
    overrides: &Overrides,
) -> Result<Value, ValidationErrors> {
    let mut out = card.clone();
    let mut errors = ValidationErrors::new();
    if let Some(n) = &overrides.name {
        match ServerName::parse(n) {
            Ok(n) => {
                out.insert("name".into(), Value::String(n.to_string()));
            }
            Err(e) => errors.push("/name", "invalid_server_name", format!("{n:?}: {e}")),
        }
    }
    if let Some(v) = &overrides.version {
        match Version::parse(v) {
            Ok(v) => {
                out.insert("version".into(), Value::String(v.to_string()));
            }
            Err(e) => errors.push("/version", "invalid_version", format!("{v:?}: {e}")),
        }
    }
    out.insert("signature".into(), signature);
    errors.into_result(Value::Object(out))
}

/// A registry name for a server whose `serverInfo.name` is `raw`.
fn default_name(raw: &str, host: Option<&str>, notes: &mut Vec<String>) -> String {
    if let Ok(n) = ServerName::parse(raw.trim()) {
        return n.to_string();
    }
    let namespace = host
        .and_then(reverse_dns)
        .unwrap_or_else(|| FALLBACK_NAMESPACE.to_owned());
    let mut local = sanitize(raw);
    if local.is_empty() {
        local = "server".into();
    }
    // Keep the whole name within the registry's 200 characters.
    let room = 200usize.saturating_sub(namespace.len() + 1).max(1);
    local.truncate(room);
    let name = format!("{namespace}/{local}");
    notes.push(format!(
        "the server calls itself {raw:?}, not a registry name (reverse-DNS namespace/name); the draft is named {name}"
    ));
    name
}

/// `mcp.acme.example` → `example.acme.mcp`; `None` for IP addresses,
/// `localhost` and single labels.
fn reverse_dns(host: &str) -> Option<String> {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let labels: Vec<&str> = host.split('.').collect();
    let label_ok = |l: &&str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let numeric = labels
        .last()
        .is_some_and(|l| l.bytes().all(|c| c.is_ascii_digit()));
    if labels.len() < 2 || numeric || !labels.iter().all(label_ok) || host.ends_with("localhost") {
        return None;
    }
    Some(labels.iter().rev().copied().collect::<Vec<_>>().join("."))
}

/// `raw` reduced to the characters a name part may hold.
fn sanitize(raw: &str) -> String {
    let mut out = String::new();
    for c in raw.trim().chars() {
        let keep = c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        if keep {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches(|c| c == '-' || c == '.').to_owned()
}

/// An exact SemVer version for a server whose `serverInfo.version` is
/// `raw`: as is when valid, else repaired (`v1.2` → `1.2.0`, build
/// metadata dropped), else [`FALLBACK_VERSION`].
fn default_version(raw: &str, notes: &mut Vec<String>) -> String {
    if let Ok(v) = Version::parse(raw) {
        return v.to_string();
    }
    let mut s = raw.trim();
    s = s.strip_prefix(['v', 'V']).unwrap_or(s);
    let s = s.split('+').next().unwrap_or("");
    let (core, pre) = match s.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (s, None),
    };
    let mut parts: Vec<&str> = core.split('.').collect();
    let numeric = parts
        .iter()
        .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()));
    let repaired = if numeric && parts.len() <= 3 {
        while parts.len() < 3 {
            parts.push("0");
        }
        let mut v = parts
            .iter()
            .map(|p| p.trim_start_matches('0'))
            .map(|p| if p.is_empty() { "0" } else { p })
            .collect::<Vec<_>>()
            .join(".");
        if let Some(p) = pre {
            v = format!("{v}-{p}");
        }
        Version::parse(&v).ok().map(|v| v.to_string())
    } else {
        None
    };
    match repaired {
        Some(v) => {
            notes.push(format!(
                "the server's version {raw:?} is not an exact semantic version; the draft says {v}"
            ));
            v
        }
        None => {
            notes.push(format!(
                "the server's version {raw:?} is not a semantic version; the draft says {FALLBACK_VERSION}"
            ));
            FALLBACK_VERSION.to_owned()
        }
    }
}

/// `s` cut to at most `max` characters, ending with `…` when cut.
fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out = out.trim_end().to_owned();
    out.push('…');
    out
}

fn is_http_url(u: &str) -> bool {
    u.strip_prefix("https://")
        .or_else(|| u.strip_prefix("http://"))
        .is_some_and(|r| !r.is_empty() && !r.chars().any(char::is_whitespace))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::card::{Limits, ServerCard};
    use serde_json::json;

    fn info(name: &str, version: &str) -> ServerInfo {
        ServerInfo {
            name: name.into(),
            version: version.into(),
            ..ServerInfo::default()
        }
    }

    #[test]
    fn names_are_made_registry_names() {
        let id = |n: &str, host: Option<&str>| {
            identity(
                &info(n, "1.0.0"),
                &Origin {
                    host: host.map(Into::into),
                    remote_url: None,
                },
                &Overrides::default(),
            )
            .unwrap()
        };
        let a = id("io.github.acme/files", None);
        assert_eq!(a.members["name"], "io.github.acme/files");
        assert!(a.notes.is_empty());
        let b = id("My Files Server!", Some("mcp.acme.example"));
        assert_eq!(b.members["name"], "example.acme.mcp/My-Files-Server");
        assert_eq!(b.notes.len(), 1);
        assert_eq!(
            id("pinfold-example-upstream", Some("127.0.0.1")).members["name"],
            "local.capture/pinfold-example-upstream"
        );
        assert_eq!(
            id("x", Some("localhost")).members["name"],
            "local.capture/x"
        );
        assert_eq!(id("***", None).members["name"], "local.capture/server");
        let long = "n".repeat(300);
        let n = id(&long, None).members["name"].as_str().unwrap().to_owned();
        assert_eq!(n.chars().count(), 200);
        assert!(ServerName::parse(&n).is_ok());
    }

    #[test]
    fn versions_are_made_exact() {
        let v = |raw: &str| {
            let mut notes = Vec::new();
            (default_version(raw, &mut notes), notes.len())
        };
        assert_eq!(v("1.2.3"), ("1.2.3".into(), 0));
        assert_eq!(v("v1.2"), ("1.2.0".into(), 1));
        assert_eq!(v("1.0.0+build.7"), ("1.0.0".into(), 1));
        assert_eq!(v("2"), ("2.0.0".into(), 1));
        assert_eq!(v("1.02.3-rc.1"), ("1.2.3-rc.1".into(), 1));
        assert_eq!(v("latest"), ("0.0.0".into(), 1));
        assert_eq!(v(""), ("0.0.0".into(), 1));
    }

    #[test]
    fn overrides_win_and_are_checked() {
        let o = Overrides {
            name: Some("io.github.me/x".into()),
            version: Some("2.0.0".into()),
        };
        let id = identity(&info("bad name", "nope"), &Origin::default(), &o).unwrap();
        assert_eq!(id.members["name"], "io.github.me/x");
        assert_eq!(id.members["version"], "2.0.0");
        assert!(id.notes.is_empty());
        let bad = Overrides {
            name: Some("noslash".into()),
            version: Some("latest".into()),
        };
        let e = identity(&info("a.b/c", "1.0.0"), &Origin::default(), &bad).unwrap_err();
        let ptrs: Vec<&str> = e.errors.iter().map(|e| e.pointer.as_str()).collect();
        assert_eq!(ptrs, ["/name", "/version"]);
        let e = with_signature(&Map::new(), json!({}), &bad).unwrap_err();
        assert_eq!(e.errors.len(), 2);
    }

    #[test]
    fn a_draft_passes_the_registry_validation() {
        let i = ServerInfo {
            name: "Files".into(),
            version: "1.0".into(),
            title: Some("T".repeat(150)),
            description: Some("A description that goes on and on ".repeat(10)),
            website_url: Some("not a url".into()),
        };
        let origin = Origin {
            host: Some("files.example.com".into()),
            remote_url: Some("https://files.example.com/mcp".into()),
        };
        let id = identity(&i, &origin, &Overrides::default()).unwrap();
        assert_eq!(id.notes.len(), 5, "{:?}", id.notes);
        let m = merge(
            &[Capture {
                label: "live".into(),
                base: String::new(),
                lists: &json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}),
            }],
            &Limits::default(),
        )
        .unwrap();
        let card = draft_card(&id, m.signature);
        let parsed = ServerCard::from_value(&card, &Limits::default()).unwrap();
        assert_eq!(parsed.name.as_str(), "com.example.files/Files");
        assert_eq!(parsed.version.to_string(), "1.0.0");
        assert_eq!(
            parsed.title.as_deref().map(|t| t.chars().count()),
            Some(100)
        );
        assert!(parsed.description.unwrap().ends_with('…'));
        assert_eq!(card["remotes"][0]["type"], "streamable-http");
        assert!(card.get("websiteUrl").is_none());
    }

    #[test]
    fn with_signature_keeps_the_card() {
        let card =
            json!({"name": "a.b/c", "version": "1.0.0", "title": "C", "signature": {"tools": []}});
        let out = with_signature(
            card.as_object().unwrap(),
            json!({"tools": [1]}),
            &Overrides {
                name: None,
                version: Some("1.1.0".into()),
            },
        )
        .unwrap();
        assert_eq!(out["title"], "C");
        assert_eq!(out["version"], "1.1.0");
        assert_eq!(out["signature"], json!({"tools": [1]}));
    }
}
