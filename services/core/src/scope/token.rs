//! Scope tokens (RFC 6749 §3.3).
//!
//! A scope value is a space-delimited list of scope tokens; each token is
//! one or more NQCHAR: visible ASCII except the double quote and the
//! backslash (`%x21 / %x23-5B / %x5D-7E`). Those two exclusions are what
//! make a token safe inside the quoted `scope="..."` parameter of a
//! `WWW-Authenticate` challenge, so every token the planner emits is checked
//! here first.

/// The longest scope token accepted (RFC 6749 sets no limit; ours keeps
/// a challenge header and an authorization URL of sane size).
pub const MAX_SCOPE_LEN: usize = 256;

/// A scope token as a JSON Schema `pattern` (with `maxLength`
/// [`MAX_SCOPE_LEN`]: every NQCHAR is ASCII, so characters are bytes).
pub const SCOPE_TOKEN_PATTERN: &str = r"^[!#-\[\]-~]+$";

/// Why a string is not a scope token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenProblem {
    /// The empty string.
    Empty,
    /// Longer than [`MAX_SCOPE_LEN`] bytes.
    TooLong,
    /// A byte outside NQCHAR (space, control, `"`, `\` or non-ASCII).
    NotNqchar,
}

impl TokenProblem {
    /// One sentence for an error message.
    pub fn message(self) -> &'static str {
        match self {
            Self::Empty => "a scope token must not be empty",
            Self::TooLong => "a scope token must be at most 256 bytes",
            Self::NotNqchar => {
                "a scope token may hold only visible ASCII other than '\"' and '\\' (RFC 6749 NQCHAR)"
            }
        }
    }
}

/// True for an RFC 6749 NQCHAR byte.
pub fn is_nqchar(b: u8) -> bool {
    b == 0x21 || (0x23..=0x5B).contains(&b) || (0x5D..=0x7E).contains(&b)
}

/// Checks that `s` is one RFC 6749 scope token.
pub fn check_scope(s: &str) -> Result<(), TokenProblem> {
    if s.is_empty() {
        return Err(TokenProblem::Empty);
    }
    if s.len() > MAX_SCOPE_LEN {
        return Err(TokenProblem::TooLong);
    }
    if !s.bytes().all(is_nqchar) {
        return Err(TokenProblem::NotNqchar);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nqchar() {
        for ok in [
            "repo",
            "read:org",
            "https://www.googleapis.com/auth/drive.readonly",
            "!#[]~",
        ] {
            assert_eq!(check_scope(ok), Ok(()), "{ok}");
        }
        assert_eq!(check_scope(""), Err(TokenProblem::Empty));
        for bad in ["a b", "a\"b", "a\\b", "é", "a\tb", "a\u{7f}"] {
            assert_eq!(check_scope(bad), Err(TokenProblem::NotNqchar), "{bad:?}");
        }
        assert_eq!(check_scope(&"a".repeat(256)), Ok(()));
        assert_eq!(check_scope(&"a".repeat(257)), Err(TokenProblem::TooLong));
        assert!(!is_nqchar(b' ') && !is_nqchar(b'"') && !is_nqchar(b'\\'));
        assert!(is_nqchar(b'!') && is_nqchar(b'~') && is_nqchar(b'['));
    }

    /// The schema's pattern and [`check_scope`] agree on every character
    /// (as a JSON Schema validator reads the pattern).
    #[test]
    fn the_pattern_is_check_scope() {
        let schema = serde_json::json!({"type": "string", "pattern": SCOPE_TOKEN_PATTERN,
            "maxLength": MAX_SCOPE_LEN});
        let v = jsonschema::validator_for(&schema).unwrap();
        let chars = (0u32..0x300)
            .filter_map(char::from_u32)
            .chain(['\u{2028}', '\u{1f600}']);
        for c in chars {
            for s in [c.to_string(), format!("a{c}b")] {
                assert_eq!(
                    v.is_valid(&serde_json::json!(s)),
                    check_scope(&s).is_ok(),
                    "{s:?}"
                );
            }
        }
        for s in [
            "",
            &"a".repeat(MAX_SCOPE_LEN),
            &"a".repeat(MAX_SCOPE_LEN + 1),
        ] {
            assert_eq!(v.is_valid(&serde_json::json!(s)), check_scope(s).is_ok());
        }
    }
}
