//! Reading a `text/event-stream` body (the HTML Living Standard's
//! server-sent events) with the `sse-stream` parser, under a byte bound:
//! the bytes since the last event boundary (a blank line) may not exceed
//! the limit, so an upstream streaming one endless event, or one line that
//! never ends, costs at most the limit; comments and keep-alives between
//! events never add up.
//!
//! The parser is stricter than browsers in two ways the MCP SDKs share: a
//! line without a colon, or a field it does not know, ends the stream with
//! an error instead of being skipped.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::{Stream, StreamExt as _};

/// Why an event stream ended early.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// An event (or a line of one) larger than the limit.
    #[error("an event exceeds {0} bytes")]
    TooLarge(usize),
    /// The body broke off.
    #[error("the event stream broke off")]
    Broken,
    /// Not an event stream the parser can read.
    #[error("unreadable event stream: {0}")]
    Unreadable(String),
}

/// One event: its `data` (lines joined with `\n`), its `event` name, its
/// `id` and the `retry` delay it asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The data, if the event had a `data` field.
    pub data: Option<String>,
    /// The event type, if named.
    pub event: Option<String>,
    /// The event id (what a client resumes from with `Last-Event-ID`).
    pub id: Option<String>,
    /// The reconnection delay in milliseconds, if the event set one.
    pub retry: Option<u64>,
}

/// Counts the bytes since the last blank line, and fails the byte stream
/// when they pass the limit.
struct Bounded<S> {
    inner: S,
    max: usize,
    since_boundary: usize,
    /// The previous byte ended a line.
    at_line_start: bool,
    /// The previous byte was a CR (a following LF belongs to it).
    after_cr: bool,
    over: Arc<AtomicBool>,
}

impl<S> Bounded<S> {
    fn tally(&mut self, chunk: &[u8]) -> bool {
        for &b in chunk {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    if self.at_line_start {
                        self.since_boundary = 0;
                    }
                    self.at_line_start = true;
                    self.after_cr = b == b'\r';
                }
                _ => {
                    self.at_line_start = false;
                    self.after_cr = false;
                    self.since_boundary += 1;
                    if self.since_boundary > self.max {
                        return false;
                    }
                }
            }
        }
        true
    }
}

impl<S, E> Stream for Bounded<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.inner.poll_next_unpin(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                if self.tally(&chunk) {
                    Poll::Ready(Some(Ok(chunk)))
                } else {
                    self.over.store(true, Ordering::Relaxed);
                    Poll::Ready(Some(Err(std::io::Error::other("event too large"))))
                }
            }
            Poll::Ready(Some(Err(_))) => {
                Poll::Ready(Some(Err(std::io::Error::other("body broke off"))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The events of a byte stream, each at most `max` bytes.
pub fn events<S, E>(bytes: S, max: usize) -> impl Stream<Item = Result<Event, EventError>> + Send
where
    S: Stream<Item = Result<Bytes, E>> + Unpin + Send + 'static,
    E: Send + 'static,
{
    let over = Arc::new(AtomicBool::new(false));
    let bounded = Bounded {
        inner: bytes,
        max,
        since_boundary: 0,
        at_line_start: true,
        after_cr: false,
        over: over.clone(),
    };
    sse_stream::SseStream::from_bytes_stream(bounded).map(move |r| match r {
        Ok(sse) => Ok(Event {
            data: sse.data,
            event: sse.event,
            id: sse.id,
            retry: sse.retry,
        }),
        Err(sse_stream::Error::Body(_)) if over.load(Ordering::Relaxed) => {
            Err(EventError::TooLarge(max))
        }
        Err(sse_stream::Error::Body(_)) => Err(EventError::Broken),
        Err(e) => Err(EventError::Unreadable(e.to_string())),
    })
}

/// The events of a response body (see [`events`]).
pub fn response_events(
    resp: reqwest::Response,
    max: usize,
) -> impl Stream<Item = Result<Event, EventError>> + Send {
    events(resp.bytes_stream().boxed(), max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all(stream: &[u8], cuts: &[usize], max: usize) -> Result<Vec<String>, EventError> {
        let mut chunks = Vec::new();
        let mut at = 0;
        for &c in cuts.iter().chain(std::iter::once(&stream.len())) {
            let c = c.clamp(at, stream.len());
            chunks.push(Ok::<_, std::io::Error>(Bytes::copy_from_slice(
                &stream[at..c],
            )));
            at = c;
        }
        let s = events(futures::stream::iter(chunks), max);
        futures::executor::block_on(async {
            let mut out = Vec::new();
            futures::pin_mut!(s);
            while let Some(e) = s.next().await {
                out.push(e?.data.unwrap_or_default());
            }
            Ok(out)
        })
    }

    const STREAM: &[u8] = b": ping\r\n\r\nevent: message\r\ndata: {\"a\":1}\r\n\r\n\
data:first\rdata: second\r\rid: 7\nretry: 10\n\ndata:\n\n: only a comment\n\n\
data:  two spaces\n\ndata: unterminated";

    fn expected() -> Vec<String> {
        vec![
            "{\"a\":1}".into(),
            "first\nsecond".into(),
            String::new(),
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
        assert_eq!(all(&many, &[], 100), Err(EventError::TooLarge(100)));
        assert_eq!(all(&many, &[], 1000), Ok(vec![]));
        // One line that never ends, fed in small chunks.
        let line = [b"data: ".as_slice(), &[b'x'; 500]].concat();
        let cuts: Vec<usize> = (0..line.len()).step_by(7).collect();
        assert_eq!(all(&line, &cuts, 100), Err(EventError::TooLarge(100)));
        // Comments and complete events alone never add up.
        let pings = b": ping\n\n".repeat(1000);
        assert_eq!(all(&pings, &[], 100), Ok(vec![]));
        let small = b"data: x\n\n".repeat(1000);
        assert_eq!(all(&small, &[], 100).unwrap().len(), 1000);
    }

    #[test]
    fn unreadable_streams_are_errors() {
        assert!(matches!(
            all(b"nonsense without a colon\n\n", &[], 100),
            Err(EventError::Unreadable(_))
        ));
    }
}
