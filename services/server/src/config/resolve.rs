//! `[resolve]`: the resolve cache's settings (session lifetimes, cache
//! size and each tenant's share of it, upstream timeouts and answer size,
//! determinism sampling) and their checks.

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// Resolve-cache settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResolveSettings {
    /// Session lifetime when a request names none, in seconds.
    pub default_session_ttl_secs: u64,
    /// Longest session lifetime a request may ask for, in seconds.
    pub max_session_ttl_secs: u64,
    /// Bytes of resolved answers this process caches (all tenants).
    pub cache_capacity_bytes: u64,
    /// Percentage of the cache one tenant may fill (1 to 100): a tenant
    /// over its share evicts its own entries, never another tenant's.
    pub cache_tenant_share_percent: u8,
    /// Total time for one upstream exchange (connect, initialize, resolve),
    /// in milliseconds.
    pub upstream_timeout_ms: u64,
    /// TCP connect timeout towards an upstream, in milliseconds.
    pub upstream_connect_timeout_ms: u64,
    /// Largest upstream answer read, in bytes: a JSON body, and each
    /// server-sent event of a streamed answer (default 1 MiB, at least
    /// 4 KiB). A larger one is a transport failure (fallback).
    pub upstream_max_response_bytes: u64,
    /// Fraction (0 to 1) of cache hits re-fetched from the upstream to
    /// check that it still answers the same (determinism sampling).
    pub recheck_rate: f64,
    /// Longest life of a cached answer whose upstream offers no way to
    /// announce a tool list change (no `tools.listChanged` capability, or
    /// no `subscriptions/listen` stream), in seconds (default 300).
    pub unwatched_entry_ttl_secs: u64,
    /// Bytes of prepared signature versions (worst cases and compiled
    /// input-schema validators) this process keeps (default 64 MiB).
    pub prepared_capacity_bytes: u64,
}

impl ResolveSettings {
    /// The bytes one tenant may hold.
    pub fn cache_tenant_share_bytes(&self) -> u64 {
        let share = u128::from(self.cache_capacity_bytes)
            * u128::from(self.cache_tenant_share_percent)
            / 100;
        u64::try_from(share).unwrap_or(u64::MAX)
    }
}

impl Default for ResolveSettings {
    fn default() -> Self {
        ResolveSettings {
            default_session_ttl_secs: 3600,
            max_session_ttl_secs: 86_400,
            cache_capacity_bytes: 256 * 1024 * 1024,
            cache_tenant_share_percent: 25,
            upstream_timeout_ms: 5_000,
            upstream_connect_timeout_ms: 2_000,
            upstream_max_response_bytes: 1024 * 1024,
            recheck_rate: 0.0,
            unwatched_entry_ttl_secs: 300,
            prepared_capacity_bytes: 64 * 1024 * 1024,
        }
    }
}

impl ResolveSettings {
    /// Checks `[resolve]`.
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        let r = self;
        if r.cache_capacity_bytes < 1024 * 1024 {
            bail!("resolve.cache_capacity_bytes must be at least 1 MiB");
        }
        if !(1..=100).contains(&r.cache_tenant_share_percent) {
            bail!("resolve.cache_tenant_share_percent must be between 1 and 100");
        }
        if r.upstream_timeout_ms == 0 || r.upstream_connect_timeout_ms == 0 {
            bail!(
                "resolve.upstream_timeout_ms and upstream_connect_timeout_ms must be greater than 0"
            );
        }
        if r.upstream_max_response_bytes < 4096 {
            bail!("resolve.upstream_max_response_bytes must be at least 4096");
        }
        if !(0.0..=1.0).contains(&r.recheck_rate) {
            bail!("resolve.recheck_rate must be between 0 and 1");
        }
        if r.unwatched_entry_ttl_secs == 0 {
            bail!("resolve.unwatched_entry_ttl_secs must be greater than 0");
        }
        if r.prepared_capacity_bytes < 1024 * 1024 {
            bail!("resolve.prepared_capacity_bytes must be at least 1 MiB");
        }
        if r.max_session_ttl_secs == 0 {
            bail!("resolve.max_session_ttl_secs must be greater than 0");
        }
        if r.default_session_ttl_secs == 0 || r.default_session_ttl_secs > r.max_session_ttl_secs {
            bail!(
                "resolve.default_session_ttl_secs must be between 1 and resolve.max_session_ttl_secs ({})",
                r.max_session_ttl_secs
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn bad_resolve_settings_are_named() {
        for (tweak, word) in [
            (
                (|r: &mut ResolveSettings| r.default_session_ttl_secs = 90_000) as fn(&mut _),
                "default_session_ttl_secs",
            ),
            (|r| r.max_session_ttl_secs = 0, "max_session_ttl_secs"),
            (
                |r| r.cache_tenant_share_percent = 0,
                "cache_tenant_share_percent",
            ),
            (
                |r| r.cache_tenant_share_percent = 101,
                "cache_tenant_share_percent",
            ),
            (|r| r.cache_capacity_bytes = 1000, "cache_capacity_bytes"),
            (|r| r.upstream_timeout_ms = 0, "upstream_timeout_ms"),
            (
                |r| r.upstream_max_response_bytes = 100,
                "upstream_max_response_bytes",
            ),
            (|r| r.recheck_rate = 1.5, "recheck_rate"),
            (
                |r| r.unwatched_entry_ttl_secs = 0,
                "unwatched_entry_ttl_secs",
            ),
            (
                |r| r.prepared_capacity_bytes = 10,
                "prepared_capacity_bytes",
            ),
        ] {
            let mut c = Config::default();
            tweak(&mut c.resolve);
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(word), "{word}: {e}");
        }
        let r = ResolveSettings::default();
        assert_eq!(r.cache_tenant_share_bytes(), 256 * 1024 * 1024 / 4);
    }
}
