//! The head of a client's message: what the endpoint decides on before
//! (and, for a `tools/list`, instead of) reading the whole message.
//!
//! [`read`] reads it in one of two ways, with one result:
//!
//! - [`scan`], one pass over the bytes that builds nothing and allocates
//!   nothing. It gives an answer only for the plain case clients send:
//!   a JSON object of printable ASCII, no `\u` escape anywhere, no number
//!   with an exponent, no escape in a key it compares, each member it
//!   reads present once and of the expected type, nesting under 64 levels.
//!   It checks the whole text as JSON (RFC 8259) on the way. Anything else
//!   it declines.
//! - serde, for what the scanner declines (and to classify what is not a
//!   message at all). A body that is not a JSON object is refused here
//!   before serde sees it: serde would read an array as a struct, field by
//!   position, so `["tools/list", 1]` would pass for a request.
//!
//! Both give the same [`Head`] for any body the scanner reads; a property
//! test and a fuzz target (`fuzz/fuzz_targets/message_head.rs`) hold them
//! to it.

use std::borrow::Cow;

use pinfold_core::guard;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// What the endpoint reads of a client's message.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Head<'a> {
    /// `method` (absent or `null`: none).
    pub method: Option<Cow<'a, str>>,
    /// The text of `id` exactly as sent (absent or `null`: none).
    pub id: Option<&'a str>,
    /// `params.name`.
    pub name: Option<Cow<'a, str>>,
    /// `params.uri`.
    pub uri: Option<Cow<'a, str>>,
    /// `params._meta["io.modelcontextprotocol/protocolVersion"]`.
    pub protocol_version: Option<Cow<'a, str>>,
    /// `params._meta["io.modelcontextprotocol/clientCapabilities"].extensions`
    /// names the tool-resolution extension.
    pub extension: bool,
}

/// The body is not a message the endpoint can read (the caller says why:
/// not JSON, a batch, or a member of the wrong type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unreadable;

/// The head of `body`: scanned when it is the plain case, else parsed.
pub fn read(body: &[u8]) -> Result<Head<'_>, Unreadable> {
    match scan(body) {
        Some(head) => Ok(head),
        None => parse(body),
    }
}

/// The head as serde reads it (what [`scan`] must agree with).
pub fn parse(body: &[u8]) -> Result<Head<'_>, Unreadable> {
    let first = body
        .iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
    if first != Some(&b'{') {
        return Err(Unreadable);
    }
    let h: SerdeHead<'_> = serde_json::from_slice(body).map_err(|_| Unreadable)?;
    let params = h.params.unwrap_or_default();
    let meta = params.meta.unwrap_or_default();
    Ok(Head {
        method: h.method,
        id: h.id.map(RawValue::get),
        name: params.name,
        uri: params.uri,
        protocol_version: meta.protocol_version,
        extension: meta
            .client_capabilities
            .and_then(|c| c.extensions)
            .is_some_and(|e| e.contains_key(guard::TOOL_RESOLUTION)),
    })
}

#[derive(Deserialize)]
struct SerdeHead<'a> {
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    params: Option<SerdeParams<'a>>,
}

#[derive(Default, Deserialize)]
struct SerdeParams<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    uri: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "_meta")]
    meta: Option<SerdeMeta<'a>>,
}

#[derive(Default, Deserialize)]
struct SerdeMeta<'a> {
    #[serde(borrow, default, rename = "io.modelcontextprotocol/protocolVersion")]
    protocol_version: Option<Cow<'a, str>>,
    #[serde(default, rename = "io.modelcontextprotocol/clientCapabilities")]
    client_capabilities: Option<SerdeCapabilities>,
}

#[derive(Default, Deserialize)]
struct SerdeCapabilities {
    #[serde(default)]
    extensions: Option<serde_json::Map<String, Value>>,
}

/// Nesting deeper than this is declined (serde's own limit is 128).
const MAX_DEPTH: u32 = 64;

