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
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    /// The `next_cursor` of the previous page (opaque; a cursor this server
    /// did not issue is refused with `invalid_cursor`).
    #[param(min_length = 1, max_length = 1024, pattern = "^[A-Za-z0-9_-]+$")]
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
        self.cursor_as(|key| Some(key.to_owned()))
    }

    /// The decoded cursor turned into a sort key by `parse` (for example an
    /// integer id), or 422 when it is not one we issued.
    pub fn cursor_as<T>(
        &self,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<Option<T>, ApiError> {
        let Some(c) = &self.cursor else {
            return Ok(None);
        };
        decode_cursor(c)
            .and_then(|key| parse(&key))
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

/// Finishes a page fetched with `limit + 1` rows: drops the extra row and
/// returns the `next_cursor` (the last kept row's sort key), or `None` on the
/// last page.
pub fn finish_page<T>(rows: &mut Vec<T>, limit: u32, key: impl Fn(&T) -> String) -> Option<String> {
    if rows.len() > limit as usize {
        rows.truncate(limit as usize);
        rows.last().map(|r| encode_cursor(&key(r)))
    } else {
        None
    }
}

/// The sort key inside a cursor, or `None` when it is not one
/// [`encode_cursor`] made.
pub fn decode_cursor(cursor: &str) -> Option<String> {
    if cursor.is_empty() || cursor.len() > 1024 {
        return None;
    }
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
}

/// Encodes a sort key as a cursor.
pub fn encode_cursor(key: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key.as_bytes())
}
