//! Matching a URI against an RFC 6570 URI template, in bounded time.
//!
//! Containment asks whether an observed resource URI is an expansion of a
//! declared resource template (SEP-2091 "Behavioral Requirements": a
//! `resources/list` result may only hold what the signature declares). The
//! template comes from a publisher, so matching must not let a crafted
//! template make a verifier work for long: a template like
//! `x://{+a}{+b}{+c}{+d}{+e}{+f}!` sends a backtracking matcher through every
//! way of splitting the URI into six pieces.
//!
//! A template is compiled into a sequence of elements: literal bytes, and
//! *runs*, one per expression, each matching zero or more characters of the
//! set its operator allows:
//!
//! | expression | a run matches |
//! |------------|---------------|
//! | `{var}` (no operator, or an unknown one) | any characters but `/`, `?` and `#` |
//! | `{/var}`, `{.var}`, `{;var}` | any characters but `?` and `#` |
//! | `{+var}`, `{#var}`, `{?var}`, `{&var}` | any characters |
//!
//! A template with a `{` that is never closed matches only its own text.
//!
//! The three sets nest (each contains the one above it), so two adjacent
//! expressions match exactly what one expression with the wider set
//! matches, and are compiled into one run. Matching simulates the
//! template's automaton over the URI's bytes, keeping the *set* of template
//! positions reachable so far; a position enters the set at most once per
//! byte, so the work is at most (URI bytes + 1) × (template elements + 1)
//! steps, with no recursion and no backtracking. Every character a run
//! excludes is ASCII, so stepping over UTF-8 bytes accepts exactly the
//! URIs that stepping over characters would. Card validation bounds the
//! template itself (`Limits::max_template_chars`,
//! `Limits::max_template_expressions` in [`crate::card::Limits`]).
//! `docs/SEMANTICS.md` (section 9) describes the same for readers outside
//! the code.

/// The characters an expression may match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    /// Simple expansion: one path segment, no `/`, `?` or `#`.
    Segment,
    /// Path-like expansion (`/`, `.`, `;`): no `?` or `#`.
    Path,
    /// Reserved, fragment and query expansion (`+`, `#`, `?`, `&`): anything.
    Any,
}

impl Class {
    /// The class of an expression, from the text between its braces.
    fn of(expression: &str) -> Self {
        match expression.as_bytes().first() {
            Some(b'+' | b'#' | b'?' | b'&') => Class::Any,
            Some(b'/' | b'.' | b';') => Class::Path,
            _ => Class::Segment,
        }
    }

    /// True when a run of this class may consume the byte `b`.
    fn allows(self, b: u8) -> bool {
        match self {
            Class::Segment => !matches!(b, b'/' | b'?' | b'#'),
            Class::Path => !matches!(b, b'?' | b'#'),
            Class::Any => true,
        }
    }
}

/// One element of a compiled template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Element {
    /// A literal byte.
    Byte(u8),
    /// Zero or more bytes of a class.
    Run(Class),
}

#[cfg(test)]
thread_local! {
    /// Template positions entered by [`UriTemplate::matches`] on this
    /// thread: the work done, which the tests bound.
    static VISITS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// An RFC 6570 URI template compiled for matching (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriTemplate {
    elements: Vec<Element>,
    expressions: usize,
}

impl UriTemplate {
    /// Compiles `template`; this never fails (text that is not a well-formed
    /// template is matched literally).
    pub fn parse(template: &str) -> Self {
        let mut elements = Vec::with_capacity(template.len());
        let mut expressions = 0;
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            elements.extend(rest[..open].bytes().map(Element::Byte));
            let Some(close) = rest[open..].find('}') else {
                // An unclosed brace: the whole template is literal text.
                return Self {
                    elements: template.bytes().map(Element::Byte).collect(),
                    expressions,
                };
            };
            expressions += 1;
            let class = Class::of(&rest[open + 1..open + close]);
            match elements.last_mut() {
                // Adjacent expressions: the wider set covers both.
                Some(Element::Run(previous)) => *previous = (*previous).max(class),
                _ => elements.push(Element::Run(class)),
            }
            rest = &rest[open + close + 1..];
        }
        elements.extend(rest.bytes().map(Element::Byte));
        Self {
            elements,
            expressions,
        }
    }

    /// The number of `{...}` expressions in the template.
    pub fn expressions(&self) -> usize {
        self.expressions
    }

    /// True when `uri` is an expansion of the template. Takes at most
    /// (`uri.len()` + 1) × (template length + 1) steps.
    pub fn matches(&self, uri: &str) -> bool {
        let accept = self.elements.len();
        // `mark[i] == stamp` when position `i` is already in the set being
        // built; stamps grow by one per byte, so nothing needs clearing.
        let mut mark = vec![0usize; accept + 1];
        let mut current = Vec::with_capacity(accept + 1);
        let mut next = Vec::with_capacity(accept + 1);
        self.enter(0, 1, &mut mark, &mut current);
        for (k, &b) in uri.as_bytes().iter().enumerate() {
            let stamp = k + 2;
            next.clear();
            for &i in &current {
                match self.elements.get(i) {
                    Some(Element::Byte(c)) if *c == b => {
                        self.enter(i + 1, stamp, &mut mark, &mut next)
                    }
                    Some(Element::Run(class)) if class.allows(b) => {
                        self.enter(i, stamp, &mut mark, &mut next)
                    }
                    _ => {}
                }
            }
            if next.is_empty() {
                return false;
            }
            std::mem::swap(&mut current, &mut next);
        }
        current.contains(&accept)
    }

    /// Adds position `i` to `set` unless it is there already. A run may
    /// match nothing, so entering a run also enters the position after it.
    fn enter(&self, mut i: usize, stamp: usize, mark: &mut [usize], set: &mut Vec<usize>) {
        loop {
            if mark[i] == stamp {
                return;
            }
            mark[i] = stamp;
            set.push(i);
            #[cfg(test)]
            VISITS.with(|v| v.set(v.get() + 1));
            match self.elements.get(i) {
                Some(Element::Run(_)) => i += 1,
                _ => return,
            }
        }
    }
}

