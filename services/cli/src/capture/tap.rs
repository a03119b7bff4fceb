//! The record of list answers as the server sent them: raw JSON-RPC
//! results by request id, read as strict JSON, filled from whichever
//! transport carries them (the HTTP client's bodies and event streams, and
//! [`TapReader`] over a child's stdout).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use futures::StreamExt as _;
use futures::stream::BoxStream;
use rmcp::model::RequestId;
use rmcp::transport::streamable_http_client::SseError;
use serde_json::Value;
use sse_stream::Sse;
use tokio::io::{AsyncRead, ReadBuf};

/// Largest answer to one list request (JSON body or SSE stream).
pub(super) const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;
/// How deep a server's JSON answer may nest (the card allows 64 levels
/// below its root; a JSON-RPC answer wraps the items three levels deeper).
const MAX_ANSWER_DEPTH: usize = 72;

/// Raw JSON-RPC results by request id, as the server sent them.
#[derive(Clone, Default)]
pub(super) struct Tap(Arc<Mutex<HashMap<String, Result<Value, String>>>>);

impl Tap {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Result<Value, String>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the responses in one JSON-RPC message (or batch) text.
    pub(super) fn record_text(&self, text: &str) {
        match pinfold_core::json::parse_strict(text.as_bytes(), MAX_ANSWER_DEPTH) {
            Ok(v) => self.record(&v),
            Err(e) => {
                // Note the failure under the ids a lenient reader finds.
                if let Ok(v) = serde_json::from_str::<Value>(text) {
                    let reason = format!("the answer is not acceptable JSON: {e}");
                    for (id, _) in responses(&v) {
                        self.lock().insert(id, Err(reason.clone()));
                    }
                }
            }
        }
    }

    fn record(&self, msg: &Value) {
        let found = responses(msg);
        if !found.is_empty() {
            let mut map = self.lock();
            for (id, result) in found {
                map.insert(id, Ok(result.clone()));
            }
        }
    }

    pub(super) fn take(&self, id: &RequestId) -> Option<Result<Value, String>> {
        let key = serde_json::to_string(id).ok()?;
        self.lock().remove(&key)
    }

    /// `stream` with every event's data recorded as it passes.
    pub(super) fn wrap(
        &self,
        stream: BoxStream<'static, Result<Sse, SseError>>,
    ) -> BoxStream<'static, Result<Sse, SseError>> {
        let tap = self.clone();
        stream
            .map(move |item| {
                if let Ok(Sse {
                    data: Some(data), ..
                }) = &item
                {
                    tap.record_text(data);
                }
                item
            })
            .boxed()
    }
}

/// The (id, result) pairs of the responses in a message or batch.
fn responses(msg: &Value) -> Vec<(String, &Value)> {
    match msg {
        Value::Array(items) => items.iter().flat_map(responses).collect(),
        Value::Object(o) if !o.contains_key("method") => match (o.get("id"), o.get("result")) {
            (Some(id), Some(result)) => vec![(id.to_string(), result)],
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// The child's stdout as rmcp reads it, each complete line recorded.
pub(super) struct TapReader<R> {
    inner: R,
    tap: Tap,
    line: Vec<u8>,
    overflow: bool,
}

impl<R> TapReader<R> {
    /// `inner`, its complete lines recorded in `tap`.
    pub(super) fn new(inner: R, tap: Tap) -> Self {
        TapReader {
            inner,
            tap,
            line: Vec::new(),
            overflow: false,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for TapReader<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        for piece in buf.filled()[before..].split_inclusive(|b| *b == b'\n') {
            let (body, complete) = match piece.strip_suffix(b"\n") {
                Some(b) => (b, true),
                None => (piece, false),
            };
            if this.line.len() + body.len() > MAX_ANSWER_BYTES {
                this.overflow = true;
                this.line.clear();
            } else if !this.overflow {
                this.line.extend_from_slice(body);
            }
            if complete {
                if !this.overflow {
                    this.tap.record_text(&String::from_utf8_lossy(&this.line));
                }
                this.line.clear();
                this.overflow = false;
            }
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::AsyncReadExt as _;

    #[test]
    fn the_tap_records_responses_by_id() {
        let tap = Tap::default();
        tap.record_text(
            r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"t","resolve":true}]}}"#,
        );
        tap.record_text(r#"[{"jsonrpc":"2.0","id":"a","result":{}},{"jsonrpc":"2.0","method":"x","id":9,"params":{}}]"#);
        tap.record_text(r#"{"jsonrpc":"2.0","id":4,"result":{"a":1,"a":2}}"#);
        tap.record_text("not json");
        let got = tap.take(&RequestId::Number(3)).unwrap().unwrap();
        assert_eq!(got["tools"][0]["resolve"], true);
        assert!(tap.take(&RequestId::Number(3)).is_none(), "taken once");
        assert!(tap.take(&RequestId::String("a".into())).unwrap().is_ok());
        // A request from the server is not a response.
        assert!(tap.take(&RequestId::Number(9)).is_none());
        // Duplicate keys: the id is known, the result refused.
        let dup = tap.take(&RequestId::Number(4)).unwrap().unwrap_err();
        assert!(dup.contains("duplicate"), "{dup}");
    }

    #[tokio::test]
    async fn the_stdio_reader_records_complete_lines() {
        let tap = Tap::default();
        let data: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"x\":1}}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"res";
        let mut r = TapReader {
            inner: data,
            tap: tap.clone(),
            line: Vec::new(),
            overflow: false,
        };
        let mut out = Vec::new();
        r.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, data, "bytes pass through unchanged");
        assert_eq!(
            tap.take(&RequestId::Number(1)).unwrap().unwrap(),
            json!({"x": 1})
        );
        assert!(tap.take(&RequestId::Number(2)).is_none(), "incomplete line");
    }
}