/// The characters a string holds as they are: printable ASCII but the
/// quote and the backslash.
static PLAIN: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0x20;
    while c < 0x7f {
        t[c] = c != b'"' as usize && c != b'\\' as usize;
        c += 1;
    }
    t
};

/// The head of `body` in one pass, or `None` when it is not the plain case
/// (module docs): the caller then asks [`parse`].
pub fn scan(body: &[u8]) -> Option<Head<'_>> {
    // Checked once as a whole (word at a time for ASCII), so that every
    // piece taken of it below is text without another pass.
    let text = std::str::from_utf8(body).ok()?;
    let mut s = Scanner {
        b: body,
        text,
        i: 0,
    };
    s.ws();
    if s.peek()? != b'{' {
        return None;
    }
    let mut head = Head::default();
    let mut seen = [false; 3];
    s.object(1, |s, key| {
        let slot = match key? {
            "method" => 0,
            "id" => 1,
            "params" => 2,
            _ => return s.skip(2),
        };
        if std::mem::replace(&mut seen[slot], true) {
            return None;
        }
        match slot {
            0 => head.method = s.opt_str()?,
            1 => {
                let start = s.i;
                s.skip(2)?;
                let raw = s.text.get(start..s.i)?;
                head.id = (raw != "null").then_some(raw);
            }
            _ => s.params(&mut head)?,
        }
        Some(())
    })?;
    s.ws();
    (s.i == body.len()).then_some(head)
}

/// How many characters at the start of `s` are [`PLAIN`]: eight at a
/// time, the first that is not found in its word by [`not_plain`]; the
/// last few one by one.
fn plain_run(s: &[u8]) -> usize {
    let mut j = 0;
    while let Some(chunk) = s.get(j..j + 8)
        && let Ok(word) = <[u8; 8]>::try_from(chunk)
    {
        let flags = not_plain(u64::from_le_bytes(word));
        if flags != 0 {
            return j + (flags.trailing_zeros() / 8) as usize;
        }
        j += 8;
    }
    while let Some(&c) = s.get(j)
        && PLAIN[usize::from(c)]
    {
        j += 1;
    }
    j
}

/// The bytes of `x` (read little-endian) that are not [`PLAIN`], as the
/// high bit of each: a byte with its high bit, below a space, a quote, a
/// backslash or DEL. A test can also flag a byte above (later than) one it
/// truly flags, as its borrow runs upward, never one below: the lowest flag
/// is always exact, and no flag means every byte is plain.
const fn not_plain(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const fn below(x: u64, n: u64) -> u64 {
        x.wrapping_sub(ONES * n) & !x & HIGH
    }
    (x & HIGH)
        | below(x, 0x20)
        | below(x ^ (ONES * 0x22), 1)
        | below(x ^ (ONES * 0x5c), 1)
        | below(x ^ (ONES * 0x7f), 1)
}

