//! Identity of servers and versions: parse-don't-validate newtypes.
//!
//! Identity rules are decided here, once, so that storage can put a unique
//! index on the canonical columns (crates.io once held hundreds of
//! versions differing only in build metadata).
//!
//! - [`ServerName`]: the official registry's shape, reverse-DNS namespace,
//!   exactly one `/`, `^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$`, 3–200 characters.
//!   The original spelling is kept for display; equality, ordering and
//!   hashing use the ASCII-lowercase [`ServerName::canonical`] form, so
//!   `io.github.Acme/files` and `io.github.acme/files` are the same server.
//! - [`Version`]: strict SemVer 2.0.0, at most 255 characters, major,
//!   minor and patch at most 19 digits each. `latest`,
//!   ranges (`^1.2`, `>=1`, `1.x`), a leading `v` and *build metadata*
//!   (`1.0.0+build.5`) are rejected: build metadata does not take part in
//!   SemVer precedence, so accepting it would let two distinct documents
//!   claim one version. Equality is therefore plain SemVer equality, and
//!   ordering is SemVer precedence.
//! - Tool and prompt names ([`is_valid_tool_name`]): 1–128 characters of
//!   `[A-Za-z0-9_.-]` (MCP 2025-11-25).

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A [`ServerName`] as a JSON Schema `pattern`, with `minLength` 3 and
/// `maxLength` 200 (every character it admits is ASCII).
pub const SERVER_NAME_PATTERN: &str = "^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$";

/// A [`Version`] as a JSON Schema `pattern`, with `maxLength` 255: the
/// SemVer 2.0.0 grammar (semver.org's regular expression) without build
/// metadata, each of major, minor and patch at most 19 digits (they are
/// 64-bit numbers).
pub const VERSION_PATTERN: &str = concat!(
    r"^(?:0|[1-9][0-9]{0,18})\.(?:0|[1-9][0-9]{0,18})\.(?:0|[1-9][0-9]{0,18})",
    r"(?:-(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*)?$"
);

/// Why a name or version was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Server name outside 3–200 characters.
    #[error("server name must be 3 to 200 characters, got {0}")]
    ServerNameLength(usize),
    /// Server name not `namespace/name` with the allowed characters.
    #[error(
        "server name must match ^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$ (reverse-DNS namespace, one '/')"
    )]
    ServerNamePattern,
    /// Version longer than 255 characters.
    #[error("version must be at most 255 characters, got {0}")]
    VersionLength(usize),
    /// `latest` is a moving pointer, not a version.
    #[error("'latest' is not a version; publish an exact semantic version")]
    VersionLatest,
    /// Build metadata is not identifying under SemVer, so it is refused.
    #[error(
        "build metadata ('+...') is not allowed in versions: it does not take part in SemVer identity"
    )]
    VersionBuildMetadata,
    /// Not a SemVer 2.0.0 version (ranges included).
    #[error("version must be an exact semantic version like 1.2.3 (no ranges): {0}")]
    VersionSyntax(String),
}

/// A validated server name such as `io.github.acme/files`.
#[derive(Clone)]
pub struct ServerName {
    original: String,
    canonical: String,
}

impl ServerName {
    /// Parses and validates a server name.
    pub fn parse(s: &str) -> Result<Self, NameError> {
        let len = s.chars().count();
        if !(3..=200).contains(&len) {
            return Err(NameError::ServerNameLength(len));
        }
        let (ns, name) = s.split_once('/').ok_or(NameError::ServerNamePattern)?;
        let ns_ok = !ns.is_empty()
            && ns
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'-');
        let name_ok = !name.is_empty()
            && name
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'_' || c == b'-');
        if !ns_ok || !name_ok {
            return Err(NameError::ServerNamePattern);
        }
        Ok(Self {
            original: s.to_owned(),
            canonical: s.to_ascii_lowercase(),
        })
    }

    /// The name as published.
    pub fn as_str(&self) -> &str {
        &self.original
    }

    /// The identity form (ASCII lowercase) used for equality and storage keys.
    pub fn canonical(&self) -> &str {
        &self.canonical
    }

    /// The namespace part (before the `/`).
    pub fn namespace(&self) -> &str {
        self.original.split_once('/').map_or("", |(ns, _)| ns)
    }
}

impl PartialEq for ServerName {
    fn eq(&self, other: &Self) -> bool {
        self.canonical == other.canonical
    }
}
impl Eq for ServerName {}
impl Hash for ServerName {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.canonical.hash(state);
    }
}
impl PartialOrd for ServerName {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ServerName {
    fn cmp(&self, other: &Self) -> Ordering {
        self.canonical.cmp(&other.canonical)
    }
}
impl fmt::Debug for ServerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ServerName({:?})", self.original)
    }
}
impl fmt::Display for ServerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.original)
    }
}
impl FromStr for ServerName {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}
impl Serialize for ServerName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.original)
    }
}
impl<'de> Deserialize<'de> for ServerName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A validated exact semantic version without build metadata.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Version(semver::Version);

impl Version {
    /// Parses and validates a version.
    pub fn parse(s: &str) -> Result<Self, NameError> {
        if s.len() > 255 {
            return Err(NameError::VersionLength(s.len()));
        }
        if s.eq_ignore_ascii_case("latest") {
            return Err(NameError::VersionLatest);
        }
        let v = semver::Version::parse(s).map_err(|e| NameError::VersionSyntax(e.to_string()))?;
        if !v.build.is_empty() {
            return Err(NameError::VersionBuildMetadata);
        }
        // At most 19 digits each, as [`VERSION_PATTERN`] says (a regular
        // expression for "at most u64::MAX" would be unreadable).
        if [v.major, v.minor, v.patch]
            .iter()
            .any(|n| *n >= 10u64.pow(19))
        {
            return Err(NameError::VersionSyntax(
                "major, minor and patch are at most 19 digits each".into(),
            ));
        }
        Ok(Self(v))
    }

