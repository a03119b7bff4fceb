//! A throwaway PostgreSQL cluster for fault tests: its own data directory
//! under a temporary directory, its own port on 127.0.0.1, stopped and
//! started at will, destroyed on drop. It never touches any other cluster.
//!
//! The server binaries are looked up in `$PINFOLD_PG_BIN`, then in
//! `/usr/lib/postgresql/<version>/bin` (newest first). PostgreSQL refuses
//! to run as root, so as root (how CI runs here) `initdb`, `pg_ctl` and the
//! server run as the `postgres` user through `runuser`.
//!
//! When no `initdb` is installed, [`Cluster::start`] prints a notice and
//! gives `None` (the test skips), unless `PINFOLD_REQUIRE_PG_CLUSTER=1`
//! (which `.ci/run` exports): then it panics, so CI cannot pass by skipping.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A running (or stopped) throwaway cluster.
pub struct Cluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    as_postgres: bool,
}

/// The directory holding `initdb` and `pg_ctl`, if any.
fn bin_dir() -> Option<PathBuf> {
    if let Ok(b) = std::env::var("PINFOLD_PG_BIN")
        && Path::new(&b).join("initdb").is_file()
    {
        return Some(PathBuf::from(b));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, b)| b)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// Whether a missing cluster must fail the test rather than skip it.
pub fn required() -> bool {
    std::env::var("PINFOLD_REQUIRE_PG_CLUSTER").is_ok_and(|v| v == "1")
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    l.local_addr().expect("local addr").port()
}

impl Cluster {
    /// Creates and starts a cluster, or `None` (with a notice on stderr)
    /// when PostgreSQL's server binaries are not installed and
    /// `PINFOLD_REQUIRE_PG_CLUSTER` is not `1`.
    pub fn start() -> Option<Cluster> {
        let Some(bin) = bin_dir() else {
            assert!(
                !required(),
                "PINFOLD_REQUIRE_PG_CLUSTER=1 but no initdb was found (install postgresql or set PINFOLD_PG_BIN)"
            );
            eprintln!(
                "NOTICE: skipping: no PostgreSQL server binaries (initdb) found; set PINFOLD_PG_BIN or install postgresql"
            );
            return None;
        };
        let dir = tempfile::Builder::new()
            .prefix("pinfold-pgcluster-")
            .tempdir()
            .expect("tempdir");
        let as_postgres = is_root();
        if as_postgres {
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
                .expect("chmod tempdir");
            let ok = Command::new("chown")
                .arg("postgres")
                .arg(dir.path())
                .status()
                .expect("chown");
            assert!(ok.success(), "chown postgres {}", dir.path().display());
        }
        let c = Cluster {
            bin,
            dir,
            port: free_port(),
            as_postgres,
        };
        let data = c.data();
        let out = c.run(
            "initdb",
            &[
                "-D",
                data.to_str().unwrap(),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        assert!(out.status.success(), "initdb failed: {}", text(&out));
        c.start_again();
        Some(c)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn run(&self, tool: &str, args: &[&str]) -> Output {
        let exe = self.bin.join(tool);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        };
        cmd.args(args)
            .current_dir(self.dir.path())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {tool}: {e}"))
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The port the cluster listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Starts the (stopped) cluster on its port again and waits until it
    /// accepts connections.
    pub fn start_again(&self) {
        let data = self.data();
        let log = self.dir.path().join("postgres.log");
        let opts = format!(
            "-p {} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} -c fsync=off -c max_connections=100",
            self.port,
            self.dir.path().display()
        );
        let out = self.run(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap(),
                "-l",
                log.to_str().unwrap(),
                "-o",
                &opts,
                "-w",
                "-t",
                "60",
                "start",
            ],
        );
        let log_text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            out.status.success(),
            "pg_ctl start failed: {}\n{log_text}",
            text(&out)
        );
    }

    /// Stops the cluster (fast shutdown: open connections are ended) and
    /// waits until it is down.
    pub fn stop(&self) {
        let data = self.data();
        let out = self.run(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap(),
                "-m",
                "fast",
                "-w",
                "-t",
                "60",
                "stop",
            ],
        );
        assert!(out.status.success(), "pg_ctl stop failed: {}", text(&out));
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.data();
        if data.join("postmaster.pid").exists() {
            let _ = self.run(
                "pg_ctl",
                &[
                    "-D",
                    data.to_str().unwrap_or_default(),
                    "-m",
                    "immediate",
                    "-w",
                    "stop",
                ],
            );
        }
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
