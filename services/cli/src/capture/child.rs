//! The local server a stdio capture starts: a child process with piped
//! stdio, the tail of its stderr kept to explain a failure, and stopped
//! (or killed) when the capture is over.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncReadExt as _;

use super::error::CaptureError;

/// How much of a child's stderr is kept to explain a failure.
const STDERR_TAIL: usize = 4096;

/// A local server started for the capture; killed when dropped.
pub(super) struct Child {
    child: tokio::process::Child,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Child {
    /// The last lines the child wrote on stderr, for an error message.
    pub(super) fn stderr_tail(&self) -> String {
        let buf = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        let text = String::from_utf8_lossy(&buf);
        let text = text.trim();
        if text.is_empty() {
            String::new()
        } else {
            format!("\nits stderr ended with:\n{text}")
        }
    }

    pub(super) async fn stop(mut self) {
        // Its stdin is closed by now: give it a moment to exit by itself.
        if tokio::time::timeout(Duration::from_secs(2), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

pub(super) fn spawn(
    program: &str,
    args: &[String],
) -> Result<
    (
        Child,
        tokio::process::ChildStdout,
        tokio::process::ChildStdin,
    ),
    CaptureError,
> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .map_err(|e| CaptureError::Unreachable(format!("cannot start `{program}`: {e}")))?;
    let (Some(stdout), Some(stdin), Some(mut stderr)) =
        (child.stdout.take(), child.stdin.take(), child.stderr.take())
    else {
        return Err(CaptureError::Unreachable(format!(
            "`{program}` started without piped stdio"
        )));
    };
    let tail = Arc::new(Mutex::new(Vec::new()));
    let sink = tail.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 1024];
        while let Ok(n) = stderr.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let mut t = sink.lock().unwrap_or_else(|e| e.into_inner());
            t.extend_from_slice(&buf[..n]);
            if t.len() > STDERR_TAIL {
                let cut = t.len() - STDERR_TAIL;
                t.drain(..cut);
            }
        }
    });
    Ok((
        Child {
            child,
            stderr: tail,
        },
        stdout,
        stdin,
    ))
}
