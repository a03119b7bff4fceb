//! One statement round trip to PostgreSQL over TCP carrying a 1, 16 and
//! 64 KiB parameter, on a connection with and without `TCP_NODELAY`
//! (`PgSettings::tcp_nodelay`). Without it, a statement that does not fit
//! the first write waits for the server's delayed ACK (~40 ms on Linux).
//!
//! `PINFOLD_BENCH_DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`) names the database; the bench
//! prints a notice and measures nothing when it cannot connect.

// criterion_group! generates undocumented functions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use pinfold_store_postgres::{PgSettings, PgStore};

fn bench(c: &mut Criterion) {
    let url = std::env::var("PINFOLD_BENCH_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let connect = |tcp_nodelay| {
        rt.block_on(PgStore::connect(
            &url,
            &PgSettings {
                max_connections: 1,
                tcp_nodelay,
                ..PgSettings::default()
            },
        ))
    };
    let (with, without) = match (connect(true), connect(false)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("notice: cannot connect to {url} ({e}); nothing measured");
            return;
        }
    };
    let mut g = c.benchmark_group("postgres round trip over TCP");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for kib in [1usize, 16, 64] {
        let text = "x".repeat(kib * 1024);
        for (name, store) in [("TCP_NODELAY", &with), ("Nagle", &without)] {
            g.bench_with_input(
                BenchmarkId::new(name, format!("{kib} KiB")),
                &text,
                |b, t| {
                    b.iter(|| {
                        let n: i32 = rt
                            .block_on(
                                sqlx::query_scalar("SELECT length($1)")
                                    .bind(black_box(t.as_str()))
                                    .fetch_one(store.pool()),
                            )
                            .unwrap();
                        assert_eq!(n as usize, t.len());
                    })
                },
            );
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
