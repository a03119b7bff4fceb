//! `[metrics]`: who may scrape `/metrics` (a bearer token, client address
//! ranges), their checks, and the access they describe
//! ([`crate::scrape::ScrapeAccess`]).

use std::fmt;
use std::path::PathBuf;

use anyhow::{Context as _, bail};
use serde::{Deserialize, Serialize};

use crate::scrape::{Cidr, ScrapeAccess, is_b64token};

/// Shortest scrape token accepted (characters).
const MIN_TOKEN_CHARS: usize = 16;
/// Longest scrape token accepted (characters).
const MAX_TOKEN_CHARS: usize = 4096;

/// `[metrics]`: who may scrape `/metrics`. Nothing set: anyone.
#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsSettings {
    /// The bearer token scrapers send (`Authorization: Bearer <token>`):
    /// 16 to 4096 characters of RFC 6750's `b64token` (`openssl rand -hex
    /// 32` makes one). A secret: never serialised, shown or logged. Usually
    /// from `PINFOLD_METRICS__TOKEN`; exclusive with `token_file`.
    #[serde(skip_serializing)]
    pub token: Option<String>,
    /// A file holding the token (a mounted Kubernetes Secret, say), read at
    /// startup; white space around it is ignored.
    pub token_file: Option<PathBuf>,
    /// Client addresses that may scrape, as CIDR ranges or single addresses
    /// (`["10.0.0.0/8", "::1"]`, or one comma-separated string in
    /// `PINFOLD_METRICS__ALLOW_FROM`). Empty: any address.
    #[serde(deserialize_with = "super::root::list_or_commas")]
    pub allow_from: Vec<String>,
}

impl fmt::Debug for MetricsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricsSettings")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("token_file", &self.token_file)
            .field("allow_from", &self.allow_from)
            .finish()
    }
}

/// Checks a token's shape; the error never shows the token.
fn check_token(token: &str, setting: &str) -> anyhow::Result<()> {
    let n = token.chars().count();
    if !(MIN_TOKEN_CHARS..=MAX_TOKEN_CHARS).contains(&n) {
        bail!(
            "{setting}: the scrape token must be {MIN_TOKEN_CHARS} to {MAX_TOKEN_CHARS} characters (it has {n})"
        );
    }
    if !is_b64token(token) {
        bail!(
            "{setting}: the scrape token may hold only A-Z a-z 0-9 - . _ ~ + / and trailing = (RFC 6750 b64token)"
        );
    }
    Ok(())
}

impl MetricsSettings {
    /// Checks `[metrics]` (the token file is read by [`Self::access`]).
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        if self.token.is_some() && self.token_file.is_some() {
            bail!("metrics: set token or token_file, not both");
        }
        if let Some(t) = &self.token {
            check_token(t, "metrics.token")?;
        }
        self.ranges()?;
        Ok(())
    }

    fn ranges(&self) -> anyhow::Result<Vec<Cidr>> {
        self.allow_from
            .iter()
            .enumerate()
            .map(|(i, r)| {
                Cidr::parse(r).map_err(|e| anyhow::anyhow!("metrics.allow_from[{i}]: {e}"))
            })
            .collect()
    }

    /// The access these settings describe, reading `token_file`.
    pub fn access(&self) -> anyhow::Result<ScrapeAccess> {
        self.validate()?;
        let from_file = match &self.token_file {
            Some(path) => {
                let text = std::fs::read_to_string(path).with_context(|| {
                    format!("metrics.token_file: cannot read {}", path.display())
                })?;
                let token = text.trim().to_owned();
                check_token(&token, "metrics.token_file")?;
                Some(token)
            }
            None => None,
        };
        let token = self.token.as_deref().or(from_file.as_deref());
        Ok(ScrapeAccess::new(token, self.ranges()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_ranges_are_checked_without_showing_the_token() {
        let ok = MetricsSettings {
            token: Some("a".repeat(32)),
            allow_from: vec!["10.0.0.0/8".into(), "::1".into()],
            ..Default::default()
        };
        let access = ok.access().unwrap();
        assert!(access.needs_token() && access.allow_from().len() == 2);
        assert!(MetricsSettings::default().access().unwrap().is_open());
        for (settings, want) in [
            (
                MetricsSettings {
                    token: Some("short-secret".into()),
                    ..Default::default()
                },
                "metrics.token: the scrape token must be 16",
            ),
            (
                MetricsSettings {
                    token: Some("has a space in the secret".into()),
                    ..Default::default()
                },
                "metrics.token: the scrape token may hold only",
            ),
            (
                MetricsSettings {
                    token: Some("a".repeat(32)),
                    token_file: Some("/nonexistent".into()),
                    ..Default::default()
                },
                "not both",
            ),
            (
                MetricsSettings {
                    allow_from: vec!["10.0.0.0/8".into(), "10.0.0.0/40".into()],
                    ..Default::default()
                },
                "metrics.allow_from[1]:",
            ),
            (
                MetricsSettings {
                    token_file: Some("/nonexistent/pinfold-metrics-token".into()),
                    ..Default::default()
                },
                "metrics.token_file: cannot read",
            ),
        ] {
            let e = format!("{:#}", settings.access().unwrap_err());
            assert!(e.contains(want), "{e}");
            assert!(!e.contains("secret"), "the token shows in {e}");
        }
        let shown = format!("{ok:?}");
        assert!(
            !shown.contains("aaaa") && shown.contains("<redacted>"),
            "{shown}"
        );
        assert!(
            !serde_json::to_string(&ok).unwrap().contains("aaaa"),
            "never serialised"
        );
    }

    #[test]
    fn the_token_file_is_read_and_trimmed() {
        let dir = tempfile_dir();
        let path = dir.join("token");
        std::fs::write(&path, "  0123456789abcdef0123456789abcdef\n").unwrap();
        let s = MetricsSettings {
            token_file: Some(path.clone()),
            ..Default::default()
        };
        let access = s.access().unwrap();
        let good = axum::http::HeaderValue::from_static("Bearer 0123456789abcdef0123456789abcdef");
        assert!(access.check(None, Some(&good)).is_ok());
        std::fs::write(&path, "\n").unwrap();
        let e = format!("{:#}", s.access().unwrap_err());
        assert!(
            e.contains("metrics.token_file: the scrape token must be"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempfile_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("pinfold-metrics-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
