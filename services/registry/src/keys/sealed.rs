//! The text of a sealed value, as stored in the database.
//!
//! ```text
//! v2.<kid>.<base64url(nonce ‖ ciphertext ‖ tag)>
//! ```
//!
//! - `v2`: the format version.
//! - `<kid>`: the id of the master key the value was sealed under, 12
//!   lowercase hex digits (see `master`); it selects the key to open with.
//! - the rest: unpadded base64url (RFC 4648 §5) of the 96-bit random nonce,
//!   the AES-256-GCM ciphertext and its 128-bit tag.
//!
//! Values written before key ids existed (*legacy*, version 1) are the
//! third part alone: base64url of nonce, ciphertext and tag, sealed directly
//! with the master key. The base64url alphabet has no `.`, so a value
//! without one is legacy and a value with one is versioned.

use base64::Engine as _;

use super::error::KeyError;

/// The version of the format written today (the first part of a sealed
/// value).
pub const FORMAT_VERSION: &str = "v2";

/// Length of a key id, in hex digits.
pub(crate) const KID_LEN: usize = 12;

/// A sealed value, split.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Sealed<'a> {
    /// No key id: sealed directly with a master key, before key ids.
    Legacy(&'a str),
    /// Sealed under a key derived from master key `kid`.
    Keyed {
        /// The master key's id.
        kid: &'a str,
        /// base64url of nonce, ciphertext and tag.
        body: &'a str,
    },
}

fn is_kid(s: &str) -> bool {
    s.len() == KID_LEN && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Splits `text` into its parts; a malformed value does not open.
pub(crate) fn parse(text: &str) -> Result<Sealed<'_>, KeyError> {
    if !text.contains('.') {
        return Ok(Sealed::Legacy(text));
    }
    let mut parts = text.splitn(3, '.');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(FORMAT_VERSION), Some(kid), Some(body)) if is_kid(kid) && !body.contains('.') => {
            Ok(Sealed::Keyed { kid, body })
        }
        _ => Err(KeyError::Unseal),
    }
}

/// The id of the master key `sealed` names; `None` for a legacy value (or
/// one that is not a sealed value at all).
pub fn key_id_of(sealed: &str) -> Option<&str> {
    match parse(sealed) {
        Ok(Sealed::Keyed { kid, .. }) => Some(kid),
        _ => None,
    }
}

/// The text of a value sealed under master key `kid`.
pub(crate) fn render(kid: &str, nonce_ciphertext_tag: &[u8]) -> String {
    format!("{FORMAT_VERSION}.{kid}.{}", b64(nonce_ciphertext_tag))
}

/// Unpadded base64url.
pub(crate) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Decodes unpadded base64url; anything else does not open.
pub(crate) fn unb64(text: &str) -> Result<Vec<u8>, KeyError> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .map_err(|_| KeyError::Unseal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_split_into_version_key_id_and_body() {
        let v = render("0123456789ab", b"nonce and ciphertext");
        assert!(v.starts_with("v2.0123456789ab."), "{v}");
        assert_eq!(
            parse(&v).unwrap(),
            Sealed::Keyed {
                kid: "0123456789ab",
                body: &v[16..]
            }
        );
        assert_eq!(key_id_of(&v), Some("0123456789ab"));
        // No dot: legacy, whatever it holds.
        assert_eq!(parse("AAAA-_").unwrap(), Sealed::Legacy("AAAA-_"));
        assert_eq!(key_id_of("AAAA-_"), None);
        // Anything else with a dot is malformed.
        for bad in [
            "v3.0123456789ab.AAAA",
            "v2.0123456789AB.AAAA",
            "v2.0123456789a.AAAA",
            "v2.0123456789ab",
            "v2.0123456789ab.AA.AA",
            ".",
        ] {
            assert!(matches!(parse(bad), Err(KeyError::Unseal)), "{bad}");
            assert_eq!(key_id_of(bad), None, "{bad}");
        }
    }
}
