//! The services one `pinfold serve` process can run (`--services`).
//!
//! Every process serves the operational routes (`/healthz`, `/readyz`,
//! `/metrics`, `/docs`, `/openapi.json`); `--services` chooses which API
//! routers are mounted next to them, so one deployment can run everything
//! and a larger one can scale each role on its own behind a path-routing
//! proxy. All roles share the database; none keeps state another needs.
//! The review console (`/console`) is mounted with `registry`.

use std::fmt;

/// One service: a family of API routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Service {
    /// Tenants, policies and the audit log: `/v1/tenants`,
    /// `/v1/tenants/{tenant}`, `.../policy`, `.../audit`.
    Tenancy,
    /// Capability signatures: `/v1/tenants/{tenant}/servers/...`,
    /// `.../import/...`, `.../jwks.json`.
    Registry,
    /// Sessions and the resolve cache: `/v1/tenants/{tenant}/sessions/...`.
    Resolve,
    /// Provider profiles, plans and grants: `/v1/tenants/{tenant}/providers/...`,
    /// `.../plans`, `.../grants/...`.
    Scope,
    /// Guard routes: `/v1/tenants/{tenant}/servers/{server}/guard`.
    Guard,
}

impl Service {
    /// Every service, in the order they are listed and mounted.
    pub const ALL: [Service; 5] = [
        Service::Tenancy,
        Service::Registry,
        Service::Resolve,
        Service::Scope,
        Service::Guard,
    ];

    /// The name `--services` and the configuration use.
    pub fn name(self) -> &'static str {
        match self {
            Service::Tenancy => "tenancy",
            Service::Registry => "registry",
            Service::Resolve => "resolve",
            Service::Scope => "scope",
            Service::Guard => "guard",
        }
    }

    /// The service called `name` (exact, lower case).
    pub fn parse(name: &str) -> Option<Service> {
        Service::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The known names, comma-separated (for messages).
    pub fn known() -> String {
        Service::ALL.map(Service::name).join(", ")
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses a list of service names (surrounding spaces ignored) into a
/// sorted list without duplicates; the error names the first unknown one.
/// An empty list is an error: a process serving no API is a mistake.
pub fn parse_list<S: AsRef<str>>(names: &[S]) -> Result<Vec<Service>, String> {
    let mut out = Vec::with_capacity(names.len());
    for n in names {
        let n = n.as_ref().trim();
        match Service::parse(n) {
            Some(s) => out.push(s),
            None => {
                return Err(format!(
                    "unknown service {n:?} (known: {})",
                    Service::known()
                ));
            }
        }
    }
    out.sort();
    out.dedup();
    if out.is_empty() {
        return Err(format!("name at least one of {}", Service::known()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_lists_are_normalised() {
        for s in Service::ALL {
            assert_eq!(Service::parse(s.name()), Some(s));
        }
        assert_eq!(
            parse_list(&["scope", " registry", "scope"]).unwrap(),
            vec![Service::Registry, Service::Scope]
        );
        assert!(
            parse_list(&["Registry"])
                .unwrap_err()
                .contains("\"Registry\"")
        );
        assert!(
            parse_list::<&str>(&[])
                .unwrap_err()
                .contains("at least one")
        );
    }
}
