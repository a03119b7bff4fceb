//! A local MCP server over stdio, in a process group of its own.
//!
//! The command a user gives is often a wrapper — `npx -y pkg`, `uvx`, a
//! shell script — that starts the real server as its own child. Killing
//! the direct child leaves that server running, holding ports and files.
//! So the server starts as the leader of a new process group, and stopping
//! it signals the whole group: `SIGTERM`, then `SIGKILL` to whatever is
//! left after a grace period. That happens on every way out — a handshake
//! that times out or fails, the end of a capture, the server exiting by
//! itself (its children may not have) — and, as a last resort, `SIGKILL`
//! when the handle is dropped without being stopped.
//!
//! The tail of the server's stderr is kept to explain a failure.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt as _;
use tokio::process::{ChildStdin, ChildStdout};

/// How much of a server's stderr is kept.
const STDERR_TAIL: usize = 4096;
/// How often the group is looked at while waiting for it to go.
const POLL: Duration = Duration::from_millis(25);

/// How long [`StdioServer::stop`] waits at each step.
#[derive(Debug, Clone, Copy)]
pub struct StopTimes {
    /// For the server to exit by itself once its stdin is closed.
    pub exit: Duration,
    /// Between `SIGTERM` and `SIGKILL`.
    pub grace: Duration,
}

impl Default for StopTimes {
    fn default() -> StopTimes {
        StopTimes {
            exit: Duration::from_secs(2),
            grace: Duration::from_secs(2),
        }
    }
}

/// A started server: the leader of its own process group.
pub struct StdioServer {
    child: tokio::process::Child,
    pgid: Option<Pid>,
    stderr: Arc<Mutex<Vec<u8>>>,
    stopped: bool,
}

/// The server's pipes: read its stdout, write its stdin.
pub struct Pipes {
    /// The server's stdout.
    pub stdout: ChildStdout,
    /// The server's stdin.
    pub stdin: ChildStdin,
}

/// Starts `program` with `args` in a new process group, stdio piped.
pub fn spawn(program: &str, args: &[String]) -> std::io::Result<(StdioServer, Pipes)> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn()?;
    let (Some(stdout), Some(stdin), Some(mut stderr)) =
        (child.stdout.take(), child.stdin.take(), child.stderr.take())
    else {
        return Err(std::io::Error::other("started without piped stdio"));
    };
    // The leader's pid is the group's id.
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
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
        StdioServer {
            child,
            pgid,
            stderr: tail,
            stopped: false,
        },
        Pipes { stdout, stdin },
    ))
}

impl StdioServer {
    /// The process group's id (the leader's pid).
    pub fn process_group(&self) -> Option<i32> {
        self.pgid.map(Pid::as_raw)
    }

    /// The last lines the server wrote on stderr ("" when none).
    pub fn stderr_tail(&self) -> String {
        let buf = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&buf).trim().to_owned()
    }

    /// Whether any process of the group is still there.
    fn group_alive(&mut self) -> bool {
        // Reap the leader if it has exited, so that it does not count.
        let _ = self.child.try_wait();
        match self.pgid {
            Some(g) => !matches!(killpg(g, None), Err(Errno::ESRCH)),
            None => false,
        }
    }

    async fn wait_gone(&mut self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if !self.group_alive() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    fn signal(&self, s: Signal) {
        if let Some(g) = self.pgid {
            let _ = killpg(g, s);
        }
    }

    /// Stops the server and everything it started: waits `times.exit` for
    /// the leader to exit by itself (its stdin should be closed by now),
    /// then sends the group `SIGTERM`, and `SIGKILL` after `times.grace`.
    /// The group is signalled even when the leader exited by itself: a
    /// wrapper may leave its children behind.
    pub async fn stop(mut self, times: StopTimes) {
        self.stopped = true;
        let _ = tokio::time::timeout(times.exit, self.child.wait()).await;
        if !self.group_alive() {
            return;
        }
        self.signal(Signal::SIGTERM);
        if self.wait_gone(times.grace).await {
            return;
        }
        tracing::debug!(pgid = ?self.pgid, "the server's process group outlived SIGTERM");
        self.signal(Signal::SIGKILL);
        let _ = self.wait_gone(times.grace).await;
    }

    /// Stops the server at once: the group gets `SIGTERM`, then `SIGKILL`
    /// after `grace` (a handshake that failed or timed out).
    pub async fn terminate(self, grace: Duration) {
        self.stop(StopTimes {
            exit: Duration::ZERO,
            grace,
        })
        .await;
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        if !self.stopped {
            self.signal(Signal::SIGKILL);
        }
    }
}
