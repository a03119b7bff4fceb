//! The upstream side of the egress path: the reqwest client a connection
//! is made on comes from the server's one [`Egress`] under the session's
//! rules (so the address policy judges every address connected to), after
//! the URL itself is admitted (an IP literal is judged before anything is
//! sent; credentials go over plain http only where the allow-list names
//! the host); and the bound on every answer's size that connections
//! opened from it apply.

use std::sync::Arc;

use pinfold_egress::Egress;

use super::error::FetchError;
use super::target::UpstreamTarget;

/// The egress path, as upstream connections use it.
pub(crate) struct Pool {
    egress: Arc<Egress>,
    pub(super) max_response_bytes: usize,
}

impl Pool {
    pub(crate) fn new(egress: Arc<Egress>, max_response_bytes: usize) -> Self {
        Self {
            egress,
            max_response_bytes,
        }
    }

    /// The client for `target`, once its URL is admitted.
    pub(super) fn client(&self, target: &UpstreamTarget) -> Result<reqwest::Client, FetchError> {
        let refused = |e: pinfold_egress::EgressError| FetchError::Transport {
            detail: e.to_string(),
            retry_after: None,
        };
        let url = reqwest::Url::parse(&target.url)
            .map_err(|_| refused(pinfold_egress::EgressError::InvalidUrl))?;
        self.egress
            .admit(&target.rules, &url, !target.headers.is_empty())
            .map_err(refused)?;
        self.egress.client(&target.rules).map_err(refused)
    }
}
