//! Rows of `guard_routes`, and driver errors in the guard's terms.

use pinfold_core::contain::Mode;
use pinfold_core::guard::CallsPolicy;
use pinfold_core::ids::Timestamp;
use pinfold_guard::model::{GuardRoute, VersionPin};
use pinfold_guard::store::StoreError as GuardStoreError;
use pinfold_tenancy::StoreError;

use crate::error::store_error;

/// The columns of `guard_routes` after `tenant_id`, as the stores select
/// them (`header_names` read as JSON text).
#[derive(Debug, sqlx::FromRow)]
pub struct GuardRouteDbRow {
    /// Canonical server name.
    pub server: String,
    /// Bumped by every write.
    pub revision: i64,
    /// The upstream endpoint (`None`: the card's remote).
    pub upstream_url: Option<String>,
    /// A JSON array of the header names.
    pub header_names: String,
    /// The sealed headers.
    pub headers_sealed: Option<String>,
    /// `latest` or an exact version.
    pub version_pin: String,
    /// Wire spelling of the mode (`None`: the tenant policy's).
    pub mode: Option<String>,
    /// Wire spelling of the calls policy.
    pub calls: String,
    /// Milliseconds since the epoch.
    pub created_at: i64,
    /// Milliseconds since the epoch.
    pub updated_at: i64,
    /// Token `sub` of the last writer.
    pub updated_by: String,
}

impl TryFrom<GuardRouteDbRow> for GuardRoute {
    type Error = GuardStoreError;
    fn try_from(r: GuardRouteDbRow) -> Result<Self, GuardStoreError> {
        let mode = r
            .mode
            .as_deref()
            .map(|m| {
                m.parse::<Mode>()
                    .map_err(|_| GuardStoreError::Other(format!("stored mode {m}")))
            })
            .transpose()?;
        let calls = r
            .calls
            .parse::<CallsPolicy>()
            .map_err(|_| GuardStoreError::Other(format!("stored calls policy {}", r.calls)))?;
        let header_names: Vec<String> = serde_json::from_str(&r.header_names)
            .map_err(|e| GuardStoreError::Other(format!("stored header names: {e}")))?;
        Ok(GuardRoute {
            server: r.server,
            upstream_url: r.upstream_url,
            header_names,
            headers_sealed: r.headers_sealed,
            version: VersionPin::parse(&r.version_pin),
            mode,
            calls,
            revision: r.revision,
            created_at: Timestamp::from_millis(r.created_at),
            updated_at: Timestamp::from_millis(r.updated_at),
            updated_by: r.updated_by,
        })
    }
}

/// A route's header names as the JSON text the stores write.
pub fn header_names_json(route: &GuardRoute) -> String {
    serde_json::Value::from(route.header_names.clone()).to_string()
}

/// A tenancy store error in guard terms (an audit append inside a guard
/// write).
pub fn guard_error_from(e: StoreError) -> GuardStoreError {
    match e {
        StoreError::Unavailable(m) => GuardStoreError::Unavailable(m),
        other => GuardStoreError::Other(other.to_string()),
    }
}

/// A driver error in guard terms.
pub fn guard_error(e: sqlx::Error) -> GuardStoreError {
    guard_error_from(store_error(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(mode: Option<&str>, calls: &str, names: &str) -> GuardRouteDbRow {
        GuardRouteDbRow {
            server: "a.b/c".into(),
            revision: 2,
            upstream_url: None,
            header_names: names.into(),
            headers_sealed: None,
            version_pin: "1.0.0".into(),
            mode: mode.map(str::to_owned),
            calls: calls.into(),
            created_at: 1,
            updated_at: 2,
            updated_by: "alice".into(),
        }
    }

    #[test]
    fn route_rows_convert_and_corrupt_ones_are_errors() {
        let r = GuardRoute::try_from(row(Some("strict"), "read_only", r#"["X-Key"]"#)).unwrap();
        assert_eq!(r.mode, Some(Mode::Strict));
        assert_eq!(r.calls, CallsPolicy::ReadOnly);
        assert_eq!(r.version, VersionPin::Exact("1.0.0".into()));
        assert_eq!(r.header_names, ["X-Key"]);
        assert_eq!(header_names_json(&r), r#"["X-Key"]"#);
        assert_eq!(
            GuardRoute::try_from(row(None, "all", "[]")).unwrap().mode,
            None
        );
        assert!(GuardRoute::try_from(row(Some("lenient"), "all", "[]")).is_err());
        assert!(GuardRoute::try_from(row(None, "some", "[]")).is_err());
        assert!(GuardRoute::try_from(row(None, "all", "{}")).is_err());
    }
}
