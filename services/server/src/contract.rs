//! The statuses every operation shares, added to the OpenAPI document so
//! that it lists every status an operation can answer, not only the ones
//! its handler decides.
//!
//! Handlers document what is theirs (a `409` on a conflicting publish, a
//! `410` on an ended session). What comes from the shared edge is the same
//! everywhere and is added here, once, from what the operation *is*:
//!
//! | when the operation … | it can also answer |
//! | --- | --- |
//! | needs a token | `401` (with `WWW-Authenticate`), `403` (a missing role) |
//! | has `{tenant}` in its path | `404` (unknown tenant, or another tenant's) |
//! | takes a body | `400` (malformed JSON), `413` (over the body limit), `415` (not JSON), `422` (a valid JSON value the operation refuses) |
//! | takes query parameters | `400` (a parameter that does not parse) |
//! | needs a token | `429` (`rate_limited`: a rate limit, with `Retry-After`) |
//! | reads or writes the database | `503` (database unavailable, with `Retry-After`) |
//!
//! A status the handler already documents keeps its own description and
//! body (the subregistry's `404`s, for instance, are the official
//! `{"error": ...}`, not problem+json).

use utoipa::openapi::path::{Operation, Parameter, ParameterIn};
use utoipa::openapi::{
    ContentBuilder, HeaderBuilder, OpenApi, Ref, RefOr, ResponseBuilder, Schema, Type,
    schema::ObjectBuilder,
};

/// Operations that never touch the database (no `503`).
const NO_DATABASE: &[&str] = &["healthz", "metrics", "protected_resource_metadata"];

/// Adds the shared statuses to every operation of `doc`.
pub fn complete(doc: &mut OpenApi) {
    for item in doc.paths.paths.values_mut() {
        let path_has_tenant = item
            .parameters
            .iter()
            .flatten()
            .filter_map(inline)
            .any(|p| p.name == "tenant" && p.parameter_in == ParameterIn::Path);
        for op in operations(item) {
            complete_operation(op, path_has_tenant);
        }
    }
}

fn operations(item: &mut utoipa::openapi::PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        item.get.as_mut(),
        item.put.as_mut(),
        item.post.as_mut(),
        item.delete.as_mut(),
        item.options.as_mut(),
        item.head.as_mut(),
        item.patch.as_mut(),
        item.trace.as_mut(),
    ]
    .into_iter()
    .flatten()
}

fn inline(p: &RefOr<Parameter>) -> Option<&Parameter> {
    match p {
        RefOr::T(p) => Some(p),
        RefOr::Ref(_) => None,
    }
}

fn complete_operation(op: &mut Operation, path_has_tenant: bool) {
    let id = op.operation_id.clone().unwrap_or_default();
    let secured = op.security.as_ref().is_some_and(|s| !s.is_empty());
    let params = op.parameters.as_deref().unwrap_or_default();
    let has_tenant = path_has_tenant
        || params
            .iter()
            .filter_map(inline)
            .any(|p| p.name == "tenant" && p.parameter_in == ParameterIn::Path);
    let has_query = params
        .iter()
        .filter_map(inline)
        .any(|p| p.parameter_in == ParameterIn::Query);
    let has_body = op.request_body.is_some();

    let mut add = |status: &str, description: &str, header: Option<Extra>| {
        if op.responses.responses.contains_key(status) {
            return;
        }
        op.responses
            .responses
            .insert(status.to_owned(), RefOr::T(problem(description, header)));
    };
    if has_body || has_query {
        add(
            "400",
            if has_body {
                "Malformed JSON, or a query parameter that does not parse"
            } else {
                "A query parameter that does not parse"
            },
            None,
        );
    }
    if secured {
        add(
            "401",
            "Missing, malformed, expired or untrusted bearer token",
            Some(Extra::WwwAuthenticate),
        );
        add("403", "The token lacks a role this operation needs", None);
    }
    if has_tenant {
        add(
            "404",
            "No such tenant, or one the token does not belong to",
            None,
        );
    }
    if has_body {
        add("413", "The body is larger than the configured limit", None);
        add("415", "The body is not `application/json`", None);
        add(
            "422",
            "The body is valid JSON but not an acceptable value (each error names a JSON pointer)",
            None,
        );
    }
    if secured {
        add(
            "429",
            "A rate limit of the tenant or of the caller was reached (problem code `rate_limited`, with the route `class` and the `scope` whose bucket is empty); retry after `Retry-After` seconds",
            Some(Extra::RetryAfter),
        );
    }
    if !NO_DATABASE.contains(&id.as_str()) && (secured || has_tenant) {
        add(
            "503",
            "The database is unavailable; retry after `Retry-After` seconds",
            Some(Extra::RetryAfter),
        );
    }
}

