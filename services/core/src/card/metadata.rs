//! The card's registry members (`name`, `version`, `title`, `description`,
//! `websiteUrl`, `repository`, `remotes`, `packages`, `_meta`): the fields
//! of the official registry's `server.json`, validated as that schema does.

use serde_json::{Map, Value};

use super::fields::opt_str;
use super::limits::Limits;
use crate::error::{ValidationErrors, pointer_index, pointer_push};
use crate::names::{ServerName, Version};

/// The registry members of a card, borrowed from the document; `None` where
/// a member was absent or invalid (the problem is recorded).
pub(super) struct Metadata<'a> {
    pub(super) name: Option<ServerName>,
    pub(super) version: Option<Version>,
    pub(super) title: Option<&'a str>,
    pub(super) description: Option<&'a str>,
    pub(super) website_url: Option<&'a str>,
    pub(super) repository: Option<&'a Value>,
    pub(super) remotes: &'a [Value],
    pub(super) packages: &'a [Value],
    pub(super) meta: Option<&'a Map<String, Value>>,
}

/// Validates the registry members of the card object `obj`, recording every
/// problem in `errors`.
pub(super) fn parse_metadata<'a>(
    obj: &'a Map<String, Value>,
    limits: &Limits,
    errors: &mut ValidationErrors,
) -> Metadata<'a> {
    let name = match obj.get("name") {
        None => {
            errors.push("/name", "missing_field", "name is required");
            None
        }
        Some(Value::String(s)) => ServerName::parse(s)
            .map_err(|e| errors.push("/name", "invalid_server_name", e.to_string()))
            .ok(),
        Some(_) => {
            errors.push("/name", "invalid_server_name", "name must be a string");
            None
        }
    };
    let version = match obj.get("version") {
        None => {
            errors.push("/version", "missing_field", "version is required");
            None
        }
        Some(Value::String(s)) => Version::parse(s)
            .map_err(|e| errors.push("/version", "invalid_version", e.to_string()))
            .ok(),
        Some(_) => {
            errors.push("/version", "invalid_version", "version must be a string");
            None
        }
    };
    let description = opt_str(obj, "description", "", errors);
    if description.is_some_and(|d| d.trim().is_empty()) {
        // As the official registry's server.json schema (minLength 1).
        errors.push(
            "/description",
            "description_empty",
            "description must not be empty when present",
        );
    }
    if let Some(d) = description
        && d.chars().count() > limits.max_card_description_chars
    {
        errors.push(
            "/description",
            "description_too_long",
            format!(
                "description must be at most {} characters",
                limits.max_card_description_chars
            ),
        );
    }
    let title = opt_str(obj, "title", "", errors);
    if let Some(t) = title
        && !(1..=100).contains(&t.chars().count())
    {
        errors.push(
            "/title",
            "invalid_field",
            "title must be 1 to 100 characters",
        );
    }
    let website_url = opt_str(obj, "websiteUrl", "", errors);
    if let Some(u) = website_url {
        check_url(u, "/websiteUrl", errors);
    }
    let repository = obj.get("repository");
    if let Some(r) = repository {
        check_repository(r, errors);
    }
    let remotes = opt_array(obj, "remotes", "", errors);
    for (i, r) in remotes.iter().enumerate() {
        check_remote(r, &pointer_index("/remotes", i), errors);
    }
    let packages = opt_array(obj, "packages", "", errors);
    for (i, p) in packages.iter().enumerate() {
        check_package(p, &pointer_index("/packages", i), errors);
    }
    let meta = match obj.get("_meta") {
        None => None,
        Some(Value::Object(m)) => Some(m),
        Some(_) => {
            errors.push("/_meta", "invalid_field", "_meta must be an object");
            None
        }
    };
    Metadata {
        name,
        version,
        title,
        description,
        website_url,
        repository,
        remotes,
        packages,
        meta,
    }
}

fn check_url(u: &str, pointer: &str, errors: &mut ValidationErrors) {
    let rest = u
        .strip_prefix("https://")
        .or_else(|| u.strip_prefix("http://"));
    if !rest.is_some_and(|r| !r.is_empty() && !r.chars().any(char::is_whitespace)) {
        errors.push(
            pointer,
            "invalid_url",
            "must be an http:// or https:// URL without whitespace",
        );
    }
}

