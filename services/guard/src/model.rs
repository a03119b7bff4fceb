//! Guard routes: where an upstream is and what binds it.

use pinfold_core::contain::Mode;
use pinfold_core::guard::CallsPolicy;
use pinfold_core::ids::Timestamp;

/// Which approved version binds a route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionPin {
    /// The highest approved version, followed as versions are approved or
    /// revoked.
    Latest,
    /// Exactly this version (it must be approved to be served).
    Exact(String),
}

impl VersionPin {
    /// As stored and shown: `latest` or the version.
    pub fn as_str(&self) -> &str {
        match self {
            VersionPin::Latest => "latest",
            VersionPin::Exact(v) => v,
        }
    }

    /// From the stored or requested form.
    pub fn parse(s: &str) -> VersionPin {
        if s == "latest" {
            VersionPin::Latest
        } else {
            VersionPin::Exact(s.to_owned())
        }
    }
}

/// One stored guard route: a server of a tenant, put behind the guard.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardRoute {
    /// The server's name as published (reverse-DNS, one slash).
    pub server: String,
    /// The upstream's Streamable HTTP endpoint; `None` when the approved
    /// card lists exactly one `streamable-http` remote and that one is used.
    pub upstream_url: Option<String>,
    /// The upstream request headers' names, in the order given (the
    /// values are only ever in `headers_sealed`).
    pub header_names: Vec<String>,
    /// The upstream headers sealed under the tenant's key for the
    /// [`headers_context`] of this route; `None` when there are none.
    pub headers_sealed: Option<String>,
    /// Which approved version binds the route.
    pub version: VersionPin,
    /// The enforcement mode; `None` follows the tenant policy.
    pub mode: Option<Mode>,
    /// Which calls go upstream at all.
    pub calls: CallsPolicy,
    /// Bumped by every write; the ETag of the route.
    pub revision: i64,
    /// First written.
    pub created_at: Timestamp,
    /// Last written.
    pub updated_at: Timestamp,
    /// Who last wrote it (token `sub`).
    pub updated_by: String,
}

/// The sealing context of a route's upstream headers: bound to the server,
/// so a sealed value copied onto another route does not open.
pub fn headers_context(server: &str) -> String {
    format!("guard-headers:{server}")
}
