//! The parameters of the `/v0.1` routes, read strictly: paths, and query
//! parameters (an unknown or repeated one is refused, each value checked)
//! turned into a listing request.

use std::collections::HashMap;

use axum::http::StatusCode;
use pinfold_core::ids::Timestamp;
use pinfold_core::names::ServerName;
use pinfold_http::pagination::{DEFAULT_LIMIT, MAX_LIMIT, decode_cursor, encode_cursor};
use pinfold_http::problem::{ApiError, FieldError};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::subregistry::listing::{self, ListRequest, VersionFilter};

/// 400 `invalid_query` naming the parameter.
fn bad_query(param: &str, code: &str, message: impl Into<String>) -> ApiError {
    let message = message.into();
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "invalid_query",
        "Invalid query parameter",
    )
    .detail(message.clone())
    .with_errors(vec![FieldError {
        pointer: format!("?{param}"),
        code: code.into(),
        message,
    }])
}

/// The query parameters as a map, refusing parameters the route does not
/// take (a misspelt filter must not silently return everything) and
/// repeated ones.
pub(super) fn query_map<'a>(
    pairs: &'a [(String, String)],
    allowed: &[&str],
) -> Result<HashMap<&'a str, &'a str>, ApiError> {
    let mut map = HashMap::new();
    for (k, v) in pairs {
        if !allowed.contains(&k.as_str()) {
            let takes = if allowed.is_empty() {
                "this route takes no query parameters".to_owned()
            } else {
                format!("this route takes {}", allowed.join(", "))
            };
            return Err(bad_query(
                k,
                "unknown_parameter",
                format!("unknown query parameter {k:?}; {takes}"),
            ));
        }
        if map.insert(k.as_str(), v.as_str()).is_some() {
            return Err(bad_query(
                k,
                "repeated_parameter",
                format!("{k} is given more than once"),
            ));
        }
    }
    Ok(map)
}

fn parse_limit(raw: Option<&str>) -> Result<u32, ApiError> {
    let Some(raw) = raw else {
        return Ok(DEFAULT_LIMIT);
    };
    match raw.parse::<u32>() {
        Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
        _ => Err(bad_query(
            "limit",
            "out_of_range",
            format!("limit must be an integer from 1 to {MAX_LIMIT}, got {raw:?}"),
        )),
    }
}

pub(super) fn parse_bool(param: &str, raw: Option<&str>) -> Result<bool, ApiError> {
    match raw {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(bad_query(
            param,
            "invalid_value",
            format!("{param} must be true or false, got {other:?}"),
        )),
    }
}

/// A cursor holds the `(server key, version)` a page ended at.
pub(super) fn cursor_for(key: &str, version: &str) -> String {
    encode_cursor(&format!("{key}\n{version}"))
}

fn parse_cursor(raw: Option<&str>) -> Result<Option<(String, String)>, ApiError> {
    let Some(raw) = raw else { return Ok(None) };
    decode_cursor(raw)
        .and_then(|text| {
            let (key, version) = text.split_once('\n')?;
            let canonical = ServerName::parse(key).ok()?;
            (canonical.canonical() == key && !version.is_empty() && version.len() <= 255)
                .then(|| (key.to_owned(), version.to_owned()))
        })
        .map(Some)
        .ok_or_else(|| {
            bad_query(
                "cursor",
                "invalid_cursor",
                "cursor is not one this server issued (pass metadata.nextCursor as it came)",
            )
        })
}

fn parse_since(raw: Option<&str>) -> Result<Option<Timestamp>, ApiError> {
    let Some(raw) = raw else { return Ok(None) };
    let at = time::OffsetDateTime::parse(raw, &time::format_description::well_known::Rfc3339)
        .map_err(|_| {
            bad_query(
                "updated_since",
                "invalid_timestamp",
                format!(
                    "updated_since must be an RFC 3339 date-time such as 2025-01-31T12:00:00Z \
                     (encode a + offset as %2B), got {raw:?}"
                ),
            )
        })?;
    let millis = at.unix_timestamp_nanos() / 1_000_000;
    let millis = i64::try_from(millis).map_err(|_| {
        bad_query(
            "updated_since",
            "invalid_timestamp",
            "updated_since is out of range",
        )
    })?;
    Ok(Some(Timestamp::from_millis(millis)))
}

