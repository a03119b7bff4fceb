//! Reading a response body up to a limit: a declared length over it is
//! refused before a byte is read, and an undeclared one is cut the moment
//! it passes the limit, so an endless answer costs at most the limit.

use crate::error::EgressError;

/// Reads the body of `resp` up to `max` bytes.
pub async fn read_body(resp: &mut reqwest::Response, max: usize) -> Result<Vec<u8>, EgressError> {
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Err(EgressError::TooLarge(max));
    }
    let mut out = Vec::with_capacity(resp.content_length().unwrap_or(0) as usize);
    while let Some(chunk) = resp.chunk().await.map_err(|e| EgressError::of(&e))? {
        if out.len() + chunk.len() > max {
            return Err(EgressError::TooLarge(max));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}
