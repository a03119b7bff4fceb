//! Client capability profiles: what a client says it can do in the
//! `capabilities` of `initialize` (and of a 2026-07-28 request's `_meta`).
//!
//! Servers decide what to list from it: a server may register a tool only
//! for clients that can answer `roots/list`, `sampling/createMessage` or
//! `elicitation/create` (MCP 2025-11-25, "Client Features"), as the
//! reference `server-everything` does. A signature captured by a client
//! that advertises nothing lacks those tools, and a verification made that
//! way passes a server whose real clients see more. So capture and verify
//! advertise, by default, what mainstream clients (Claude Desktop, VS Code)
//! advertise.
//!
//! | profile | `capabilities` |
//! | --- | --- |
//! | `default` | `roots` with `listChanged`, `sampling`, `elicitation`, and the tool-resolution extension (`extensions`, SEP-1724) |
//! | `none` | `{}`: a client that offers nothing |
//! | `FILE.json` | the object in the file, as a client sends it |
//!
//! The client never acts on what it advertises: `roots/list` is answered
//! with no roots, `elicitation/create` is declined and
//! `sampling/createMessage` refused (a capture calls no tool, so a server
//! has no reason to ask).

use std::path::Path;

use rmcp::model::ClientCapabilities;
use serde_json::{Map, Value, json};

/// The tool-resolution extension's identifier (SEP-1724 extension key):
/// servers may list resolvable tools only to clients that speak it.
pub const TOOL_RESOLUTION: &str = "io.modelcontextprotocol/tool-resolution";

/// Which capabilities a client advertises.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientProfile {
    /// Nothing (`{}`).
    None,
    /// What mainstream clients advertise (see the module documentation).
    Default,
    /// The capabilities read from a file.
    File {
        /// The file, as given.
        path: String,
        /// Its capabilities.
        capabilities: Value,
    },
}

/// Why a profile could not be used.
#[derive(Debug, thiserror::Error)]
#[error("--client-capabilities {arg}: {reason}")]
pub struct ProfileError {
    arg: String,
    reason: String,
}

impl ClientProfile {
    /// `none`, `default`, or the path of a JSON file holding the
    /// `capabilities` object.
    pub fn parse(arg: &str) -> Result<ClientProfile, ProfileError> {
        let fail = |reason: String| ProfileError {
            arg: arg.to_owned(),
            reason,
        };
        match arg {
            "none" => return Ok(ClientProfile::None),
            "default" => return Ok(ClientProfile::Default),
            "" => return Err(fail("use none, default or FILE.json".into())),
            _ => {}
        }
        let bytes = std::fs::read(Path::new(arg))
            .map_err(|e| fail(format!("not none or default, and cannot be read: {e}")))?;
        let value: Value = serde_json::from_slice(&bytes)
            .map_err(|e| fail(format!("not a JSON document: {e}")))?;
        Self::from_value(arg, value).map_err(fail)
    }

    /// A profile from a `capabilities` object (what a file holds).
    pub fn from_value(path: &str, value: Value) -> Result<ClientProfile, String> {
        if !value.is_object() {
            return Err(
                "must hold a JSON object: the client's capabilities, as sent in initialize".into(),
            );
        }
        let typed: ClientCapabilities = serde_json::from_value(value.clone())
            .map_err(|e| format!("not client capabilities: {e}"))?;
        // What would be sent must be what the file says: a member the
        // client cannot advertise is refused, not silently left out.
        let sent = serde_json::to_value(&typed).unwrap_or_default();
        if let (Some(given), Some(kept)) = (value.as_object(), sent.as_object()) {
            let mut dropped: Vec<&str> = given
                .keys()
                .filter(|k| !kept.contains_key(*k))
                .map(String::as_str)
                .collect();
            dropped.sort_unstable();
            if !dropped.is_empty() {
                return Err(format!(
                    "{} cannot be advertised (known: experimental, extensions, roots, sampling, elicitation)",
                    dropped.join(", ")
                ));
            }
        }
        Ok(ClientProfile::File {
            path: path.to_owned(),
            capabilities: sent,
        })
    }

    /// `none`, `default` or the file's path.
    pub fn name(&self) -> &str {
        match self {
            ClientProfile::None => "none",
            ClientProfile::Default => "default",
            ClientProfile::File { path, .. } => path,
        }
    }

