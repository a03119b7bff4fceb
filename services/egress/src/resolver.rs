//! Name resolution under the policy: a name is resolved once, the
//! addresses the [`Rules`] refuse are dropped, and the connection is made
//! only to what is left. There is no second lookup between judging and
//! connecting, so a name that answers a public address to the check and a
//! private one to the connection (DNS rebinding) gains nothing: the
//! addresses judged are the addresses connected to.

use std::net::SocketAddr;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::error::{EgressError, NotAllowed};
use crate::policy::Rules;

/// The resolver of one client: the system resolver, filtered by `rules`.
pub(crate) struct PolicyResolver {
    rules: Rules,
}

impl PolicyResolver {
    pub(crate) fn new(rules: Rules) -> Self {
        PolicyResolver { rules }
    }
}

impl Resolve for PolicyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let rules = self.rules.clone();
        Box::pin(async move {
            match allowed_addrs(&rules, name.as_str()).await {
                Ok(addrs) => Ok(Box::new(addrs.into_iter()) as Addrs),
                Err(EgressError::NotAllowed) => Err(Box::new(NotAllowed) as _),
                Err(_) => Err("the name does not resolve".into()),
            }
        })
    }
}

/// The addresses of `name` a connection under `rules` may use (the port is
/// the caller's to set). `NotAllowed` when the name resolves only to
/// refused addresses (or is `localhost` and loopback is not allowed);
/// `Unreachable` when it does not resolve.
pub(crate) async fn allowed_addrs(
    rules: &Rules,
    name: &str,
) -> Result<Vec<SocketAddr>, EgressError> {
    let host = url::Host::Domain(name);
    if !rules.allows_host(&host) {
        return Err(EgressError::NotAllowed);
    }
    let named = rules.names(name);
    let all = tokio::net::lookup_host((name, 0))
        .await
        .map_err(|_| EgressError::Unreachable)?;
    let mut any = false;
    let ok: Vec<SocketAddr> = all
        .inspect(|_| any = true)
        .filter(|a| named || rules.allows_ip(a.ip()))
        .collect();
    if ok.is_empty() {
        return Err(if any {
            EgressError::NotAllowed
        } else {
            EgressError::Unreachable
        });
    }
    Ok(ok)
}