struct Scanner<'a> {
    b: &'a [u8],
    /// `b` as text.
    text: &'a str,
    i: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// A string: its raw text between the quotes, and whether it holds an
    /// escape. Printable ASCII only; no `\u`.
    fn string(&mut self) -> Option<(&'a str, bool)> {
        self.eat(b'"')?;
        let start = self.i;
        let rest = &self.b[start..];
        let mut j = 0;
        let mut escaped = false;
        loop {
            // The run of plain characters, then what ends it.
            j += plain_run(&rest[j..]);
            match rest.get(j)? {
                b'"' => break,
                b'\\' => {
                    let e = *rest.get(j + 1)?;
                    if !matches!(e, b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') {
                        return None;
                    }
                    escaped = true;
                    j += 2;
                }
                _ => return None,
            }
        }
        let text = self.text.get(start..start + j)?;
        self.i = start + j + 1;
        Some((text, escaped))
    }

    /// `null` (`Some(None)`) or a string without escapes; anything else
    /// declines.
    fn opt_str(&mut self) -> Option<Option<Cow<'a, str>>> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(None);
        }
        match self.string()? {
            (text, false) => Some(Some(Cow::Borrowed(text))),
            (_, true) => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.b[self.i..]
            .starts_with(word)
            .then(|| self.i += word.len())
    }

    /// A number without exponent: `-?(0|[1-9][0-9]*)(\.[0-9]+)?`.
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            let start = self.i;
            self.digits();
            if self.i == start {
                return None;
            }
        }
        (!matches!(self.peek(), Some(b'e' | b'E'))).then_some(())
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
    }

    /// The members of an object (the cursor on its `{`), each handed to
    /// `member` with its key (`None` when the key holds an escape) and the
    /// cursor on its value, which `member` must consume.
    fn object(
        &mut self,
        depth: u32,
        mut member: impl FnMut(&mut Self, Option<&'a str>) -> Option<()>,
    ) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.eat(b'{')?;
        self.ws();
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            self.ws();
            let (key, escaped) = self.string()?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            member(self, (!escaped).then_some(key))?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Any value at `depth`, checked and skipped.
    fn skip(&mut self, depth: u32) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'{' => self.object(depth, |s, _| s.skip(depth + 1)),
            b'[' => {
                self.i += 1;
                self.ws();
                if self.eat(b']').is_some() {
                    return Some(());
                }
                loop {
                    self.ws();
                    self.skip(depth + 1)?;
                    self.ws();
                    match self.peek()? {
                        b',' => self.i += 1,
                        b']' => {
                            self.i += 1;
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            b'"' => self.string().map(|_| ()),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// `null`: `Some(false)`; an object: `Some(true)` (the cursor stays on
    /// its `{`); anything else declines.
    fn object_or_null(&mut self) -> Option<bool> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(false);
        }
        (self.peek()? == b'{').then_some(true)
    }

    /// `params` (depth 2).
    fn params(&mut self, head: &mut Head<'a>) -> Option<()> {
        if !self.object_or_null()? {
            return Some(());
        }
        let mut seen = [false; 3];
        self.object(2, |s, key| {
            let slot = match key? {
                "name" => 0,
                "uri" => 1,
                "_meta" => 2,
                _ => return s.skip(3),
            };
            if std::mem::replace(&mut seen[slot], true) {
                return None;
            }
            match slot {
                0 => head.name = s.opt_str()?,
                1 => head.uri = s.opt_str()?,
                _ => s.meta(head)?,
            }
            Some(())
        })
    }

    /// `params._meta` (depth 3).
    fn meta(&mut self, head: &mut Head<'a>) -> Option<()> {
        if !self.object_or_null()? {
            return Some(());
        }
        let mut seen = [false; 2];
        self.object(3, |s, key| {
            let slot = match key? {
                "io.modelcontextprotocol/protocolVersion" => 0,
                "io.modelcontextprotocol/clientCapabilities" => 1,
                _ => return s.skip(4),
            };
            if std::mem::replace(&mut seen[slot], true) {
                return None;
            }
            if slot == 0 {
                head.protocol_version = s.opt_str()?;
                return Some(());
            }
            if !s.object_or_null()? {
                return Some(());
            }
            let mut seen_extensions = false;
            s.object(4, |s, key| {
                if key? != "extensions" {
                    return s.skip(5);
                }
                if std::mem::replace(&mut seen_extensions, true) {
                    return None;
                }
                if !s.object_or_null()? {
                    return Some(());
                }
                s.object(5, |s, key| {
                    if key? == guard::TOOL_RESOLUTION {
                        head.extension = true;
                    }
                    s.skip(6)
                })
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LIST: &str = r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tool-resolution": {}}}, "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"}}}}"#;

    #[test]
    fn what_clients_send_is_scanned_and_agrees_with_serde() {
        let messages = [
            LIST,
            r#"{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"list_files","arguments":{"dir":"/","n":[1,-2.5,true,false,null]}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///a"}}"#,
            "\n {\"id\" : 0 , \"method\":\"ping\" } \r\n",
            r#"{"id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t\n\"q\"","version":"1"}}}"#,
        ];
        for m in messages {
            let scanned = scan(m.as_bytes()).unwrap_or_else(|| panic!("not scanned: {m}"));
            assert_eq!(Ok(scanned), parse(m.as_bytes()), "{m}");
        }
        let head = scan(LIST.as_bytes()).unwrap();
        assert_eq!(head.method.as_deref(), Some("tools/list"));
        assert_eq!(head.id, Some("1"));
        assert_eq!(head.protocol_version.as_deref(), Some("2026-07-28"));
        assert!(head.extension);
        assert_eq!(
            scan(br#"{"id": "x" , "method":"m"}"#).unwrap().id,
            Some(r#""x""#),
            "the id as written"
        );
    }

    #[test]
    fn what_is_not_the_plain_case_is_declined_and_serde_decides() {
        for (m, serde) in [
            // Escapes the scanner does not decode, in what it reads.
            (r#"{"method":"tools\/list","id":1}"#, true),
            (r#"{"meth\u006fd":"tools/list","id":1}"#, true),
            (r#"{"id":1,"method":"x","params":{"n":"\u00e9"}}"#, true),
            // Non-ASCII, exponents, duplicates, wrong types.
            ("{\"id\":1,\"method\":\"caf\u{e9}\"}", true),
            (r#"{"id":1e3,"method":"x"}"#, true),
            (r#"{"id":1,"method":"a","method":"b"}"#, false),
            (r#"{"id":1,"method":5}"#, false),
            (r#"{"id":1,"method":"x","params":"p"}"#, false),
            (r#"{"id":1,"method":"x","params":["a"]}"#, true),
            // Not JSON, or not one object.
            (r#"{"id":1,"method":"x""#, false),
            (r#"{"id":1,"method":"x"} {}"#, false),
            (r#"{"id":01,"method":"x"}"#, false),
            (r#"{"id":1,"method":"x",}"#, false),
            (r#"["tools/list", 1]"#, false),
            ("{\"id\":1,\"method\":\"a\tb\"}", false),
        ] {
            assert_eq!(scan(m.as_bytes()), None, "{m}");
            assert_eq!(parse(m.as_bytes()).is_ok(), serde, "{m}");
        }
        // An array reads as a struct to serde; it is not a message here.
        assert_eq!(read(br#"["tools/list", 1]"#), Err(Unreadable));
        let deep = format!("{{\"id\":1,\"x\":{}{}}}", "[".repeat(70), "]".repeat(70));
        assert_eq!(scan(deep.as_bytes()), None);
        assert!(parse(deep.as_bytes()).is_ok());
    }

    #[test]
    fn the_first_byte_that_is_not_plain_is_found_in_its_word() {
        let odd = [0x00, 0x1f, 0x20, 0x22, 0x5c, 0x7e, 0x7f, 0x80, 0xff, b'a'];
        for b in 0..=255u8 {
            for at in 0..8 {
                for c in odd {
                    for later in at + 1..=8 {
                        // `b` at `at`, `c` at `later` (when in the word).
                        let mut word = *b"abcdefgh";
                        word[at] = b;
                        if later < 8 {
                            word[later] = c;
                        }
                        let want = word.iter().position(|&x| !PLAIN[usize::from(x)]);
                        let mut bytes = word.to_vec();
                        bytes.extend_from_slice(b"ijkl\"");
                        assert_eq!(plain_run(&bytes), want.unwrap_or(12), "{word:?}");
                        assert_eq!(not_plain(u64::from_le_bytes(word)) == 0, want.is_none());
                    }
                }
            }
        }
        assert_eq!(plain_run(b"abcdefghijklmnop\"q"), 16);
        assert_eq!(plain_run(b"abcdefghij\\klm"), 10);
        assert_eq!(plain_run(b"abc"), 3);
        assert_eq!(plain_run(b""), 0);
    }

    /// A JSON value, well formed or nearly: the forms the scanner
    /// declines or refuses sit beside those it reads.
    fn leaf() -> impl Strategy<Value = String> + Clone {
        let good = prop::sample::select(vec![
            "null",
            "true",
            "false",
            "0",
            "-0.5",
            "12",
            "\"tools/list\"",
            "\"2026-07-28\"",
            "\"a\\\\b\\/c\\n\"",
            "\"io.modelcontextprotocol/tool-resolution\"",
            "[]",
            "{}",
            "[1, {\"a\": null}, \"s\"]",
            "{\"k\": [true, {}]}",
            "[[[[]]]]",
        ]);
        let bad = prop::sample::select(vec![
            "tru",
            "01",
            "-",
            "1.",
            "1e2",
            "\"\\u0041\"",
            "\"\\x\"",
            "[1,]",
            "{\"a\"}",
        ]);
        prop_oneof![12 => good, 1 => bad].prop_map(str::to_owned)
    }

    /// An object holding `nest` with a value from `value` (mostly; else a
    /// leaf) among up to three more members: each a key from `keys` and a
    /// value from `value` or a leaf (so any member can be of the wrong
    /// type, and any key can come twice).
    fn object<S>(
        nest: &'static str,
        keys: Vec<&'static str>,
        value: S,
    ) -> impl Strategy<Value = String> + Clone
    where
        S: Strategy<Value = String> + Clone,
    {
        let some = prop_oneof![3 => value, 1 => leaf()];
        let member = (prop::sample::select(keys), some.clone());
        (some, prop::collection::vec(member, 0..4), any::<u8>()).prop_map(
            move |(first, mut members, at)| {
                let at = usize::from(at) % (members.len() + 1);
                members.insert(at, (nest, first));
                let body: Vec<String> = members
                    .into_iter()
                    .map(|(k, v)| format!("\"{k}\": {v}"))
                    .collect();
                format!("{{{}}}", body.join(", "))
            },
        )
    }

    /// Messages with the nesting the head reads (method, id, params, its
    /// name, uri and `_meta`, the protocol version, the capabilities and
    /// their extensions), keys plain, escaped or unknown, values of every
    /// type, then possibly one byte changed or inserted from JSON's own
    /// alphabet, or the text cut short.
    fn message() -> impl Strategy<Value = Vec<u8>> {
        let extensions = prop_oneof![
            object(
                guard::TOOL_RESOLUTION,
                vec!["other", "io.modelcontextprotocol\\/tool-resolution"],
                leaf()
            ),
            object(
                "other",
                vec!["io.modelcontextprotocol\\/tool-resolution"],
                leaf()
            ),
        ];
        let capabilities = object(
            "extensions",
            vec!["extensions", "other", "exten\\/sions"],
            extensions,
        );
        let meta = object(
            "io.modelcontextprotocol/clientCapabilities",
            vec![
                "io.modelcontextprotocol/protocolVersion",
                "io.modelcontextprotocol/clientCapabilities",
                "io.modelcontextprotocol\\/protocolVersion",
                "other",
            ],
            capabilities,
        );
        let params = object(
            "_meta",
            vec!["name", "uri", "_meta", "other", "na\\/me"],
            meta,
        );
        let top = object(
            "params",
            vec!["method", "id", "params", "jsonrpc", "meth\\/od"],
            params,
        );
        let alphabet = b"{}[],:\"\\0123456789-.eE ntuflr/\t\x7f\xc3".to_vec();
        (
            top,
            any::<u8>(),
            any::<u16>(),
            prop::sample::select(alphabet),
        )
            .prop_map(|(text, op, at, byte)| {
                let mut b = text.into_bytes();
                let at = usize::from(at) % (b.len() + 1);
                match op % 4 {
                    0 => {}
                    1 => b.truncate(at),
                    2 => b.insert(at, byte),
                    _ => {
                        if at < b.len() {
                            b[at] = byte;
                        }
                    }
                }
                b
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(5_000))]
        #[test]
        fn the_scanner_agrees_with_serde_whenever_it_answers(body in message()) {
            if let Some(head) = scan(&body) {
                prop_assert_eq!(Ok(head), parse(&body), "{}", String::from_utf8_lossy(&body));
            }
        }
    }
}
