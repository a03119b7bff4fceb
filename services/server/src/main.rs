//! The `pinfold` binary.

use clap::Parser as _;

/// mimalloc instead of the C library's allocator. A publish builds and drops
/// large JSON trees (a 58 KiB card is tens of thousands of small
/// allocations), and under glibc's malloc allocator work was about a third
/// of the server's CPU on that path (`perf`, `bench/README.md`);
/// mimalloc's thread-local free lists make the same work several times
/// cheaper, and small requests gain too.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    let cli = pinfold_server::cli::Cli::parse();
    std::process::exit(pinfold_server::cli::exit_code(cli).await);
}
