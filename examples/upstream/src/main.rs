//! `pinfold-example-upstream`: run the reference upstream MCP server.

use clap::Parser as _;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    pinfold_example_upstream::run(pinfold_example_upstream::Cli::parse()).await
}