fn check_repository(r: &Value, errors: &mut ValidationErrors) {
    let Some(o) = r.as_object() else {
        errors.push(
            "/repository",
            "invalid_field",
            "repository must be an object",
        );
        return;
    };
    for key in ["url", "source"] {
        match o.get(key) {
            Some(Value::String(s)) => {
                if key == "url" {
                    check_url(s, "/repository/url", errors);
                }
            }
            Some(_) => errors.push(
                pointer_push("/repository", key),
                "invalid_field",
                format!("{key} must be a string"),
            ),
            None => errors.push(
                pointer_push("/repository", key),
                "missing_field",
                format!("repository.{key} is required"),
            ),
        }
    }
}

fn check_remote(r: &Value, p: &str, errors: &mut ValidationErrors) {
    let Some(o) = r.as_object() else {
        errors.push(p, "invalid_field", "a remote must be an object");
        return;
    };
    match o.get("type").and_then(Value::as_str) {
        Some("streamable-http" | "sse") => {}
        _ => errors.push(
            pointer_push(p, "type"),
            "invalid_field",
            "remote type must be streamable-http or sse",
        ),
    }
    match o.get("url").and_then(Value::as_str) {
        Some(u) => check_url(u, &pointer_push(p, "url"), errors),
        None => errors.push(
            pointer_push(p, "url"),
            "missing_field",
            "remote url is required",
        ),
    }
}

fn check_package(pkg: &Value, p: &str, errors: &mut ValidationErrors) {
    let Some(o) = pkg.as_object() else {
        errors.push(p, "invalid_field", "a package must be an object");
        return;
    };
    for key in ["registryType", "identifier"] {
        if !o.get(key).is_some_and(Value::is_string) {
            errors.push(
                pointer_push(p, key),
                "missing_field",
                format!("package {key} is required (a string)"),
            );
        }
    }
    if !o
        .get("transport")
        .is_some_and(|t| t.get("type").is_some_and(Value::is_string))
    {
        errors.push(
            pointer_push(p, "transport"),
            "missing_field",
            "package transport with a type is required",
        );
    }
    if let Some(v) = o.get("version") {
        match v.as_str() {
            Some("") | None => errors.push(
                pointer_push(p, "version"),
                "invalid_package_version",
                "package version must be a non-empty string",
            ),
            Some(s) if s.eq_ignore_ascii_case("latest") => errors.push(
                pointer_push(p, "version"),
                "invalid_package_version",
                "package version must be pinned, not 'latest'",
            ),
            Some(_) => {}
        }
    }
    for list in ["packageArguments", "runtimeArguments"] {
        let Some(args) = o.get(list) else { continue };
        let lp = pointer_push(p, list);
        let Some(args) = args.as_array() else {
            errors.push(lp, "invalid_field", format!("{list} must be an array"));
            continue;
        };
        for (j, a) in args.iter().enumerate() {
            let ap = pointer_index(&lp, j);
            match a.get("type").and_then(Value::as_str) {
                Some("positional") => {
                    if a.get("value").is_none() && a.get("valueHint").is_none() {
                        errors.push(
                            ap,
                            "invalid_argument",
                            "a positional argument needs a value or a valueHint",
                        );
                    }
                }
                Some("named") => {
                    if !a.get("name").is_some_and(Value::is_string) {
                        errors.push(ap, "invalid_argument", "a named argument needs a name");
                    }
                }
                _ => errors.push(
                    pointer_push(&ap, "type"),
                    "invalid_argument",
                    "argument type must be positional or named",
                ),
            }
        }
    }
}

/// The array member `key` of `obj` (empty when absent); any other type is
/// an `invalid_field` error at `base/key`.
fn opt_array<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
    base: &str,
    errors: &mut ValidationErrors,
) -> &'a [Value] {
    match obj.get(key) {
        None => &[],
        Some(Value::Array(a)) => a,
        Some(_) => {
            errors.push(
                pointer_push(base, key),
                "invalid_field",
                format!("{key} must be an array"),
            );
            &[]
        }
    }
}
