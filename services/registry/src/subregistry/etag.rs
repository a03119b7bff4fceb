//! The strong `ETag`s of the subregistry's answers, built from what an
//! answer is made of, so that a conditional request is answered without
//! rendering it.

use pinfold_core::Mode;

use crate::index::record_etag;
use crate::policy::EnforcementModes;
use crate::subregistry::listing::Entry;

/// A list's strong `ETag`: a hash of what its body is made of — each
/// entry's server, version, record `ETag`, latest flag and mode, and where
/// the next page starts — so that a conditional request is answered
/// without rendering the page. (The documents are covered by their
/// digests, inside the record `ETag`s.)
pub fn list_etag(
    entries: &[Entry],
    modes: &EnforcementModes,
    next: Option<&(String, String)>,
) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(b"v0.1 list\n");
    for e in entries {
        h.update(e.key.as_bytes());
        h.update(b"\n");
        h.update(e.server.as_bytes());
        h.update(b"\n");
        h.update(record_etag(&e.meta).as_bytes());
        h.update(if e.is_latest {
            "\nlatest\n"
        } else {
            "\nolder\n"
        });
        h.update(modes.mode_for(&e.key).as_str().as_bytes());
        h.update(b"\n");
    }
    if let Some((k, v)) = next {
        h.update(b"next\n");
        h.update(k.as_bytes());
        h.update(b"\n");
        h.update(v.as_bytes());
    }
    format!("\"{}\"", hex::encode(&h.finalize()[..20]))
}

/// The strong `ETag` of one version's response, built on its record
/// `ETag` ([`crate::index::record_etag`]: digest and status revision) plus
/// what else the response shows that can change: whether it is the latest,
/// and the enforcement mode.
pub fn entry_etag(record_etag: &str, is_latest: bool, mode: Mode) -> String {
    format!(
        "\"{}.{}.{}\"",
        record_etag.trim_matches('"'),
        if is_latest { "latest" } else { "older" },
        mode.as_str()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Status, VersionMeta};
    use crate::subregistry::fixtures::meta;

    #[test]
    fn etags_change_with_everything_the_response_shows() {
        let m = meta(Status::Approved, true, None);
        let tag = |m: &VersionMeta, latest, mode| entry_etag(&record_etag(m), latest, mode);
        let base = tag(&m, true, Mode::Strict);
        assert_eq!(base, format!("\"{}.r2.latest.strict\"", "b".repeat(64)));
        assert_ne!(base, tag(&m, false, Mode::Strict));
        assert_ne!(base, tag(&m, true, Mode::Permissive));
        let mut later = m.clone();
        later.status.revision = 3;
        assert_ne!(base, tag(&later, true, Mode::Strict));
        let mut other = m.clone();
        other.digest = format!("sha256:{}", "c".repeat(64));
        assert_ne!(base, tag(&other, true, Mode::Strict));
    }

    #[test]
    fn list_etags_change_with_every_entry_and_the_next_page() {
        let e = |v: &str, latest: bool| Entry {
            key: "io.github.a/b".into(),
            server: "io.github.a/b".into(),
            meta: VersionMeta {
                version: v.into(),
                ..meta(Status::Approved, true, None)
            },
            is_latest: latest,
        };
        let strict = EnforcementModes {
            default: Mode::Strict,
            overrides: vec![],
        };
        let base = list_etag(&[e("1.0.0", true)], &strict, None);
        assert_eq!(base, list_etag(&[e("1.0.0", true)], &strict, None));
        assert_ne!(base, list_etag(&[e("1.0.0", false)], &strict, None));
        assert_ne!(
            base,
            list_etag(&[e("1.0.0", true), e("0.9.0", false)], &strict, None)
        );
        let advisory = EnforcementModes {
            default: Mode::Strict,
            overrides: vec![("IO.GITHUB.A/B".into(), Mode::Advisory)],
        };
        assert_ne!(base, list_etag(&[e("1.0.0", true)], &advisory, None));
        let next = ("io.github.a/b".to_owned(), "1.0.0".to_owned());
        assert_ne!(base, list_etag(&[e("1.0.0", true)], &strict, Some(&next)));
        let mut revised = e("1.0.0", true);
        revised.meta.status.revision += 1;
        assert_ne!(base, list_etag(&[revised], &strict, None));
        assert_ne!(base, list_etag(&[], &strict, None));
    }
}
