//! The repository keeps its promises to a new user.

fn read(rel: &str) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The first two shell blocks of the README.
fn readme_commands() -> Vec<String> {
    let readme = read("README.md");
    let mut blocks = Vec::new();
    let mut lines = readme.lines();
    while let Some(l) = lines.next() {
        if l.trim() == "```sh" {
            let body: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
            blocks.push(body.join("\n"));
        }
    }
    blocks.into_iter().take(2).collect()
}

#[test]
fn readme_opens_with_run_and_test_commands() {
    let cmds = readme_commands();
    assert_eq!(cmds.len(), 2);
    assert_eq!(cmds[0], "cargo run --bin pinfold -- serve");
    assert!(cmds[1].starts_with("cargo test"), "{}", cmds[1]);
}

#[test]
fn ci_runs_the_readme_test_command_on_both_databases() {
    let test_cmd = &readme_commands()[1];
    let ci = read(".ci/run");
    let words: Vec<&str> = test_cmd.split_whitespace().collect();
    let array = format!("TEST_CMD=({})", words.join(" "));
    assert!(
        ci.contains(&array),
        ".ci/run must run the README's test command ({test_cmd})"
    );
    assert!(ci.contains("env -u PINFOLD_TEST_DATABASE_URL \"${TEST_CMD[@]}\""));
    assert!(ci.contains("PINFOLD_TEST_DATABASE_URL=\"$PG_URL\" \"${TEST_CMD[@]}\""));
}

#[test]
fn telemetry_does_not_depend_on_the_configuration() {
    // `config` embeds `telemetry::TelemetryConfig`; the reverse import would
    // close a cycle (ARCHITECTURE.md, Operations).
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = root.join("services/server/src/telemetry");
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for needle in ["crate::config", "super::super::config", "crate::{config"] {
            assert!(!text.contains(needle), "{}: {needle}", path.display());
        }
        files += 1;
    }
    assert!(files >= 5, "telemetry/ has {files} files");
}
