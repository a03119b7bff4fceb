//! Which versions the subregistry shows, and the official status each
//! one shows with.

use crate::model::{Status, VersionMeta};

/// The official status of a version, or `None` when the subregistry never
/// shows it (pending, rejected).
pub fn official_status(status: Status) -> Option<&'static str> {
    match status {
        Status::Approved => Some("active"),
        Status::Deprecated => Some("deprecated"),
        Status::Revoked => Some("deleted"),
        Status::Pending | Status::Rejected => None,
    }
}

/// Whether the subregistry shows a version: it was approved at some point
/// (an approval records `approved_at`, and no later transition clears it).
pub fn visible(meta: &VersionMeta) -> bool {
    meta.status.approved_at.is_some() && official_status(meta.status.status).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subregistry::fixtures::meta;

    #[test]
    fn statuses_map_onto_the_official_ones() {
        assert_eq!(official_status(Status::Approved), Some("active"));
        assert_eq!(official_status(Status::Deprecated), Some("deprecated"));
        assert_eq!(official_status(Status::Revoked), Some("deleted"));
        assert_eq!(official_status(Status::Pending), None);
        assert_eq!(official_status(Status::Rejected), None);
    }

    #[test]
    fn only_versions_approved_once_are_visible() {
        assert!(visible(&meta(Status::Approved, true, None)));
        assert!(visible(&meta(Status::Deprecated, true, None)));
        assert!(visible(&meta(Status::Revoked, true, None)));
        assert!(!visible(&meta(Status::Revoked, false, None)));
        assert!(!visible(&meta(Status::Pending, false, None)));
        assert!(!visible(&meta(Status::Rejected, false, None)));
    }
}
