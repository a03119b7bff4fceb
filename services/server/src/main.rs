//! The `signet` binary.

use clap::Parser as _;

#[tokio::main]
async fn main() {
    let cli = signet_server::cli::Cli::parse();
    std::process::exit(signet_server::cli::exit_code(cli).await);
}
