//! The reference upstream MCP server (`pinfold-example-upstream`, the same
//! command line) built inside this package, so that the suite can start it
//! as a child process (`CARGO_BIN_EXE_example-upstream-e2e`), e.g. with
//! `--stdio` for `pinfold capture --command`.

use clap::Parser as _;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    pinfold_example_upstream::run(pinfold_example_upstream::Cli::parse()).await?;
    Ok(())
}
