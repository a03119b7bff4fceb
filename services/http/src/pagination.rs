//! Cursor pagination (`?limit=` default 30, max 100, `&cursor=`).
//!
//! Cursors are opaque to clients: base64url of the last item's sort key.

use base64::Engine as _;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::problem::{ApiError, FieldError};

/// Default page size.
pub const DEFAULT_LIMIT: u32 = 30;
/// Largest page size.
pub const MAX_LIMIT: u32 = 100;

/// `?limit=&cursor=` query parameters.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
pub struct PageQuery {
    /// Page size, 1 to 100 (default 30).
    pub limit: Option<u32>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

impl PageQuery {
    /// The effective limit, or 422 when out of range.
    pub fn limit(&self) -> Result<u32, ApiError> {
        match self.limit {
            None => Ok(DEFAULT_LIMIT),
            Some(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
            Some(_) => Err(ApiError::validation(vec![FieldError {
                pointer: "?limit".into(),
                code: "out_of_range".into(),
                message: format!("limit must be between 1 and {MAX_LIMIT}"),
            }])),
        }
    }

    /// The decoded cursor, or 422 when it is not one we issued.
    pub fn cursor(&self) -> Result<Option<String>, ApiError> {
        let Some(c) = &self.cursor else {
            return Ok(None);
        };
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(c)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .map(Some)
            .ok_or_else(|| {
                ApiError::validation(vec![FieldError {
                    pointer: "?cursor".into(),
                    code: "invalid_cursor".into(),
                    message: "cursor is not one this server issued".into(),
                }])
            })
    }
}

/// Encodes a sort key as a cursor.
pub fn encode_cursor(key: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key.as_bytes())
}