/// A response header the shared statuses carry.
#[derive(Clone, Copy)]
enum Extra {
    WwwAuthenticate,
    RetryAfter,
}

fn problem(description: &str, extra: Option<Extra>) -> utoipa::openapi::Response {
    let mut r = ResponseBuilder::new().description(description).content(
        "application/problem+json",
        ContentBuilder::new()
            .schema(Some(RefOr::<Schema>::Ref(Ref::from_schema_name(
                "ProblemBody",
            ))))
            .build(),
    );
    match extra {
        Some(Extra::WwwAuthenticate) => {
            r = r.header(
                "WWW-Authenticate",
                HeaderBuilder::new()
                    .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
                    .description(Some(
                        "A `Bearer` challenge (RFC 6750) naming the error and the \
                         `resource_metadata` URL (RFC 9728)",
                    ))
                    .build(),
            )
        }
        Some(Extra::RetryAfter) => {
            r = r.header(
                "Retry-After",
                HeaderBuilder::new()
                    .schema(Some(ObjectBuilder::new().schema_type(Type::Integer)))
                    .description(Some("Seconds to wait before retrying"))
                    .build(),
            )
        }
        None => {}
    }
    r.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statuses(doc: &OpenApi, path: &str, get: bool) -> Vec<String> {
        let item = &doc.paths.paths[path];
        let op = if get { &item.get } else { &item.put };
        op.as_ref()
            .unwrap()
            .responses
            .responses
            .keys()
            .cloned()
            .collect()
    }

    #[test]
    fn shared_statuses_follow_what_the_operation_is() {
        let doc = crate::app::openapi();
        // A secured tenant read with a body-less GET and no query.
        let read = statuses(
            &doc,
            "/v1/tenants/{tenant}/servers/{server}/versions/{version}",
            true,
        );
        for s in ["401", "403", "404", "429", "503"] {
            assert!(read.contains(&s.to_owned()), "{s} missing: {read:?}");
        }
        assert!(!read.contains(&"413".to_owned()), "a GET has no body");
        // A publish takes a body.
        let publish = statuses(
            &doc,
            "/v1/tenants/{tenant}/servers/{server}/versions/{version}",
            false,
        );
        for s in ["400", "413", "415", "422"] {
            assert!(publish.contains(&s.to_owned()), "{s} missing: {publish:?}");
        }
        // Liveness needs neither a token nor the database.
        assert_eq!(statuses(&doc, "/healthz", true), vec!["200".to_owned()]);
    }

    /// Schema attributes need literals, so the "not only white space"
    /// pattern is repeated where a field uses it; every copy must be the
    /// one `pinfold_http` defines (and `str::trim` agrees with).
    #[test]
    fn every_not_blank_pattern_is_the_shared_one() {
        let doc = serde_json::to_value(crate::app::openapi()).unwrap();
        let schemas = &doc["components"]["schemas"];
        for (schema, field) in [("CreateTenant", "name"), ("StatusBody", "reason")] {
            assert_eq!(
                schemas[schema]["properties"][field]["pattern"],
                pinfold_http::NOT_BLANK_PATTERN,
                "{schema}.{field}"
            );
        }
    }

    #[test]
    fn a_documented_status_keeps_its_own_body() {
        let doc = crate::app::openapi();
        let op = doc.paths.paths["/t/{tenant}/v0.1/servers"]
            .get
            .as_ref()
            .unwrap();
        let RefOr::T(r) = &op.responses.responses["404"] else {
            panic!("inline response expected")
        };
        assert!(
            !r.content.contains_key("application/problem+json"),
            "the subregistry's 404 is the official {{\"error\"}} body"
        );
    }
}