    /// The `capabilities` object, as sent.
    pub fn capabilities_json(&self) -> Value {
        match self {
            ClientProfile::None => json!({}),
            ClientProfile::Default => json!({
                "roots": {"listChanged": true},
                "sampling": {},
                "elicitation": {},
                "extensions": {TOOL_RESOLUTION: {}},
            }),
            ClientProfile::File { capabilities, .. } => capabilities.clone(),
        }
    }

    /// The capabilities as rmcp sends them.
    pub fn capabilities(&self) -> ClientCapabilities {
        serde_json::from_value(self.capabilities_json()).unwrap_or_default()
    }

    /// One line for humans: `default (roots, sampling, elicitation,
    /// extensions: io.modelcontextprotocol/tool-resolution)`.
    pub fn describe(&self) -> String {
        let caps = self.capabilities_json();
        let mut parts = Vec::new();
        if let Some(o) = caps.as_object() {
            for (k, v) in o {
                match (k.as_str(), v.as_object()) {
                    ("extensions" | "experimental", Some(m)) if !m.is_empty() => {
                        let keys: Vec<&str> = m.keys().map(String::as_str).collect();
                        parts.push(format!("{k}: {}", keys.join(", ")));
                    }
                    _ => parts.push(k.clone()),
                }
            }
        }
        if parts.is_empty() {
            format!("{} (no capabilities)", self.name())
        } else {
            format!("{} ({})", self.name(), parts.join(", "))
        }
    }

    /// How a draft card records the profile it was captured under:
    /// `{"profile": NAME, "capabilities": {...}}`.
    pub fn record(&self) -> Value {
        let name = match self {
            // A file's path says nothing once the card leaves the machine:
            // the capabilities themselves are recorded.
            ClientProfile::File { .. } => "file",
            other => other.name(),
        };
        let mut m = Map::new();
        m.insert("profile".into(), Value::from(name));
        m.insert("capabilities".into(), self.capabilities_json());
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_profile_advertises_what_mainstream_clients_do() {
        let caps = ClientProfile::Default.capabilities();
        assert_eq!(caps.roots.as_ref().and_then(|r| r.list_changed), Some(true));
        assert!(caps.sampling.is_some());
        assert!(caps.elicitation.is_some());
        assert!(caps.extensions.unwrap().contains_key(TOOL_RESOLUTION));
        // What rmcp sends is exactly the documented object.
        assert_eq!(
            serde_json::to_value(ClientProfile::Default.capabilities()).unwrap(),
            ClientProfile::Default.capabilities_json()
        );
        assert_eq!(
            serde_json::to_value(ClientProfile::None.capabilities()).unwrap(),
            json!({})
        );
    }

    #[test]
    fn a_file_profile_is_read_and_checked() {
        let dir = std::env::temp_dir().join(format!("pinfold-profile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ok = dir.join("roots.json");
        std::fs::write(&ok, r#"{"roots": {}}"#).unwrap();
        let p = ClientProfile::parse(ok.to_str().unwrap()).unwrap();
        assert_eq!(p.capabilities_json(), json!({"roots": {}}));
        assert_eq!(p.record()["profile"], "file");
        assert_eq!(p.describe(), format!("{} (roots)", ok.display()));

        let unknown = dir.join("unknown.json");
        std::fs::write(&unknown, r#"{"roots": {}, "telepathy": {}}"#).unwrap();
        let e = ClientProfile::parse(unknown.to_str().unwrap()).unwrap_err();
        assert!(
            e.to_string().contains("telepathy cannot be advertised"),
            "{e}"
        );

        let array = dir.join("array.json");
        std::fs::write(&array, "[]").unwrap();
        let e = ClientProfile::parse(array.to_str().unwrap()).unwrap_err();
        assert!(e.to_string().contains("must hold a JSON object"), "{e}");

        let e = ClientProfile::parse(dir.join("missing.json").to_str().unwrap()).unwrap_err();
        assert!(e.to_string().contains("cannot be read"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(ClientProfile::parse("none").unwrap(), ClientProfile::None);
        assert_eq!(
            ClientProfile::parse("default").unwrap(),
            ClientProfile::Default
        );
    }
}
