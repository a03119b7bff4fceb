//! Strict JSON request bodies.
//!
//! [`StrictJson`] is the only way a Pinfold handler reads a JSON body. It
//! refuses, with a problem response and never a 500:
//!
//! | input                                      | status | code                    |
//! |--------------------------------------------|--------|-------------------------|
//! | `Content-Type` not JSON                    | 415    | `unsupported_media_type`|
//! | body over the configured limit             | 413    | `body_too_large`        |
//! | not JSON / trailing bytes / lone surrogate | 400    | `malformed_json`        |
//! | a key twice in one object                  | 400    | `duplicate_key`         |
//! | nesting deeper than 64                     | 400    | `too_deep`              |
//! | JSON of the wrong shape or type            | 422    | `validation_failed`     |

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{StatusCode, header};
use pinfold_core::json::{self, JsonErrorKind};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::problem::{ApiError, FieldError};

/// A JSON body parsed strictly, then deserialised into `T`.
#[derive(Debug, Clone)]
pub struct StrictJson<T>(pub T);

/// 413 `body_too_large`.
pub fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        "Request body too large",
    )
    .detail("the request body exceeds the configured limit")
}

fn is_json(req: &Request) -> bool {
    let Some(ct) = req.headers().get(header::CONTENT_TYPE) else {
        return false;
    };
    let Ok(ct) = ct.to_str() else { return false };
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// Reads a request body as a strictly parsed JSON value.
pub async fn read_value<S: Send + Sync>(req: Request, state: &S) -> Result<Value, ApiError> {
    let bytes = read_json_bytes(req, state).await?;
    parse_body(&bytes)
}

/// Reads the bytes of a JSON request body (media type and size checked as
/// in [`read_value`]) without parsing them, for a handler that parses with
/// [`parse_body`] off the async workers.
pub async fn read_json_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    if !is_json(&req) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "Unsupported media type",
        )
        .detail("send the body as Content-Type: application/json"));
    }
    Bytes::from_request(req, state).await.map_err(|rej| {
        if rej.status() == StatusCode::PAYLOAD_TOO_LARGE {
            too_large()
        } else {
            ApiError::malformed_json(format!("could not read the request body: {rej}"))
        }
    })
}

/// Parses bytes with the strict rules of [`pinfold_core::json`].
pub fn parse_body(bytes: &[u8]) -> Result<Value, ApiError> {
    json::parse_strict(bytes, json::DEFAULT_MAX_DEPTH).map_err(|e| match e.kind {
        JsonErrorKind::DuplicateKey => ApiError::new(
            StatusCode::BAD_REQUEST,
            "duplicate_key",
            "Duplicate object key",
        )
        .detail(e.message),
        JsonErrorKind::TooDeep => ApiError::new(
            StatusCode::BAD_REQUEST,
            "too_deep",
            "JSON nested too deeply",
        )
        .detail(e.message),
        JsonErrorKind::Syntax => ApiError::malformed_json(e.message),
    })
}

/// Deserialises a value into `T`, reporting the JSON pointer of the failure.
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let pointer = pointer_of(e.path());
        let message = e.inner().to_string();
        let code = if message.starts_with("unknown field") {
            "unknown_field"
        } else if message.starts_with("missing field") {
            "missing_field"
        } else if message.starts_with("invalid type") {
            "wrong_type"
        } else {
            "invalid_value"
        };
        ApiError::validation(vec![FieldError {
            pointer,
            code: code.to_owned(),
            message,
        }])
    })
}

/// Converts a serde path into a JSON pointer (RFC 6901).
pub fn pointer_of(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for seg in path.iter() {
        match seg {
            Segment::Seq { index } => {
                out.push('/');
                out.push_str(&index.to_string());
            }
            Segment::Map { key } | Segment::Enum { variant: key } => {
                out.push('/');
                out.push_str(&key.replace('~', "~0").replace('/', "~1"));
            }
            Segment::Unknown => {}
        }
    }
    out
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for StrictJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let value = read_value(req, state).await?;
        from_value(value).map(StrictJson)
    }
}

/// Reads an optional non-negative integer as JSON Schema does: any number
/// whose fractional part is zero is an `integer` (`18685.0` as much as
/// `18685`; JSON Schema 2020-12 validation §6.1.1), where serde's `u64`
/// takes only numbers written without one. For a member whose schema says
/// `integer`: `#[serde(default, deserialize_with = "...::opt_integer")]`.
pub fn opt_integer<'de, D>(d: D) -> Result<Option<u64>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::Deserialize as _;
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else {
        return Ok(None);
    };
    if let Some(u) = n.as_u64() {
        return Ok(Some(u));
    }
    match n.as_f64() {
        Some(f) if f.fract() == 0.0 && (0.0..=u64::MAX as f64).contains(&f) => Ok(Some(f as u64)),
        _ => Err(serde::de::Error::custom(format!(
            "invalid value: {n}, expected a non-negative integer"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        name: String,
        items: Vec<Item>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Item {
        n: u32,
    }

    #[test]
    fn a_well_formed_body_deserialises() {
        let v = serde_json::json!({"name": "x", "items": [{"n": 1}, {"n": 2}]});
        let b = from_value::<Body>(v).unwrap();
        assert_eq!(b.name, "x");
        assert_eq!(b.items.iter().map(|i| i.n).sum::<u32>(), 3);
    }

    #[test]
    fn wrong_type_points_at_the_field() {
        let v = serde_json::json!({"name": "x", "items": [{"n": 1}, {"n": "two"}]});
        let e = from_value::<Body>(v).unwrap_err();
        assert_eq!(e.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(e.errors[0].pointer, "/items/1/n");
        assert_eq!(e.errors[0].code, "wrong_type");
    }

    #[test]
    fn unknown_and_missing_fields() {
        let e = from_value::<Body>(serde_json::json!({"name": "x", "items": [], "extra": 1}))
            .unwrap_err();
        assert_eq!(e.errors[0].code, "unknown_field");
        let e = from_value::<Body>(serde_json::json!({"items": []})).unwrap_err();
        assert_eq!(e.errors[0].code, "missing_field");
    }

    #[test]
    fn parse_errors_map_to_codes() {
        assert_eq!(parse_body(b"{").unwrap_err().code, "malformed_json");
        assert_eq!(
            parse_body(br#"{"a":1,"a":1}"#).unwrap_err().code,
            "duplicate_key"
        );
        let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
        assert_eq!(parse_body(deep.as_bytes()).unwrap_err().code, "too_deep");
    }

    #[test]
    fn integers_are_json_schema_integers() {
        #[derive(serde::Deserialize)]
        struct T {
            #[serde(default, deserialize_with = "super::opt_integer")]
            n: Option<u64>,
        }
        let read = |v: serde_json::Value| serde_json::from_value::<T>(v).map(|t| t.n);
        assert_eq!(read(serde_json::json!({"n": 3})).unwrap(), Some(3));
        assert_eq!(
            read(serde_json::json!({"n": 18685.0})).unwrap(),
            Some(18685)
        );
        assert_eq!(read(serde_json::json!({"n": null})).unwrap(), None);
        assert_eq!(read(serde_json::json!({})).unwrap(), None);
        for bad in [
            serde_json::json!({"n": 1.5}),
            serde_json::json!({"n": -1}),
            serde_json::json!({"n": -2.0}),
            serde_json::json!({"n": "1"}),
        ] {
            assert!(read(bad.clone()).is_err(), "{bad}");
        }
    }
}
