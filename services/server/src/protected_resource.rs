//! Pinfold as an OAuth 2.0 protected resource (RFC 9728): what it says of
//! itself (its resource identifier and the authorization servers whose
//! tokens it accepts), where that metadata is, and the `resource_metadata`
//! every `401` challenge carries so MCP clients can find it.

use axum::http::{HeaderValue, header};
use axum::response::Response;

use crate::config::Config;

/// Pinfold as an OAuth 2.0 protected resource (RFC 9728): where its
/// metadata is, and which authorization servers issue its tokens. The MCP
/// authorization spec has clients discover it from the `resource_metadata`
/// of a `401` challenge.
#[derive(Debug, Clone, Default)]
pub struct ProtectedResource {
    /// The URL clients reach Pinfold at (`public_url`); when `None`, each
    /// request's `Host` names it (over `http`).
    pub public_url: Option<String>,
    /// Issuers of the tokens Pinfold accepts (the configured ones that are
    /// URLs).
    pub authorization_servers: Vec<String>,
    /// The same issuers with the tenants their tokens can act in (`None`:
    /// any tenant, the token names it).
    pub tenant_servers: Vec<(String, Option<Vec<pinfold_core::ids::TenantId>>)>,
}

/// The well-known path of RFC 9728 §3.
pub const PROTECTED_RESOURCE_PATH: &str = "/.well-known/oauth-protected-resource";

/// The route of a guard endpoint's metadata: the well-known path with the
/// endpoint's path appended (RFC 9728 §3.1).
pub const GUARD_METADATA_PATH: &str =
    "/.well-known/oauth-protected-resource/t/{tenant}/mcp/{*server}";

impl ProtectedResource {
    /// What `cfg` makes of Pinfold as a protected resource: its
    /// `public_url` (unset when empty) and, as authorization servers, the
    /// configured issuers that are `http(s)` URLs without credentials.
    pub fn from_config(cfg: &Config) -> ProtectedResource {
        let urls = || {
            cfg.auth
                .issuers
                .iter()
                .filter(|i| crate::url_policy::http_url(&i.issuer).is_ok())
        };
        ProtectedResource {
            public_url: (!cfg.public_url.is_empty()).then(|| cfg.public_url.clone()),
            authorization_servers: urls().map(|i| i.issuer.clone()).collect(),
            tenant_servers: urls()
                .map(|i| {
                    // No rules: the token names its own tenant (any).
                    let tenants = (!i.rules.is_empty()).then(|| {
                        i.rules
                            .iter()
                            .filter_map(|r| pinfold_core::ids::TenantId::parse(&r.tenant).ok())
                            .collect()
                    });
                    (i.issuer.clone(), tenants)
                })
                .collect(),
        }
    }

    /// The authorization servers whose tokens can act in `tenant`.
    pub fn authorization_servers_for(&self, tenant: &pinfold_core::ids::TenantId) -> Vec<String> {
        self.tenant_servers
            .iter()
            .filter(|(_, t)| t.as_ref().is_none_or(|t| t.contains(tenant)))
            .map(|(i, _)| i.clone())
            .collect()
    }

    /// The resource identifier: `public_url`, else `http://<Host>` (a Host
    /// with characters a host cannot have is not echoed).
    pub fn base(&self, host: Option<&HeaderValue>) -> String {
        if let Some(u) = &self.public_url {
            return u.trim_end_matches('/').to_owned();
        }
        let host = host
            .and_then(|h| h.to_str().ok())
            .filter(|h| {
                !h.is_empty()
                    && h.len() <= 255
                    && h.bytes().all(|b| {
                        b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']')
                    })
            })
            .unwrap_or("localhost");
        format!("http://{host}")
    }

    /// The metadata URL (what `resource_metadata` names).
    pub fn metadata_url(&self, host: Option<&HeaderValue>) -> String {
        format!("{}{PROTECTED_RESOURCE_PATH}", self.base(host))
    }
}

/// Adds `resource_metadata` (RFC 9728 §5.1) to every Bearer challenge of a
/// `401`, or a challenge carrying it when there is none.
pub(crate) fn add_resource_metadata(resp: &mut Response, url: &str) {
    let param = format!("resource_metadata=\"{url}\"");
    let existing: Vec<HeaderValue> = resp
        .headers_mut()
        .get_all(header::WWW_AUTHENTICATE)
        .iter()
        .cloned()
        .collect();
    let mut values = Vec::with_capacity(existing.len().max(1));
    for v in &existing {
        let text = v.to_str().unwrap_or("");
        if text.starts_with("Bearer") && !text.contains("resource_metadata=") {
            let joined = if text.trim() == "Bearer" {
                format!("Bearer {param}")
            } else {
                format!("{text}, {param}")
            };
            values.push(HeaderValue::from_str(&joined).unwrap_or_else(|_| v.clone()));
        } else {
            values.push(v.clone());
        }
    }
    if existing.is_empty()
        && let Ok(v) = HeaderValue::from_str(&format!("Bearer {param}"))
    {
        values.push(v);
    }
    resp.headers_mut().remove(header::WWW_AUTHENTICATE);
    for v in values {
        resp.headers_mut().append(header::WWW_AUTHENTICATE, v);
    }
}

/// The RFC 9728 metadata of one guard endpoint, `/t/{tenant}/mcp/{server}`:
/// found at the well-known path with the endpoint's path appended (§3.1),
/// it names the endpoint as the resource and, as authorization servers, the
/// issuers whose tokens can act in the tenant, so an MCP client that is
/// refused with a `401` finds where to sign in. `None` for a tenant id that
/// cannot be one.
pub fn guard_metadata(
    pr: &ProtectedResource,
    host: Option<&HeaderValue>,
    tenant: &str,
    server: &str,
) -> Option<serde_json::Value> {
    let t = pinfold_core::ids::TenantId::parse(tenant).ok()?;
    let base = pr.base(host);
    let mut doc = serde_json::json!({
        "resource": format!("{base}/t/{tenant}/mcp/{server}"),
        "bearer_methods_supported": ["header"],
        "resource_name": format!("Pinfold guard for {server}"),
        "resource_documentation": format!("{base}/docs"),
    });
    let servers = pr.authorization_servers_for(&t);
    if !servers.is_empty() {
        doc["authorization_servers"] = serde_json::json!(servers);
    }
    Some(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pinfold_core::ids::TenantId;

    #[test]
    fn a_guard_endpoint_names_only_the_issuers_that_can_act_in_its_tenant() {
        let t = |s: &str| TenantId::parse(s).unwrap();
        let pr = ProtectedResource {
            public_url: Some("https://pinfold.example/".into()),
            authorization_servers: vec![],
            tenant_servers: vec![
                ("https://idp.example".into(), None),
                (
                    "https://token.actions.example".into(),
                    Some(vec![t("acme")]),
                ),
            ],
        };
        assert_eq!(
            pr.authorization_servers_for(&t("acme")),
            ["https://idp.example", "https://token.actions.example"]
        );
        assert_eq!(
            pr.authorization_servers_for(&t("beta")),
            ["https://idp.example"]
        );
        let doc = guard_metadata(&pr, None, "beta", "io.acme/notes").unwrap();
        assert_eq!(
            doc["resource"],
            "https://pinfold.example/t/beta/mcp/io.acme/notes"
        );
        assert_eq!(
            doc["authorization_servers"],
            serde_json::json!(["https://idp.example"])
        );
        assert!(guard_metadata(&pr, None, "Not A Tenant!", "x/y").is_none());
    }
}
