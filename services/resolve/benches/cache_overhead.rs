//! Cache overhead per entry beyond key and value (target ≤ 400 B).
//!
//! Keys and values are built first; the growth of the resident set while
//! inserting them into the cache, divided by the number of entries, is
//! what the cache itself costs (moka's node, its indexes, timer wheel and
//! frequency sketch, our entry header). Each size runs in a fresh process
//! so that memory freed by one run does not flatter the next.

fn main() {
    let arg = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<usize>().ok());
    if let Some(n) = arg {
        match pinfold_resolve::cache::measure_cache_overhead(n) {
            Some(b) => println!("cache overhead: {b:.0} B per entry ({n} entries)"),
            None => println!("cache overhead: not measurable here (no /proc/self/statm)"),
        }
        return;
    }
    let me = std::env::current_exe().expect("own path");
    for n in [50_000usize, 100_000, 200_000, 400_000] {
        let status = std::process::Command::new(&me)
            .arg(n.to_string())
            .status()
            .expect("run a measurement");
        assert!(status.success());
    }
}
