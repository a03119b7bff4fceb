//! `signet-example-upstream`: run the reference upstream MCP server.

use clap::Parser as _;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    signet_example_upstream::run(signet_example_upstream::Cli::parse()).await
}
