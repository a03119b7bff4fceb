//! `[egress]`: the operator's side of the egress policy: whether loopback
//! may be reached (development), the allow-list of the server's own
//! requests (JWKS documents of configured issuers), and how many HTTP
//! clients are kept.
//!
//! Tenants widen the policy for their own requests with `egress_allow` in
//! their policy; nothing here widens it for a tenant, and nothing else
//! turns loopback on: it is on when this section says so, or, when it says
//! nothing, in dev mode on a loopback listener (printed at start-up).

use anyhow::bail;
use pinfold_egress::{AllowList, EgressConfig, Rules};
use serde::{Deserialize, Serialize};

/// Egress settings.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EgressSettings {
    /// Whether outbound requests may reach loopback (`127.0.0.0/8`, `::1`,
    /// `localhost`). Unset: on only in dev mode on a loopback listener.
    pub allow_loopback: Option<bool>,
    /// Hosts, `*.suffix` patterns, IP addresses and CIDR blocks the
    /// server's own requests (issuers' JWKS documents) may reach besides
    /// public addresses. Tenants' requests are not affected.
    pub allow: Vec<String>,
    /// HTTP clients kept (one per distinct set of rules; default 256).
    pub max_clients: Option<usize>,
}

impl EgressSettings {
    /// Checks `[egress]`.
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        if let Err(e) = AllowList::parse(self.allow.iter().map(String::as_str)) {
            bail!("egress.allow: {e}");
        }
        if self.max_clients == Some(0) {
            bail!("egress.max_clients must be greater than 0");
        }
        Ok(())
    }

    /// Whether loopback is allowed, given dev mode and the listener.
    pub fn loopback(&self, dev_on_loopback: bool) -> bool {
        self.allow_loopback.unwrap_or(dev_on_loopback)
    }

    /// The rules of the server's own requests.
    pub fn server_rules(&self, loopback: bool) -> Rules {
        let allow = AllowList::parse(self.allow.iter().map(String::as_str)).unwrap_or_default();
        Rules::new(allow, loopback)
    }

    /// The egress path's configuration, with the upstream connect timeout
    /// of `[resolve]`.
    pub fn egress_config(&self, connect_timeout_ms: u64) -> EgressConfig {
        let d = EgressConfig::default();
        EgressConfig {
            connect_timeout: std::time::Duration::from_millis(connect_timeout_ms),
            max_clients: self.max_clients.unwrap_or(d.max_clients),
            ..d
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_on_only_when_said_or_in_dev_on_loopback() {
        let unset = EgressSettings::default();
        assert!(!unset.loopback(false));
        assert!(unset.loopback(true));
        let off = EgressSettings {
            allow_loopback: Some(false),
            ..EgressSettings::default()
        };
        assert!(!off.loopback(true));
        let on = EgressSettings {
            allow_loopback: Some(true),
            ..EgressSettings::default()
        };
        assert!(on.loopback(false));
        let bad = EgressSettings {
            allow: vec!["not a host".into()],
            ..EgressSettings::default()
        };
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .contains("egress.allow")
        );
    }
}
