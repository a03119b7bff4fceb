//! Cache overhead per entry beyond key and value (target ≤ 400 B).
//!
//! Keys and values are built first; the growth of the resident set while
//! inserting them into the cache, divided by the number of entries, is
//! what the cache itself costs (moka's node, its indexes and frequency
//! sketch, our entry header).

fn main() {
    for n in [100_000usize, 400_000] {
        match signet_resolve::engine::measure_cache_overhead(n) {
            Some(b) => println!("cache overhead: {b:.0} B per entry ({n} entries)"),
            None => println!("cache overhead: not measurable here (no /proc/self/statm)"),
        }
    }
}
