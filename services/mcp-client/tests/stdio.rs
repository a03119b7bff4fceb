//! A stdio server in its own process group: stopping it stops everything
//! a wrapper started, whether the wrapper hangs, ignores `SIGTERM`, or has
//! already exited leaving its children behind. The group's processes are
//! counted in `/proc`.

use std::time::{Duration, Instant};

use pinfold_mcp_client::stdio::{StopTimes, spawn};

/// The live (not zombie) processes whose process group is `pgid`.
fn group_members(pgid: i32) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...; comm may hold spaces.
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let (Some(state), Some(pgrp)) = (fields.first(), fields.get(2)) else {
            continue;
        };
        if *state != "Z" && pgrp.parse::<i32>().ok() == Some(pgid) {
            let comm = head.split_once('(').map_or("", |(_, c)| c);
            out.push(format!("{pid} {comm} {state}"));
        }
    }
    out
}

async fn wait_for_members(pgid: i32, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while group_members(pgid).len() < n {
        assert!(Instant::now() < deadline, "{:?}", group_members(pgid));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn sh(script: &str) -> Vec<String> {
    vec!["-c".to_owned(), script.to_owned()]
}

#[tokio::test]
async fn terminating_a_hung_wrapper_stops_its_whole_group() {
    // The wrapper forks the "real server", which ignores SIGTERM, and a
    // second child, then waits: only SIGKILL ends the first.
    let (server, _pipes) = spawn(
        "sh",
        &sh("(trap '' TERM; exec sleep 300) & sleep 300 & wait"),
    )
    .unwrap();
    let pgid = server.process_group().unwrap();
    wait_for_members(pgid, 3).await;
    let started = Instant::now();
    server.terminate(Duration::from_millis(500)).await;
    assert_eq!(group_members(pgid), Vec::<String>::new());
    // SIGTERM, the grace period, then SIGKILL.
    assert!(started.elapsed() >= Duration::from_millis(500));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_wrapper_that_exits_leaves_nothing_behind_once_stopped() {
    let (server, pipes) = spawn("sh", &sh("sleep 300 & exit 0")).unwrap();
    let pgid = server.process_group().unwrap();
    drop(pipes);
    // The leader exits by itself; its child stays in the group.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(group_members(pgid).len(), 1, "{:?}", group_members(pgid));
    server
        .stop(StopTimes {
            exit: Duration::from_secs(1),
            grace: Duration::from_secs(1),
        })
        .await;
    assert_eq!(group_members(pgid), Vec::<String>::new());
}

#[tokio::test]
async fn dropping_the_handle_kills_the_group() {
    let (server, _pipes) = spawn("sh", &sh("sleep 300 & sleep 300 & wait")).unwrap();
    let pgid = server.process_group().unwrap();
    wait_for_members(pgid, 3).await;
    drop(server);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !group_members(pgid).is_empty() {
        assert!(Instant::now() < deadline, "{:?}", group_members(pgid));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_server_runs_in_a_group_of_its_own_and_its_stderr_is_kept() {
    let (server, _pipes) = spawn("sh", &sh("echo 'cannot open config' >&2; sleep 300")).unwrap();
    let pgid = server.process_group().unwrap();
    assert_ne!(pgid, nix::unistd::getpgrp().as_raw());
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.stderr_tail().is_empty() {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(server.stderr_tail(), "cannot open config");
    server.terminate(Duration::from_secs(1)).await;
    assert!(group_members(pgid).is_empty());
}
