//! The reqwest clients, one per upstream origin (its connection pool): no
//! redirects, the configured connect timeout, `TCP_NODELAY`; and the bound
//! on every answer's size that connections opened from it apply.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use super::error::FetchError;
use super::target::origin;

/// The reqwest clients, one per upstream origin.
pub(crate) struct Pool {
    clients: Mutex<HashMap<String, reqwest::Client>>,
    connect_timeout: Duration,
    pub(super) max_response_bytes: usize,
}

impl Pool {
    pub(crate) fn new(connect_timeout: Duration, max_response_bytes: usize) -> Self {
        Self {
            clients: Mutex::new(HashMap::new()),
            connect_timeout,
            max_response_bytes,
        }
    }

    pub(super) fn client(&self, url: &str) -> Result<reqwest::Client, FetchError> {
        let origin = origin(url).ok_or_else(|| FetchError::Transport {
            detail: "invalid upstream url".into(),
            retry_after: None,
        })?;
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = clients.get(&origin) {
            return Ok(c.clone());
        }
        let c = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(self.connect_timeout)
            .pool_idle_timeout(Duration::from_secs(60))
            .tcp_nodelay(true)
            .build()
            .map_err(|e| FetchError::Transport {
                detail: format!("cannot build an HTTP client: {e}"),
                retry_after: None,
            })?;
        clients.insert(origin, c.clone());
        Ok(c)
    }
}
