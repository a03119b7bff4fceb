//! Identifiers and timestamps shared by every service.
//!
//! These are parse-don't-validate newtypes: once a [`TenantId`] exists it is
//! valid, so stores and handlers never re-check it.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A tenant identifier: `[a-z0-9][a-z0-9-]{1,62}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TenantId(String);

/// Why a tenant id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tenant id must match [a-z0-9][a-z0-9-]{{1,62}} (2 to 63 characters, lowercase letters, digits and '-', not starting with '-')"
)]
pub struct InvalidTenantId;

impl TenantId {
    /// Parses a tenant id.
    pub fn parse(s: &str) -> Result<Self, InvalidTenantId> {
        let b = s.as_bytes();
        let ok = (2..=63).contains(&b.len())
            && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
            && b[1..]
                .iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-');
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(InvalidTenantId)
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for TenantId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for TenantId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        TenantId::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A point in time, stored as milliseconds since the Unix epoch on both
/// database backends and shown as RFC 3339 UTC (`2026-11-21T16:40:22.123Z`).
///
/// One portable mapping (a 64-bit integer column) avoids the timestamp type
/// drift between SQLite and PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// From milliseconds since the epoch.
    pub const fn from_millis(ms: i64) -> Self {
        Self(ms)
    }

    /// Milliseconds since the epoch.
    pub const fn millis(self) -> i64 {
        self.0
    }

    /// Seconds since the epoch (rounded down).
    pub const fn seconds(self) -> i64 {
        self.0.div_euclid(1000)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.div_euclid(1000);
        let ms = self.0.rem_euclid(1000);
        let days = secs.div_euclid(86_400);
        let sod = secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        write!(
            f,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
            sod / 3600,
            (sod / 60) % 60,
            sod % 60
        )
    }
}

/// Howard Hinnant's days-to-civil conversion (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_ids() {
        for ok in ["ac", "acme", "acme-corp", "0a", &"a".repeat(63)] {
            assert!(TenantId::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "a",
            "-acme",
            "Acme",
            "acme_corp",
            "acme corp",
            &"a".repeat(64),
            "é1",
        ] {
            assert!(TenantId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn timestamps_render_as_rfc3339() {
        assert_eq!(
            Timestamp::from_millis(0).to_string(),
            "1970-01-01T00:00:00.000Z"
        );
        assert_eq!(
            Timestamp::from_millis(1_795_279_222_123).to_string(),
            "2026-11-21T16:40:22.123Z"
        );
        assert_eq!(
            Timestamp::from_millis(951_782_400_000).to_string(),
            "2000-02-29T00:00:00.000Z"
        );
        assert_eq!(
            Timestamp::from_millis(-1).to_string(),
            "1969-12-31T23:59:59.999Z"
        );
    }
}
