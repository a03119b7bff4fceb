//! A bounded reader of `text/event-stream` bodies: it turns byte chunks,
//! split anywhere, into the `data` of each event (the HTML Living
//! Standard's server-sent events: lines end in CRLF, LF or a lone CR;
//! `:` starts a comment; several `data` lines join with `\n`; a blank line
//! ends the event; other fields are ignored).
//!
//! Memory is bounded: an event whose data, or a line still unterminated,
//! grows past the limit is an error, so an upstream streaming one endless
//! event costs at most the limit.

/// An event (or a line of one) larger than the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooLarge;

/// The incremental parser state.
pub(crate) struct Events {
    max: usize,
    /// The current, not yet terminated line.
    line: Vec<u8>,
    /// The data of the current event, each line followed by `\n`.
    data: Vec<u8>,
    /// Whether the current event has a `data` field (even an empty one).
    has_data: bool,
    /// The last byte seen was a CR: an LF right after it ends no line.
    after_cr: bool,
}

impl Events {
    /// A parser whose events and lines may not exceed `max` bytes.
    pub(crate) fn new(max: usize) -> Self {
        Self {
            max,
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            after_cr: false,
        }
    }

    /// Feeds a chunk; calls `each` with the data of every event it
    /// completes, in order.
    pub(crate) fn feed(
        &mut self,
        mut chunk: &[u8],
        mut each: impl FnMut(&[u8]),
    ) -> Result<(), TooLarge> {
        if self.after_cr && chunk.first() == Some(&b'\n') {
            chunk = &chunk[1..];
        }
        self.after_cr = false;
        while let Some(end) = chunk.iter().position(|b| *b == b'\n' || *b == b'\r') {
            self.take_line(&chunk[..end], &mut each)?;
            let cr = chunk[end] == b'\r';
            chunk = &chunk[end + 1..];
            if cr {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
        }
        if self.line.len() + chunk.len() + self.data.len() > self.max {
            return Err(TooLarge);
        }
        self.line.extend_from_slice(chunk);
        Ok(())
    }

    /// Handles one complete line: the pending part plus `tail`.
    fn take_line(&mut self, tail: &[u8], each: &mut impl FnMut(&[u8])) -> Result<(), TooLarge> {
        let owned;
        let line: &[u8] = if self.line.is_empty() {
            tail
        } else {
            self.line.extend_from_slice(tail);
            owned = std::mem::take(&mut self.line);
            &owned
        };
        if line.is_empty() {
            if self.has_data {
                self.data.pop();
                each(&self.data);
            }
            self.data.clear();
            self.has_data = false;
            return Ok(());
        }
        let (field, value) = match line.iter().position(|b| *b == b':') {
            Some(0) => return Ok(()),
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        if field == b"data" {
            if self.data.len() + value.len() + 1 > self.max {
                return Err(TooLarge);
            }
            self.data.extend_from_slice(value);
            self.data.push(b'\n');
            self.has_data = true;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all(stream: &[u8], cuts: &[usize], max: usize) -> Result<Vec<String>, TooLarge> {
        let mut p = Events::new(max);
        let mut out = Vec::new();
        let mut at = 0;
        for &c in cuts.iter().chain(std::iter::once(&stream.len())) {
            let c = c.clamp(at, stream.len());
            p.feed(&stream[at..c], |d| {
                out.push(String::from_utf8(d.to_vec()).unwrap())
            })?;
            at = c;
        }
        Ok(out)
    }

    const STREAM: &[u8] = b": ping\r\n\r\nevent: message\r\ndata: {\"a\":1}\r\n\r\n\
data:first\rdata: second\r\rid: 7\nretry: 10\n\ndata\n\n: only a comment\n\n\
data:  two spaces\n\ndata: unterminated";

    fn expected() -> Vec<String> {
        vec![
            "{\"a\":1}".into(),
            "first\nsecond".into(),
            String::new(),
            " two spaces".into(),
        ]
    }

    #[test]
    fn events_in_one_chunk() {
        assert_eq!(all(STREAM, &[], 1 << 20).unwrap(), expected());
    }

    proptest! {
        /// However the body is cut into chunks, the same events come out
        /// (a CR at the end of one chunk and an LF at the start of the
        /// next are one line end).
        #[test]
        fn events_do_not_depend_on_chunking(mut cuts in proptest::collection::vec(0..STREAM.len(), 0..12)) {
            cuts.sort_unstable();
            prop_assert_eq!(all(STREAM, &cuts, 1 << 20).unwrap(), expected());
        }
    }

    #[test]
    fn endless_events_and_lines_are_cut_at_the_limit() {
        // One event over many lines.
        let many = b"data: 0123456789\n".repeat(10);
        assert_eq!(all(&many, &[], 100), Err(TooLarge));
        assert_eq!(all(&many, &[], 1000), Ok(vec![]));
        // One line that never ends, fed in small chunks.
        let line = [b"data: ".as_slice(), &[b'x'; 500]].concat();
        let cuts: Vec<usize> = (0..line.len()).step_by(7).collect();
        assert_eq!(all(&line, &cuts, 100), Err(TooLarge));
        // Comments alone never grow the event.
        let pings = b": ping\n\n".repeat(1000);
        assert_eq!(all(&pings, &[], 100), Ok(vec![]));
    }
}
