//! The path parameters the `/v1` registry routes share: a server and a
//! version of it.

use serde::Deserialize;
use utoipa::IntoParams;

/// Path of a server.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ServerPath {
    /// Tenant id.
    pub tenant: String,
    /// Server name, URL-encoded (`io.github.acme%2Ffiles`).
    pub server: String,
}

/// Path of a version.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct VersionPath {
    /// Tenant id.
    pub tenant: String,
    /// Server name, URL-encoded (`io.github.acme%2Ffiles`).
    pub server: String,
    /// Exact semantic version, or `latest` (highest approved) on reads.
    pub version: String,
}
