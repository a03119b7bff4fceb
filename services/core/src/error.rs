//! Validation errors: every problem in a document, each with a JSON pointer.

use serde::Serialize;

/// One problem found in a document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    /// RFC 6901 JSON pointer to the offending value (`""` = the whole document).
    pub pointer: String,
    /// Stable machine-readable code, e.g. `invalid_server_name`.
    pub code: &'static str,
    /// One human-readable sentence.
    pub message: String,
}

/// Codes that mean "the document is too big", which HTTP maps to `413`
/// rather than `422`.
pub const LIMIT_CODES: &[&str] = &[
    "document_too_large",
    "too_many_tools",
    "too_many_items",
    "too_deep",
    "too_many_possibilities",
];

/// Every problem found in a document, reported all at once, sorted by pointer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{}", self.summary())]
pub struct ValidationErrors {
    /// The individual problems.
    pub errors: Vec<FieldError>,
}

impl ValidationErrors {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// A list holding one error.
    pub fn single(
        pointer: impl Into<String>,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        let mut e = Self::new();
        e.push(pointer, code, message);
        e
    }

    /// Records one problem.
    pub fn push(
        &mut self,
        pointer: impl Into<String>,
        code: &'static str,
        message: impl Into<String>,
    ) {
        self.errors.push(FieldError {
            pointer: pointer.into(),
            code,
            message: message.into(),
        });
    }

    /// True when no problem was recorded.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// True when any problem is a size or count limit (HTTP `413`).
    pub fn exceeds_limits(&self) -> bool {
        self.errors.iter().any(|e| LIMIT_CODES.contains(&e.code))
    }

    /// Sorts errors by pointer then code (deterministic output), and returns
    /// `Ok(value)` when there are none.
    pub fn into_result<T>(mut self, value: T) -> Result<T, ValidationErrors> {
        if self.errors.is_empty() {
            Ok(value)
        } else {
            self.errors.sort_by(|a, b| {
                (a.pointer.as_str(), a.code, a.message.as_str()).cmp(&(
                    b.pointer.as_str(),
                    b.code,
                    b.message.as_str(),
                ))
            });
            self.errors.dedup();
            Err(self)
        }
    }

    fn summary(&self) -> String {
        match self.errors.first() {
            None => "no validation errors".to_owned(),
            Some(first) => {
                let at = if first.pointer.is_empty() {
                    "/"
                } else {
                    first.pointer.as_str()
                };
                if self.errors.len() == 1 {
                    format!("{at}: {}", first.message)
                } else {
                    format!(
                        "{at}: {} (and {} more)",
                        first.message,
                        self.errors.len() - 1
                    )
                }
            }
        }
    }
}

/// Appends one reference token to a JSON pointer, escaping `~` and `/`
/// (RFC 6901 §3).
pub fn pointer_push(base: &str, token: &str) -> String {
    let mut s = String::with_capacity(base.len() + token.len() + 1);
    s.push_str(base);
    s.push('/');
    for c in token.chars() {
        match c {
            '~' => s.push_str("~0"),
            '/' => s.push_str("~1"),
            c => s.push(c),
        }
    }
    s
}

/// Appends an array index to a JSON pointer.
pub fn pointer_index(base: &str, index: usize) -> String {
    format!("{base}/{index}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointer_escapes() {
        assert_eq!(pointer_push("", "a/b~c"), "/a~1b~0c");
        assert_eq!(pointer_index("/tools", 3), "/tools/3");
    }

    #[test]
    fn errors_sorted_and_reported() {
        let mut e = ValidationErrors::new();
        e.push("/b", "x", "second");
        e.push("/a", "too_deep", "first");
        let err = e.into_result(()).unwrap_err();
        assert_eq!(err.errors[0].pointer, "/a");
        assert!(err.exceeds_limits());
        assert_eq!(err.to_string(), "/a: first (and 1 more)");
    }
}
