//! Strict JSON input.
//!
//! `serde_json` on its own keeps the *last* of two duplicate object keys,
//! which would let two byte-different documents canonicalise to the same
//! digest while a client and Pinfold disagree about what was published. Every
//! document Pinfold accepts therefore goes through [`parse_strict`], which
//! rejects:
//!
//! | input                               | error                          |
//! |-------------------------------------|--------------------------------|
//! | a key twice in one object           | [`JsonErrorKind::DuplicateKey`]|
//! | nesting deeper than `max_depth`     | [`JsonErrorKind::TooDeep`]     |
//! | lone surrogates, invalid UTF-8      | [`JsonErrorKind::Syntax`]      |
//! | numbers outside the f64 range       | [`JsonErrorKind::Syntax`]      |
//! | trailing characters, truncation     | [`JsonErrorKind::Syntax`]      |
//!
//! Depth counts containers: `1` is depth 0, `[1]` is depth 1, `{"a":[1]}` 2.
//! `docs/SEMANTICS.md` (section 10) lists these input rules with the card
//! limits.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Default nesting limit for documents accepted over the API.
pub const DEFAULT_MAX_DEPTH: usize = 64;

/// Why a document was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonErrorKind {
    /// Not JSON, or JSON outside what we accept (lone surrogate, huge number).
    Syntax,
    /// The same key appears twice in one object.
    DuplicateKey,
    /// Containers nest deeper than the configured limit.
    TooDeep,
}

/// A refused document, with a human-readable reason and position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    /// What kind of problem this is.
    pub kind: JsonErrorKind,
    /// A one-line explanation (includes line and column when known).
    pub message: String,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for JsonError {}

const DUP_TAG: &str = "\u{1}duplicate key ";
const DEPTH_TAG: &str = "\u{1}nesting deeper than ";

/// Parses `bytes` as one JSON value under the rules in the module docs.
pub fn parse_strict(bytes: &[u8], max_depth: usize) -> Result<Value, JsonError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    // Our own depth limit is enforced below; serde_json's fixed 128 limit
    // stays on as a second guard, so any max_depth above it is capped there.
    let value = StrictSeed {
        depth: 0,
        max_depth,
    }
    .deserialize(&mut de)
    .map_err(convert)?;
    de.end().map_err(convert)?;
    Ok(value)
}

fn convert(e: serde_json::Error) -> JsonError {
    let text = e.to_string();
    if let Some(rest) = text.strip_prefix(DUP_TAG) {
        JsonError {
            kind: JsonErrorKind::DuplicateKey,
            message: format!("duplicate key {rest}"),
        }
    } else if let Some(rest) = text.strip_prefix(DEPTH_TAG) {
        JsonError {
            kind: JsonErrorKind::TooDeep,
            message: format!("nesting deeper than {rest}"),
        }
    } else if text.starts_with("recursion limit exceeded") {
        JsonError {
            kind: JsonErrorKind::TooDeep,
            message: text,
        }
    } else {
        JsonError {
            kind: JsonErrorKind::Syntax,
            message: text,
        }
    }
}

struct StrictSeed {
    depth: usize,
    max_depth: usize,
}

impl StrictSeed {
    fn child<E: de::Error>(&self) -> Result<StrictSeed, E> {
        if self.depth >= self.max_depth {
            return Err(E::custom(format!("{DEPTH_TAG}{} levels", self.max_depth)));
        }
        Ok(StrictSeed {
            depth: self.depth + 1,
            max_depth: self.max_depth,
        })
    }
}

impl<'de> DeserializeSeed<'de> for StrictSeed {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictSeed {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number outside the f64 range"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        loop {
            let seed = self.child()?;
            match seq.next_element_seed(seed)? {
                Some(v) => out.push(v),
                None => break,
            }
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            // The map itself answers "seen before?": no second set, no clone.
            if out.contains_key(&key) {
                return Err(de::Error::custom(format!("{DUP_TAG}{key:?}")));
            }
            let value = map.next_value_seed(self.child()?)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(s: &str) -> JsonErrorKind {
        parse_strict(s.as_bytes(), DEFAULT_MAX_DEPTH)
            .unwrap_err()
            .kind
    }

    #[test]
    fn accepts_plain_documents() {
        let v = parse_strict(br#"{"a":[1,2.5,"x",null,true],"b":{}}"#, 64).unwrap();
        assert_eq!(v["a"][1], serde_json::json!(2.5));
    }

    #[test]
    fn rejects_duplicate_keys_at_any_depth() {
        assert_eq!(kind(r#"{"a":1,"a":2}"#), JsonErrorKind::DuplicateKey);
        assert_eq!(
            kind(r#"{"x":[{"b":1,"b":1}]}"#),
            JsonErrorKind::DuplicateKey
        );
        let e = parse_strict(br#"{"a":1,"a":2}"#, 64).unwrap_err();
        assert!(e.message.contains("\"a\""), "{}", e.message);
    }

    #[test]
    fn escaped_spelling_of_the_same_key_is_a_duplicate() {
        assert_eq!(kind(r#"{"A":1,"\u0041":2}"#), JsonErrorKind::DuplicateKey);
    }

    #[test]
    fn depth_limit_is_exact() {
        let ok = format!("{}1{}", "[".repeat(64), "]".repeat(64));
        assert!(parse_strict(ok.as_bytes(), 64).is_ok());
        let deep = format!("{}1{}", "[".repeat(65), "]".repeat(65));
        assert_eq!(
            parse_strict(deep.as_bytes(), 64).unwrap_err().kind,
            JsonErrorKind::TooDeep
        );
        let very_deep = format!("{}1{}", "[".repeat(5000), "]".repeat(5000));
        assert_eq!(
            parse_strict(very_deep.as_bytes(), 64).unwrap_err().kind,
            JsonErrorKind::TooDeep
        );
    }

    #[test]
    fn rejects_lone_surrogates_bad_utf8_and_huge_numbers() {
        assert_eq!(kind(r#""\ud800""#), JsonErrorKind::Syntax);
        assert_eq!(kind("1e400"), JsonErrorKind::Syntax);
        assert_eq!(
            parse_strict(b"\"\xff\"", 64).unwrap_err().kind,
            JsonErrorKind::Syntax
        );
    }

    #[test]
    fn rejects_trailing_garbage_and_truncation() {
        assert_eq!(kind("{} x"), JsonErrorKind::Syntax);
        assert_eq!(kind(r#"{"a":"#), JsonErrorKind::Syntax);
        assert_eq!(kind(""), JsonErrorKind::Syntax);
    }
}
