//! The clients: one reqwest client per set of [`Rules`], a bounded number
//! of them (the least recently used goes), each resolving names through
//! the policy ([`crate::resolver`]), following no redirect, using no proxy
//! from the environment, with the configured connect and total timeouts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use url::Url;

use crate::error::EgressError;
use crate::policy::{AllowList, Rules};
use crate::resolver::PolicyResolver;

/// How the egress path behaves (the operator's settings).
#[derive(Debug, Clone)]
pub struct EgressConfig {
    /// Longest time to set up a connection (name, TCP, TLS).
    pub connect_timeout: Duration,
    /// Longest time of a whole exchange made through [`Egress::request`]
    /// (a caller that streams, such as an MCP notification stream, builds
    /// on [`Egress::client`] and bounds its own calls).
    pub total_timeout: Duration,
    /// How many clients (one per distinct set of rules) are kept.
    pub max_clients: usize,
    /// How long an idle pooled connection is kept.
    pub idle_timeout: Duration,
    /// Whether loopback may be reached (the operator's development
    /// setting; nothing a tenant writes turns it on).
    pub allow_loopback: bool,
}

impl Default for EgressConfig {
    fn default() -> Self {
        EgressConfig {
            connect_timeout: Duration::from_secs(2),
            total_timeout: Duration::from_secs(10),
            max_clients: 256,
            idle_timeout: Duration::from_secs(60),
            allow_loopback: false,
        }
    }
}

/// The one way out: every outbound HTTP request of the server is made on a
/// client from here, under the [`Rules`] of whoever asked for it.
pub struct Egress {
    config: EgressConfig,
    clients: Mutex<Clients>,
}

impl std::fmt::Debug for Egress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Egress")
            .field("config", &self.config)
            .field("clients", &self.clients())
            .finish()
    }
}

#[derive(Default)]
struct Clients {
    by_rules: HashMap<Rules, (reqwest::Client, u64)>,
    tick: u64,
}

impl Egress {
    /// An egress path with `config`.
    pub fn new(config: EgressConfig) -> Arc<Self> {
        Arc::new(Egress {
            config,
            clients: Mutex::new(Clients::default()),
        })
    }

    /// The rules of a request under `allow` (a tenant's allow-list, or the
    /// operator's for the server's own requests), with loopback as the
    /// operator set it.
    pub fn rules(&self, allow: AllowList) -> Rules {
        Rules::new(allow, self.config.allow_loopback)
    }

    /// The configuration.
    pub fn config(&self) -> &EgressConfig {
        &self.config
    }

