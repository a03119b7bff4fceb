//! Test fixtures the subregistry's modules share.

use pinfold_core::ids::Timestamp;

use crate::model::{Status, StatusRow, VersionMeta};

/// A version in `status`, approved once if `approved`, with `reason`.
pub(super) fn meta(status: Status, approved: bool, reason: Option<&str>) -> VersionMeta {
    VersionMeta {
        version: "1.0.0".into(),
        digest: format!("sha256:{}", "b".repeat(64)),
        published_by: "p".into(),
        published_at: Timestamp::from_millis(1_000),
        status: StatusRow {
            status,
            revision: 2,
            changed_at: Timestamp::from_millis(5_000),
            reason: reason.map(str::to_owned),
            approved_by: None,
            approved_at: approved.then_some(Timestamp::from_millis(2_000)),
        },
    }
}
