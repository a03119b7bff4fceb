//! Where log lines go: stderr (text or JSON), or an in-memory buffer that
//! tests read back.

use std::sync::{Arc, Mutex};

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use super::settings::LogFormat;

/// Where log lines go.
pub enum LogOutput {
    /// Standard error (coloured when it is a terminal and `NO_COLOR` is unset).
    Stderr,
    /// An in-memory buffer (tests, diagnostics); never coloured.
    Capture(LogCapture),
}

/// An in-memory log sink: every line the subscriber writes, in order.
#[derive(Clone, Default)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl LogCapture {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Everything written so far.
    pub fn contents(&self) -> String {
        let buf = self.0.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&buf).into_owned()
    }
}

/// One writer handed out by [`LogCapture`].
pub struct CaptureWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for CaptureWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for LogCapture {
    type Writer = CaptureWriter;

    fn make_writer(&'a self) -> Self::Writer {
        CaptureWriter(self.0.clone())
    }
}

/// A layer of the one subscriber.
pub(super) type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;

/// The log-line layer: `format` lines written to `writer`, filtered by
/// `filter`.
pub(super) fn log_layer<W>(
    format: LogFormat,
    writer: W,
    ansi: bool,
    filter: EnvFilter,
) -> BoxedLayer
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(ansi);
    match format {
        LogFormat::Json => layer.json().flatten_event(true).with_filter(filter).boxed(),
        LogFormat::Text => layer.with_filter(filter).boxed(),
    }
}