/// True when `uri` is an expansion of the RFC 6570 `template` (see the
/// module docs for what each expression matches). To match many URIs
/// against one template, compile it once with [`UriTemplate::parse`].
pub fn template_matches(template: &str, uri: &str) -> bool {
    UriTemplate::parse(template).matches(uri)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The matcher this module replaced, kept as the oracle: it tries every
    /// length for every expression, recursively, which is exponential in
    /// the number of expressions. It counts its calls in `calls`.
    fn template_matches_backtracking(template: &str, uri: &str, calls: &mut u64) -> bool {
        enum Part<'a> {
            Lit(&'a str),
            Var(fn(char) -> bool),
        }
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Lit(&rest[..open]));
            }
            let Some(close) = rest[open..].find('}') else {
                return template == uri;
            };
            let expr = &rest[open + 1..open + close];
            let allowed: fn(char) -> bool = match expr.chars().next() {
                Some('+' | '#' | '?' | '&') => |_| true,
                Some('/' | '.' | ';') => |c| c != '?' && c != '#',
                _ => |c| c != '/' && c != '?' && c != '#',
            };
            parts.push(Part::Var(allowed));
            rest = &rest[open + close + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Lit(rest));
        }
        fn go(parts: &[Part<'_>], s: &str, calls: &mut u64) -> bool {
            *calls += 1;
            match parts.split_first() {
                None => s.is_empty(),
                Some((Part::Lit(l), tail)) => s.strip_prefix(l).is_some_and(|r| go(tail, r, calls)),
                Some((Part::Var(ok), tail)) => {
                    let mut end = 0;
                    loop {
                        if go(tail, &s[end..], calls) {
                            return true;
                        }
                        match s[end..].chars().next() {
                            Some(c) if ok(c) => end += c.len_utf8(),
                            _ => return false,
                        }
                    }
                }
            }
        }
        go(&parts, uri, calls)
    }

    /// Whether `template` matches `uri`, and the positions visited.
    fn run(template: &str, uri: &str) -> (bool, u64) {
        VISITS.set(0);
        let matched = template_matches(template, uri);
        (matched, VISITS.get())
    }

    /// The bound the module docs promise, with the template's length in
    /// bytes standing for its (never more numerous) elements.
    fn bound(template: &str, uri: &str) -> u64 {
        ((uri.len() + 1) * (template.len() + 1)) as u64
    }

    const PATHOLOGICAL: &str = "x://{+a}{+b}{+c}{+d}{+e}{+f}!";
    /// The same, with literals between the expressions so that they are not
    /// merged into one run.
    const PATHOLOGICAL_SEPARATED: &str = "x://{+a}a{+b}a{+c}a{+d}a{+e}a{+f}!";

    #[test]
    fn operators() {
        assert!(template_matches("s://{x}", "s://a.b;c"));
        for c in ["/", "?", "#"] {
            assert!(!template_matches("s://{x}", &format!("s://a{c}b")));
        }
        for op in ["/", ".", ";"] {
            let t = format!("s://{{{op}x}}");
            assert!(template_matches(&t, "s://a/b.c;d"), "{t}");
            assert!(!template_matches(&t, "s://a?b"), "{t}");
            assert!(!template_matches(&t, "s://a#b"), "{t}");
        }
        for op in ["+", "#", "?", "&"] {
            let t = format!("s://{{{op}x}}");
            assert!(template_matches(&t, "s://a/b?c#d"), "{t}");
        }
        // An expression may expand to nothing.
        assert!(template_matches("s://a{x}/b", "s://a/b"));
        // Characters outside ASCII are ordinary characters.
        assert!(template_matches("s://{x}/é", "s://ü€/é"));
        assert!(!template_matches("s://{x}/é", "s://ü€/e"));
    }

    #[test]
    fn adjacent_expressions_take_the_wider_set() {
        let t = UriTemplate::parse("s://{a}{+b}{c}");
        assert_eq!(t.expressions(), 3);
        assert_eq!(t.elements.len(), "s://".len() + 1);
        assert!(t.matches("s://a/b?c"));
        assert!(template_matches("s://{/a}{b}", "s://a/b"));
        assert!(!template_matches("s://{/a}{b}", "s://a?b"));
    }

    #[test]
    fn malformed_templates_match_their_own_text() {
        assert!(template_matches("s://{a}/{b", "s://{a}/{b"));
        assert!(!template_matches("s://{a}/{b", "s://x/{b"));
        assert_eq!(UriTemplate::parse("s://{a}/{b").expressions(), 1);
        assert!(template_matches("s://a}b", "s://a}b"));
        assert!(template_matches("", ""));
        assert!(!template_matches("", "x"));
        assert!(template_matches("{}", "abc"));
    }

    #[test]
    fn pathological_templates_take_linear_work() {
        // Short URIs first: a matcher that backtracks breaks the bound there
        // already, instead of running for hours on the long one.
        for n in [16, 100, 10_000] {
            let uri = format!("x://{}", "a".repeat(n));
            for template in [PATHOLOGICAL, PATHOLOGICAL_SEPARATED] {
                let (matched, visits) = run(template, &uri);
                assert!(!matched, "{template}");
                assert!(
                    visits <= bound(template, &uri),
                    "{template} n={n}: {visits}"
                );
                let hit = format!("{uri}!");
                let (matched, visits) = run(template, &hit);
                assert!(matched, "{template}");
                assert!(
                    visits <= bound(template, &hit),
                    "{template} n={n}: {visits}"
                );
            }
        }
        let long = format!("x://{}", "a".repeat(10_000));
        // Merged into one run, the first template keeps at most three
        // positions alive per byte.
        let (_, visits) = run(PATHOLOGICAL, &long);
        assert!(visits <= 3 * (long.len() as u64 + 1), "{visits}");
    }

    #[test]
    fn the_oracle_is_not_bounded() {
        // What the bound above rules out: the backtracking matcher needs
        // far more steps than (n + 1) × (m + 1) on a short URI already.
        let uri = format!("x://{}", "a".repeat(20));
        for template in [PATHOLOGICAL, PATHOLOGICAL_SEPARATED] {
            let mut calls = 0;
            assert!(!template_matches_backtracking(template, &uri, &mut calls));
            assert!(calls > 10 * bound(template, &uri), "{template}: {calls}");
        }
    }

    /// A small template: literals (including the characters the classes
    /// exclude, stray braces and non-ASCII) and expressions of every kind.
    fn arb_template() -> impl Strategy<Value = Vec<String>> {
        let token = prop_oneof![
            prop::sample::select(vec!["a", "b", "/", "?", "#", ".", "é", "}", "ab/"])
                .prop_map(str::to_owned),
            prop::sample::select(vec![
                "{x}", "{+x}", "{#x}", "{/x}", "{.x}", "{;x}", "{?x,y}", "{&x}", "{}", "{",
            ])
            .prop_map(str::to_owned),
        ];
        prop::collection::vec(token, 0..7)
    }

    /// A URI: either random text over the same alphabet, or the template's
    /// tokens with each expression replaced by random text (a likely match).
    fn arb_case() -> impl Strategy<Value = (String, String)> {
        let text = prop::collection::vec(
            prop::sample::select(vec!["a", "b", "/", "?", "#", ".", "é", "{", "}"]),
            0..6,
        )
        .prop_map(|v| v.concat());
        (
            arb_template(),
            prop::collection::vec(text, 8),
            any::<bool>(),
        )
            .prop_map(|(tokens, fills, expand)| {
                let template = tokens.concat();
                let uri = if expand {
                    tokens
                        .iter()
                        .zip(fills.iter().cycle())
                        .map(|(t, f)| if t.starts_with('{') { f } else { t })
                        .cloned()
                        .collect::<String>()
                } else {
                    fills.concat()
                };
                (template, uri)
            })
    }

    proptest! {
        #[test]
        fn agrees_with_the_backtracking_oracle((template, uri) in arb_case()) {
            let mut calls = 0;
            let expected = template_matches_backtracking(&template, &uri, &mut calls);
            let (matched, visits) = run(&template, &uri);
            prop_assert_eq!(matched, expected, "{:?} against {:?}", template, uri);
            prop_assert!(visits <= bound(&template, &uri));
        }
    }
}
