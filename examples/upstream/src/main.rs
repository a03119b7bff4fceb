//! `signet-example-upstream`: run the reference upstream MCP server.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use signet_example_upstream::{Running, Shape, Switches};

/// Reference upstream MCP server for Signet's resolve cache (manage_files
/// with tools/resolve and tools/annotations). Endpoints: POST/GET /mcp
/// (Streamable HTTP), GET /calls, GET|PUT /switches.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8090")]
    listen: SocketAddr,
    /// Answer with an annotation the signature does not declare.
    #[arg(long)]
    undeclared: bool,
    /// Alternate between two answers for the same arguments.
    #[arg(long)]
    nondeterministic: bool,
    /// Delay every resolve answer by this many milliseconds.
    #[arg(long, default_value_t = 0)]
    delay_ms: u64,
    /// Answer every resolve with a JSON-RPC internal error.
    #[arg(long)]
    error: bool,
    /// Answer MCP requests with 503 and this Retry-After (seconds).
    #[arg(long)]
    overloaded_secs: Option<u64>,
    /// Offer only session-based protocol versions (no 2026-07-28).
    #[arg(long)]
    legacy_only: bool,
    /// Resolutions carry securitySchemes narrowed to the action.
    #[arg(long)]
    schemes: bool,
    /// Result shape of tools/resolve.
    #[arg(long, value_enum, default_value_t = Shape::Seed)]
    shape: Shape,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let a = Args::parse();
    let running = Running::start(
        a.listen,
        Switches {
            undeclared: a.undeclared,
            nondeterministic: a.nondeterministic,
            delay: Duration::from_millis(a.delay_ms),
            error: a.error,
            shape: a.shape,
            legacy_only: a.legacy_only,
            overloaded: a.overloaded_secs,
            schemes: a.schemes,
        },
    )
    .await?;
    println!("listening on {}", running.url());
    tokio::signal::ctrl_c().await?;
    running.stop().await;
    Ok(())
}
