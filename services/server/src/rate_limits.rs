//! Which rate-limit class each tenant route belongs to.
//!
//! The limiter itself is `pinfold_http::ratelimit`; the edge looks the
//! matched route up here and hands `TenantScope` the class to charge. The
//! table names every tenant route explicitly (a test fails when the OpenAPI
//! document lists one that is not here), so a new route is classified on
//! purpose, never by accident:
//!
//! | class | routes |
//! | --- | --- |
//! | `publish` | `PUT .../servers/{server}/versions/{version}`, `POST .../import/server-json` |
//! | `resolve` | every `.../sessions` route (open, list, read, close, resolve, batch) |
//! | `plan` | `POST .../scopes/plan` |
//! | `grants` | `GET`/`POST .../grants`, `POST .../grants/{grant}/exchange`, `GET`/`PUT .../providers/{provider}` |
//! | `reads` | every other tenant route: reads, the `/t/{tenant}/v0.1` subregistry, verify, and the light writes (review, status, policy, guard routes) |
//! | `console` | the review console's pages and forms of a signed-in session under `/console/t/{tenant}` (queue, version, review, status, audit, ledger, sign-out), charged by the console once the session is admitted |
//! | `guard` | the guard's MCP endpoint `/t/{tenant}/mcp/{server}` (`POST`, `GET`, `DELETE`), charged by the endpoint once the caller is admitted, on the routed and the fast path alike |
//!
//! Routes without a tenant (`POST /v1/tenants`, the operational routes)
//! are not limited, nor are the console's sign-in routes (its tenant page,
//! the sign-in forms, the provider's callback): no caller is known yet, and
//! a tenant bucket charged by anonymous requests would let anyone lock a
//! tenant's reviewers out.

use axum::http::Method;
use pinfold_http::ratelimit::RouteClass;

/// The class of a route, by method and route template; `None` for a route
/// no tenant is admitted to.
pub fn classify(method: &Method, template: &str) -> Option<RouteClass> {
    use RouteClass::{Grants, Plan, Publish, Reads, Resolve};
    const T: &str = "/v1/tenants/{tenant}";
    if let Some(rest) = template.strip_prefix("/console/t/{tenant}") {
        return console(method, rest);
    }
    if template == pinfold_guard::endpoint::PATH {
        return matches!(method.as_str(), "POST" | "GET" | "DELETE").then_some(RouteClass::Guard);
    }
    let rest = template.strip_prefix(T);
    let Some(rest) = rest else {
        return match template {
            "/t/{tenant}/v0.1/servers"
            | "/t/{tenant}/v0.1/servers/{serverName}/versions"
            | "/t/{tenant}/v0.1/servers/{serverName}/versions/{version}" => Some(Reads),
            _ => None,
        };
    };
    let m = method.as_str();
    let class = match (m, rest) {
        ("PUT", "/servers/{server}/versions/{version}") | ("POST", "/import/server-json") => {
            Publish
        }
        ("GET" | "POST", "/sessions")
        | ("GET" | "DELETE", "/sessions/{id}")
        | ("POST", "/sessions/{id}/resolve" | "/sessions/{id}/resolve/batch") => Resolve,
        ("POST", "/scopes/plan") => Plan,
        ("GET" | "POST", "/grants")
        | ("POST", "/grants/{grant}/exchange")
        | ("GET" | "PUT", "/providers/{provider}") => Grants,
        ("GET", "" | "/audit" | "/jwks.json" | "/servers" | "/servers/{server}")
        | ("GET" | "PUT", "/policy")
        | ("GET" | "PUT" | "DELETE", "/servers/{server}/guard")
        | (
            "GET",
            "/servers/{server}/diff"
            | "/servers/{server}/versions/{version}"
            | "/servers/{server}/versions/{version}/attestation"
            | "/servers/{server}/versions/{version}/card"
            | "/servers/{server}/versions/{version}/scopes"
            | "/servers/{server}/versions/{version}/signature"
            | "/servers/{server}/versions/{version}/tools",
        )
        | (
            "POST",
            "/servers/{server}/versions/{version}/review"
            | "/servers/{server}/versions/{version}/status"
            | "/servers/{server}/versions/{version}/verify",
        ) => Reads,
        // A HEAD is charged as the GET it mirrors.
        ("HEAD", _) => return classify(&Method::GET, template),
        _ => return None,
    };
    Some(class)
}

