//! Progress on stderr: a spinner line on a terminal, plain lines otherwise.
//!
//! A command shows what it is waiting for with [`Progress::run`] (the
//! spinner turns while the future is pending; off a terminal the status is
//! one line, printed once however often it repeats), and leaves lines that
//! stay — results, warnings — with [`Progress::line`]. Nothing here knows
//! which command is running.

use std::future::Future;
use std::io::{IsTerminal as _, Write};
use std::time::Duration;

const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const TICK: Duration = Duration::from_millis(100);
/// Longest status drawn on a spinner line (it must fit on one line).
const MAX_STATUS: usize = 100;

/// Progress reporting on one writer (normally stderr).
pub struct Progress<'w> {
    w: &'w mut (dyn Write + Send),
    terminal: bool,
    frame: usize,
    drawn: bool,
    last: Option<String>,
}

impl<'w> Progress<'w> {
    /// Reports on `w`; `terminal` chooses the spinner (true) or plain
    /// lines (false).
    pub fn new(w: &'w mut (dyn Write + Send), terminal: bool) -> Progress<'w> {
        Progress {
            w,
            terminal,
            frame: 0,
            drawn: false,
            last: None,
        }
    }

    /// Whether the process's stderr is a terminal (what [`Progress::new`]
    /// should be told when reporting on stderr).
    pub fn stderr_is_terminal() -> bool {
        std::io::stderr().is_terminal()
    }

    /// True when drawing a spinner.
    pub fn is_terminal(&self) -> bool {
        self.terminal
    }

    /// Awaits `fut`, showing `status` meanwhile: a turning spinner on a
    /// terminal, one plain line otherwise.
    pub async fn run<F: Future>(&mut self, status: &str, fut: F) -> F::Output {
        if !self.terminal {
            self.status(status);
            return fut.await;
        }
        let mut fut = std::pin::pin!(fut);
        let mut tick = tokio::time::interval(TICK);
        loop {
            tokio::select! {
                out = &mut fut => {
                    self.clear();
                    return out;
                }
                _ = tick.tick() => self.draw(status),
            }
        }
    }

    /// Shows `status` without waiting on anything: the spinner line on a
    /// terminal, a plain line otherwise (unless it repeats the last one).
    pub fn status(&mut self, status: &str) {
        if self.terminal {
            self.draw(status);
        } else if self.last.as_deref() != Some(status) {
            let _ = writeln!(self.w, "{status}");
            let _ = self.w.flush();
            self.last = Some(status.to_owned());
        }
    }

    /// A line that stays (a result, a warning), below any spinner.
    pub fn line(&mut self, text: &str) {
        self.clear();
        let _ = writeln!(self.w, "{text}");
        let _ = self.w.flush();
        self.last = None;
    }

    /// Removes the spinner line, if one is drawn.
    pub fn clear(&mut self) {
        if self.drawn {
            let _ = write!(self.w, "\r\x1b[2K");
            let _ = self.w.flush();
            self.drawn = false;
        }
    }

    fn draw(&mut self, status: &str) {
        let shown: String = status.chars().take(MAX_STATUS).collect();
        let _ = write!(
            self.w,
            "\r\x1b[2K{} {shown}",
            FRAMES[self.frame % FRAMES.len()]
        );
        let _ = self.w.flush();
        self.frame += 1;
        self.drawn = true;
    }
}

impl Drop for Progress<'_> {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn plain_lines_off_a_terminal() {
        let mut buf = Vec::new();
        {
            let mut p = Progress::new(&mut buf, false);
            let v = p.run("listing tools", async { 7 }).await;
            assert_eq!(v, 7);
            p.status("listing tools");
            p.run("listing prompts", async {}).await;
            p.line("done");
            p.status("listing prompts");
        }
        let text = String::from_utf8(buf).unwrap();
        assert_eq!(
            text,
            "listing tools\nlisting prompts\ndone\nlisting prompts\n"
        );
        assert!(!text.contains('\r'));
    }

    #[tokio::test(start_paused = true)]
    async fn a_spinner_on_a_terminal_is_cleared() {
        let mut buf = Vec::new();
        {
            let mut p = Progress::new(&mut buf, true);
            p.run("waiting", tokio::time::sleep(Duration::from_millis(350)))
                .await;
            p.line("result");
        }
        let text = String::from_utf8(buf).unwrap();
        // Several frames were drawn, then cleared before the line.
        assert!(text.matches("waiting").count() >= 3, "{text:?}");
        assert!(text.ends_with("\r\x1b[2Kresult\n"), "{text:?}");
    }
}
