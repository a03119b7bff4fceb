//! `[connections]`: what one client connection may hold (the header read
//! timeout, the most connections open at once) and their checks.

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// `[connections]`: what one client connection may hold.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConnectionSettings {
    /// Seconds a client has to send a request's complete header section
    /// (per request, also between requests on a kept-alive connection);
    /// later, the connection is closed.
    pub header_read_timeout_secs: u64,
    /// Most connections open at once; the listener stops accepting while
    /// this many are open.
    pub max_connections: usize,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        ConnectionSettings {
            header_read_timeout_secs: 10,
            max_connections: 10_000,
        }
    }
}

impl ConnectionSettings {
    /// Checks `[connections]`.
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        if self.header_read_timeout_secs == 0 {
            bail!("connections.header_read_timeout_secs must be greater than 0");
        }
        if self.max_connections == 0 {
            bail!("connections.max_connections must be greater than 0");
        }
        Ok(())
    }
}