    /// How many clients are kept now.
    pub fn clients(&self) -> usize {
        self.lock().by_rules.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Clients> {
        self.clients.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The client of `rules` (made on first use; the least recently used
    /// one goes when there are more than `max_clients`). Requests on it
    /// connect only to addresses `rules` allow when the URL names a host;
    /// an IP-literal URL must be passed through [`Egress::admit`] first,
    /// since no name is resolved for it.
    pub fn client(&self, rules: &Rules) -> Result<reqwest::Client, EgressError> {
        let mut c = self.lock();
        c.tick += 1;
        let tick = c.tick;
        if let Some((client, used)) = c.by_rules.get_mut(rules) {
            *used = tick;
            return Ok(client.clone());
        }
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(self.config.connect_timeout)
            .pool_idle_timeout(self.config.idle_timeout)
            .tcp_nodelay(true)
            .dns_resolver(Arc::new(PolicyResolver::new(rules.clone())))
            .build()
            .map_err(|e| EgressError::Client(e.to_string()))?;
        if c.by_rules.len() >= self.config.max_clients.max(1)
            && let Some(oldest) = c
                .by_rules
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(r, _)| r.clone())
        {
            c.by_rules.remove(&oldest);
        }
        c.by_rules.insert(rules.clone(), (client.clone(), tick));
        Ok(client)
    }

    /// Checks a URL before anything is sent to it, without resolving a
    /// name: [`Egress::admit_form`], and an IP literal (or `localhost`)
    /// the rules allow.
    pub fn admit(&self, rules: &Rules, url: &Url, credentials: bool) -> Result<(), EgressError> {
        self.admit_form(rules, url, credentials)?;
        let host = url.host().ok_or(EgressError::InvalidUrl)?;
        if !rules.allows_host(&host) {
            return Err(EgressError::NotAllowed);
        }
        Ok(())
    }

    /// The form of a URL alone, whatever address it names: an absolute
    /// `http(s)` URL with a host and no user info; and, when `credentials`
    /// will be sent, `https` or a host the rules name explicitly. What a
    /// caller may be told at once without learning anything of the network.
    pub fn admit_form(
        &self,
        rules: &Rules,
        url: &Url,
        credentials: bool,
    ) -> Result<(), EgressError> {
        if !matches!(url.scheme(), "http" | "https")
            || !url.username().is_empty()
            || url.password().is_some()
        {
            return Err(EgressError::InvalidUrl);
        }
        let host = url.host().ok_or(EgressError::InvalidUrl)?;
        if credentials && url.scheme() == "http" && !rules.plain_credentials_ok(&host) {
            return Err(EgressError::PlainCredentials);
        }
        Ok(())
    }

    /// [`Egress::admit`], then the name resolved and judged as a connection
    /// would judge it: refused when no address it resolves to is allowed.
    /// A name that does not resolve passes (it may resolve later; the
    /// connection is judged again then).
    pub async fn check(
        &self,
        rules: &Rules,
        url: &Url,
        credentials: bool,
    ) -> Result<(), EgressError> {
        self.admit(rules, url, credentials)?;
        let Some(url::Host::Domain(name)) = url.host() else {
            return Ok(());
        };
        match crate::resolver::allowed_addrs(rules, name).await {
            Err(EgressError::NotAllowed) => Err(EgressError::NotAllowed),
            _ => Ok(()),
        }
    }

    /// A request builder for `method` on `url` under `rules`, after
    /// [`Egress::admit`], with the total timeout set.
    pub fn request(
        &self,
        rules: &Rules,
        method: reqwest::Method,
        url: Url,
        credentials: bool,
    ) -> Result<reqwest::RequestBuilder, EgressError> {
        self.admit(rules, &url, credentials)?;
        Ok(self
            .client(rules)?
            .request(method, url)
            .timeout(self.config.total_timeout))
    }

    /// Sends a request built by [`Egress::request`]: a redirect answer is
    /// an error (never followed: a credential would travel with it), and a
    /// failure reads as "not allowed" or "unreachable" only.
    pub async fn send(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, EgressError> {
        let resp = req.send().await.map_err(|e| EgressError::of(&e))?;
        if resp.status().is_redirection() {
            return Err(EgressError::Redirect(resp.status().as_u16()));
        }
        Ok(resp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(list: &[&str], loopback: bool) -> Rules {
        Rules::new(AllowList::parse(list.iter().copied()).unwrap(), loopback)
    }

    #[test]
    fn clients_are_bounded_and_the_least_recently_used_goes() {
        let e = Egress::new(EgressConfig {
            max_clients: 2,
            ..EgressConfig::default()
        });
        let a = rules(&["a.example"], false);
        let b = rules(&["b.example"], false);
        let c = rules(&["c.example"], false);
        e.client(&a).unwrap();
        e.client(&b).unwrap();
        e.client(&a).unwrap(); // a is now the most recent
        e.client(&c).unwrap(); // b goes
        assert_eq!(e.clients(), 2);
        let kept: Vec<Rules> = e.lock().by_rules.keys().cloned().collect();
        assert!(kept.contains(&a) && kept.contains(&c) && !kept.contains(&b));
    }

    #[test]
    fn admission_judges_the_url_as_written() {
        let e = Egress::new(EgressConfig::default());
        let strict = rules(&[], false);
        let u = |s: &str| Url::parse(s).unwrap();
        assert_eq!(
            e.admit(&strict, &u("http://127.0.0.1:1/"), false),
            Err(EgressError::NotAllowed)
        );
        assert_eq!(
            e.admit(&strict, &u("https://u:p@example.com/"), false),
            Err(EgressError::InvalidUrl)
        );
        assert_eq!(
            e.admit(&strict, &u("ftp://example.com/"), false),
            Err(EgressError::InvalidUrl)
        );
        assert_eq!(
            e.admit(&strict, &u("http://example.com/"), true),
            Err(EgressError::PlainCredentials)
        );
        assert_eq!(e.admit(&strict, &u("https://example.com/"), true), Ok(()));
        assert_eq!(e.admit(&strict, &u("http://example.com/"), false), Ok(()));
    }

    #[tokio::test]
    async fn names_are_judged_by_what_they_resolve_to() {
        let e = Egress::new(EgressConfig::default());
        let u = Url::parse("http://localhost:9/").unwrap();
        assert_eq!(
            e.check(&rules(&[], false), &u, false).await,
            Err(EgressError::NotAllowed)
        );
        assert_eq!(e.check(&rules(&[], true), &u, false).await, Ok(()));
        assert_eq!(
            e.check(&rules(&["localhost"], false), &u, false).await,
            Ok(())
        );
    }
}
