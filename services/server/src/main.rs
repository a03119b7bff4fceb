//! The `signet` binary.

use clap::Parser as _;

#[tokio::main]
async fn main() {
    let cli = signet_server::cli::Cli::parse();
    match signet_server::cli::run(cli).await {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            // One line with the whole cause chain.
            eprintln!("signet: {e:#}");
            std::process::exit(2);
        }
    }
}