fn parse_version(raw: Option<&str>) -> Result<VersionFilter, ApiError> {
    match raw {
        None => Ok(VersionFilter::All),
        Some("latest") => Ok(VersionFilter::Latest),
        Some(v) if !v.is_empty() && v.len() <= 255 => Ok(VersionFilter::Exact(v.to_owned())),
        Some(_) => Err(bad_query(
            "version",
            "invalid_value",
            "version must be `latest` or an exact version of 1 to 255 characters",
        )),
    }
}

fn parse_search(raw: Option<&str>) -> Result<Option<String>, ApiError> {
    match raw {
        Some(s) if s.chars().count() > listing::MAX_SEARCH_CHARS => Err(bad_query(
            "search",
            "too_long",
            format!("search is at most {} characters", listing::MAX_SEARCH_CHARS),
        )),
        Some(s) if !s.is_empty() => Ok(Some(s.to_owned())),
        _ => Ok(None),
    }
}

/// The query of `GET /t/{tenant}/v0.1/servers` (as the official API
/// defines it).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SubregistryListQuery {
    /// `metadata.nextCursor` of the previous page (opaque).
    #[param(min_length = 1, max_length = 1024, pattern = "^[A-Za-z0-9_-]+$")]
    pub cursor: Option<String>,
    /// Page size, 1 to 100 (default 30).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    /// Case-insensitive substring of the server name.
    #[param(max_length = 200)]
    pub search: Option<String>,
    /// An RFC 3339 date-time: only versions updated strictly after it;
    /// deleted versions are then always included (`include_deleted` is
    /// implied), so that a mirror learns about deletions.
    #[param(format = DateTime)]
    pub updated_since: Option<String>,
    /// `latest` (each server's latest version) or an exact version.
    #[param(min_length = 1, max_length = 255)]
    pub version: Option<String>,
    /// Include deleted (revoked) versions (default `false`).
    pub include_deleted: Option<bool>,
}

const LIST_PARAMS: &[&str] = &[
    "cursor",
    "limit",
    "search",
    "updated_since",
    "version",
    "include_deleted",
];

impl ListRequest {
    /// The listing request a query string asks for.
    pub(super) fn from_query(pairs: &[(String, String)]) -> Result<ListRequest, ApiError> {
        let q = query_map(pairs, LIST_PARAMS)?;
        Ok(ListRequest {
            limit: parse_limit(q.get("limit").copied())?,
            after: parse_cursor(q.get("cursor").copied())?,
            search: parse_search(q.get("search").copied())?,
            updated_since: parse_since(q.get("updated_since").copied())?,
            version: parse_version(q.get("version").copied())?,
            include_deleted: parse_bool("include_deleted", q.get("include_deleted").copied())?,
        })
    }
}

/// The query of `GET .../versions`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SubregistryVersionsQuery {
    /// Include deleted (revoked) versions (default `false`).
    pub include_deleted: Option<bool>,
}

/// Path of a server in a subregistry.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path, rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
pub struct SubregistryServerPath {
    /// Tenant id.
    pub tenant: String,
    /// Server name, URL-encoded (`io.github.acme%2Ffiles`).
    pub server_name: String,
}

/// Path of a version in a subregistry.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path, rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
pub struct SubregistryVersionPath {
    /// Tenant id.
    pub tenant: String,
    /// Server name, URL-encoded (`io.github.acme%2Ffiles`).
    pub server_name: String,
    /// An exact version, or `latest`.
    pub version: String,
}