    /// The underlying SemVer value.
    pub fn semver(&self) -> &semver::Version {
        &self.0
    }

    /// True for pre-releases (`1.0.0-rc.1`).
    pub fn is_prerelease(&self) -> bool {
        !self.0.pre.is_empty()
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.cmp(&other.0)
    }
}
impl fmt::Debug for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Version({})", self.0)
    }
}
impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}
impl FromStr for Version {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}
impl Serialize for Version {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}
impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// Maximum length of a tool or prompt name (MCP 2025-11-25).
pub const MAX_TOOL_NAME: usize = 128;

/// True for a valid tool name: 1–128 characters of `[A-Za-z0-9_.-]`.
pub fn is_valid_tool_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_TOOL_NAME
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names() {
        let n = ServerName::parse("io.github.Acme/files").unwrap();
        assert_eq!(n.to_string(), "io.github.Acme/files");
        assert_eq!(n.canonical(), "io.github.acme/files");
        assert_eq!(n, ServerName::parse("io.github.acme/files").unwrap());
        assert_eq!(n.namespace(), "io.github.Acme");
        for bad in [
            "no-namespace-separator",
            "a/b/c",
            "/x",
            "x/",
            "a b/c",
            "ab",
            "é.x/y",
        ] {
            assert!(ServerName::parse(bad).is_err(), "{bad}");
        }
        assert!(ServerName::parse(&format!("a/{}", "x".repeat(198))).is_ok());
        assert_eq!(
            ServerName::parse(&format!("a/{}", "x".repeat(199))),
            Err(NameError::ServerNameLength(201))
        );
        let json = serde_json::to_string(&n).unwrap();
        assert_eq!(json, "\"io.github.Acme/files\"");
        assert!(serde_json::from_str::<ServerName>("\"bad\"").is_err());
    }

    #[test]
    fn versions() {
        assert!(Version::parse("1.0.2").is_ok());
        assert!(Version::parse("1.0.0-rc.1").unwrap().is_prerelease());
        assert_eq!(Version::parse("latest"), Err(NameError::VersionLatest));
        assert_eq!(
            Version::parse("1.0.0+abc"),
            Err(NameError::VersionBuildMetadata)
        );
        for bad in ["^1.2.0", ">=1", "1.x", "1.0", "v1.0.0", "01.0.0", ""] {
            assert!(Version::parse(bad).is_err(), "{bad}");
        }
        assert!(Version::parse(&format!("1.0.0-{}", "a".repeat(250))).is_err());
        assert!(Version::parse("1.0.0-alpha").unwrap() < Version::parse("1.0.0").unwrap());
        assert_eq!(
            serde_json::to_string(&Version::parse("2.1.0").unwrap()).unwrap(),
            "\"2.1.0\""
        );
    }

    fn schema(pattern: &str, min: usize, max: usize) -> jsonschema::Validator {
        jsonschema::validator_for(&serde_json::json!({"type": "string", "pattern": pattern,
            "minLength": min, "maxLength": max}))
        .unwrap()
    }

    /// The schema patterns accept exactly what the parsers accept.
    #[test]
    fn patterns_agree_with_the_parsers() {
        let names = schema(SERVER_NAME_PATTERN, 3, 200);
        let versions = schema(VERSION_PATTERN, 0, 255);
        let long = format!("a/{}", "x".repeat(199));
        for s in [
            "io.github.Acme/files",
            "a/b",
            "a/b/c",
            "/x",
            "ab",
            "é.x/y",
            "a_b/c",
            "a.b-c/d_e.f-g",
            long.as_str(),
            &long[1..],
        ] {
            assert_eq!(
                names.is_valid(&serde_json::json!(s)),
                ServerName::parse(s).is_ok(),
                "{s}"
            );
        }
        let long = format!("1.0.0-{}", "a".repeat(249));
        for s in [
            "1.0.2",
            "1.0.0-rc.1",
            "1.0.0-0.3.7",
            "1.0.0-x-y-z.--",
            "1.0.0-alpha.01",
            "1.0.0-",
            "1.0.0-a..b",
            "1.0.0+abc",
            "latest",
            "LATEST",
            "^1.2.0",
            "01.0.0",
            "v1.0.0",
            "1.0",
            "",
            "18446744073709551615.0.0",
            "1234567890123456789.0.0",
            "1.0.0\n",
            long.as_str(),
            &long[1..],
        ] {
            assert_eq!(
                versions.is_valid(&serde_json::json!(s)),
                Version::parse(s).is_ok(),
                "{s:?}"
            );
        }
    }

    proptest::proptest! {
        /// Every version the pattern admits (up to 255 bytes) parses.
        #[test]
        fn every_version_the_pattern_admits_parses(
            v in proptest::string::string_regex(
                VERSION_PATTERN.trim_start_matches('^').trim_end_matches('$')
            ).unwrap()
        ) {
            proptest::prop_assert!(v.len() > 255 || Version::parse(&v).is_ok(), "{v}");
        }
    }

    #[test]
    fn tool_names() {
        assert!(is_valid_tool_name("get-annotated_message.v2"));
        assert!(!is_valid_tool_name(""));
        assert!(!is_valid_tool_name("a b"));
        assert!(!is_valid_tool_name("a/b"));
        assert!(is_valid_tool_name(&"x".repeat(128)));
        assert!(!is_valid_tool_name(&"x".repeat(129)));
    }
}
