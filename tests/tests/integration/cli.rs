//! Command-line behaviour that needs no server.

use pinfold_server::cli::{OpenapiArgs, TokenArgs, openapi, token};

fn args(dir: &std::path::Path, tenant: Option<&str>, roles: &[&str], ttl: &str) -> TokenArgs {
    TokenArgs {
        data_dir: dir.to_path_buf(),
        sub: "me".into(),
        tenant: tenant.map(Into::into),
        roles: roles.iter().map(|r| r.to_string()).collect(),
        ttl: ttl.into(),
    }
}

#[test]
fn token_refuses_bad_input_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut out = Vec::new();
    let e = token(args(dir.path(), Some("dev"), &["reader"], "1h"), &mut out).unwrap_err();
    assert!(e.to_string().contains("no dev signing key"), "{e}");
    pinfold_server::devkeys::DevKey::load_or_create(dir.path()).unwrap();
    let e = token(args(dir.path(), Some("dev"), &["wizard"], "1h"), &mut out).unwrap_err();
    assert!(e.to_string().contains("unknown role"), "{e}");
    let e = token(args(dir.path(), None, &["admin"], "1h"), &mut out).unwrap_err();
    assert!(e.to_string().contains("need --tenant"), "{e}");
    let e = token(
        args(dir.path(), Some("Bad Tenant"), &["admin"], "1h"),
        &mut out,
    )
    .unwrap_err();
    assert!(e.to_string().contains("--tenant"), "{e}");
    let e = token(
        args(dir.path(), Some("dev"), &["admin"], "forever"),
        &mut out,
    )
    .unwrap_err();
    assert!(e.to_string().contains("ttl"), "{e}");
    assert!(out.is_empty());
    token(args(dir.path(), None, &["platform"], "10m"), &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap().trim().split('.').count(), 3);
}

#[cfg(unix)]
#[test]
fn the_dev_key_is_private_to_its_owner() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let key = pinfold_server::devkeys::DevKey::load_or_create(dir.path()).unwrap();
    assert!(key.created);
    let mode = std::fs::metadata(&key.path).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "mode {mode:o}");
    assert!(
        !pinfold_server::devkeys::DevKey::load_or_create(dir.path())
            .unwrap()
            .created
    );
}

#[test]
fn openapi_check_detects_drift() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, pinfold_server::app::openapi_json()).unwrap();
    let mut out = Vec::new();
    assert_eq!(
        openapi(
            OpenapiArgs {
                check: Some(file.clone())
            },
            &mut out
        )
        .unwrap(),
        0
    );
    std::fs::write(&file, "{}\n").unwrap();
    assert_eq!(
        openapi(OpenapiArgs { check: Some(file) }, &mut out).unwrap(),
        1
    );
}

#[test]
fn config_names_the_first_bad_setting() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pinfold.toml");
    std::fs::write(
        &file,
        "listen = \"127.0.0.1:8080\"\nbody_limit_bytes = \"lots\"\n",
    )
    .unwrap();
    let e = pinfold_server::config::Config::load(Some(&file), &Default::default()).unwrap_err();
    assert!(format!("{e:#}").contains("body_limit_bytes"), "{e:#}");
    std::fs::write(&file, "colour = \"blue\"\n").unwrap();
    let e = pinfold_server::config::Config::load(Some(&file), &Default::default()).unwrap_err();
    assert!(format!("{e:#}").contains("colour"), "{e:#}");
    std::fs::write(&file, "[auth]\nleeway_secs = 120\n").unwrap();
    let e = pinfold_server::config::Config::load(Some(&file), &Default::default()).unwrap_err();
    assert!(format!("{e:#}").contains("leeway"), "{e:#}");
    let e = pinfold_server::config::Config::load(
        Some(&dir.path().join("missing.toml")),
        &Default::default(),
    )
    .unwrap_err();
    assert!(format!("{e:#}").contains("does not exist"), "{e:#}");
}

#[test]
fn unrelated_pinfold_env_vars_do_not_break_the_config() {
    // Scripts export PINFOLD_BIN and friends; they name no setting and must
    // not make `Config::load` fail (figment would otherwise refuse them).
    with_env_in_child("PINFOLD_BENCH_ONLY_VAR", || {
        pinfold_server::config::Config::load(None, &Default::default()).expect("loads");
        assert!(
            pinfold_server::config::unknown_env_vars()
                .contains(&"PINFOLD_BENCH_ONLY_VAR".to_owned())
        );
    });
}

/// Runs `f` where `name` is set: setting it in-process would need `unsafe`
/// (other test threads read the environment), so the test re-runs itself in
/// a child process with the variable set.
fn with_env_in_child(name: &str, f: impl FnOnce()) {
    if std::env::var_os(name).is_some() {
        f();
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let status = std::process::Command::new(exe)
        .args([
            "--exact",
            "cli::unrelated_pinfold_env_vars_do_not_break_the_config",
            "--nocapture",
        ])
        .env(name, "1")
        .status()
        .unwrap();
    assert!(status.success(), "child run failed");
}

/// `pinfold openapi | head -c 10`, and the same with `2>&1`: the reader
/// goes away after 10 bytes; the command ends quietly with 141 (128 +
/// SIGPIPE, as a shell reports), never a panic (101) and never the usage
/// code (2). The real binary, through a real pipe.
#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    use std::io::Read as _;
    const PINFOLD: &str = env!("CARGO_BIN_EXE_pinfold-under-test");
    for merged in [false, true] {
        let (mut reader, writer) = std::io::pipe().unwrap();
        let mut cmd = std::process::Command::new(PINFOLD);
        cmd.arg("openapi").stdin(std::process::Stdio::null());
        let stderr_file = tempfile::NamedTempFile::new().unwrap();
        if merged {
            cmd.stdout(writer.try_clone().unwrap()).stderr(writer);
        } else {
            cmd.stdout(writer).stderr(stderr_file.reopen().unwrap());
        }
        let mut child = cmd.spawn().unwrap();
        drop(cmd);
        let mut head = [0u8; 10];
        reader.read_exact(&mut head).unwrap();
        assert_eq!(&head[..1], b"{", "merged: {merged}");
        drop(reader);
        let status = child.wait().unwrap();
        assert_eq!(
            status.code(),
            Some(pinfold_server::cli::EXIT_BROKEN_PIPE),
            "merged: {merged}"
        );
        let stderr = std::fs::read_to_string(stderr_file.path()).unwrap();
        assert!(stderr.is_empty(), "quietly: {stderr}");
    }
}
