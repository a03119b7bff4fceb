//! The scope service's limits: how long a grant's `state` lives, and how
//! long and how much it waits for and reads from an authorization server.

use std::time::Duration;

/// Limits of the scope service.
#[derive(Debug, Clone)]
pub struct ScopeConfig {
    /// How long a grant's `state` is accepted.
    pub state_ttl: Duration,
    /// Timeout of one request to an authorization server.
    pub http_timeout: Duration,
    /// Largest metadata or token response read.
    pub max_response_bytes: usize,
}

impl Default for ScopeConfig {
    fn default() -> Self {
        ScopeConfig {
            state_ttl: Duration::from_secs(600),
            http_timeout: Duration::from_secs(10),
            max_response_bytes: 256 * 1024,
        }
    }
}
