//! The `signet` command line for the integration suite: the same `main` as
//! `services/server/src/main.rs` (parse, [`signet_server::cli::exit_code`],
//! exit), built inside this package so that its tests can run it as a real
//! process (`CARGO_BIN_EXE_signet-e2e`) with their own stdout, stderr and
//! exit code.

use clap::Parser as _;

#[tokio::main]
async fn main() {
    let cli = signet_server::cli::Cli::parse();
    std::process::exit(signet_server::cli::exit_code(cli).await);
}