/// The console's routes of a signed-in session (`rest` follows
/// `/console/t/{tenant}`).
fn console(method: &Method, rest: &str) -> Option<RouteClass> {
    const V: &str = "/servers/{server}/versions/{version}";
    let page = matches!(rest, "/queue" | "/audit" | "/ledger" | V);
    let form = rest == "/sign-out"
        || rest
            .strip_prefix(V)
            .is_some_and(|r| matches!(r, "/review" | "/status"));
    match method.as_str() {
        "GET" | "HEAD" if page => Some(RouteClass::Console),
        "POST" if form => Some(RouteClass::Console),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_consoles_session_routes_are_console_and_its_sign_in_is_not_limited() {
        let t = "/console/t/{tenant}";
        let v = format!("{t}/servers/{{server}}/versions/{{version}}");
        for (m, path) in [
            (Method::GET, format!("{t}/queue")),
            (Method::GET, format!("{t}/audit")),
            (Method::GET, format!("{t}/ledger")),
            (Method::GET, v.clone()),
            (Method::HEAD, v.clone()),
            (Method::POST, format!("{v}/review")),
            (Method::POST, format!("{v}/status")),
            (Method::POST, format!("{t}/sign-out")),
        ] {
            assert_eq!(classify(&m, &path), Some(RouteClass::Console), "{m} {path}");
        }
        for (m, path) in [
            (Method::GET, t.to_owned()),
            (Method::GET, format!("{t}/sign-in")),
            (Method::POST, format!("{t}/sign-in/dev")),
            (Method::POST, format!("{t}/sign-in/oidc")),
            (Method::GET, "/console/callback".to_owned()),
            (Method::GET, "/console".to_owned()),
            (Method::GET, "/console/static/console.css".to_owned()),
        ] {
            assert_eq!(classify(&m, &path), None, "{m} {path}");
        }
    }

    #[test]
    fn the_guard_endpoint_is_guard_for_each_method_it_serves() {
        let path = pinfold_guard::endpoint::PATH;
        for m in [Method::POST, Method::GET, Method::DELETE] {
            assert_eq!(classify(&m, path), Some(RouteClass::Guard), "{m}");
        }
        assert_eq!(classify(&Method::PUT, path), None);
        // The route resource that configures it is an API read-or-write.
        assert_eq!(
            classify(&Method::PUT, "/v1/tenants/{tenant}/servers/{server}/guard"),
            Some(RouteClass::Reads)
        );
    }

    #[test]
    fn every_tenant_operation_is_classified_and_no_other() {
        let doc = serde_json::to_value(crate::app::openapi()).unwrap();
        let mut seen = 0;
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, _) in item.as_object().unwrap() {
                let Ok(m) = method.to_ascii_uppercase().parse::<Method>() else {
                    continue;
                };
                if !matches!(m, Method::GET | Method::PUT | Method::POST | Method::DELETE) {
                    continue;
                }
                let class = classify(&m, path);
                if path.contains("{tenant}") {
                    assert!(class.is_some(), "{method} {path} has no rate-limit class");
                    seen += 1;
                } else {
                    assert!(class.is_none(), "{method} {path} has no tenant");
                }
            }
        }
        assert!(seen > 30, "{seen} tenant operations");
        assert_eq!(
            classify(
                &Method::PUT,
                "/v1/tenants/{tenant}/servers/{server}/versions/{version}"
            ),
            Some(RouteClass::Publish)
        );
        assert_eq!(
            classify(&Method::POST, "/v1/tenants/{tenant}/sessions/{id}/resolve"),
            Some(RouteClass::Resolve)
        );
        assert_eq!(
            classify(&Method::POST, "/v1/tenants/{tenant}/scopes/plan"),
            Some(RouteClass::Plan)
        );
        assert_eq!(
            classify(
                &Method::POST,
                "/v1/tenants/{tenant}/grants/{grant}/exchange"
            ),
            Some(RouteClass::Grants)
        );
        assert_eq!(
            classify(&Method::HEAD, "/v1/tenants/{tenant}/servers"),
            Some(RouteClass::Reads)
        );
    }
}
