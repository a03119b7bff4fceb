//! Bit sets over `w`-word slices of `u64`: how the planner holds sets of
//! scopes (one bit per scope a plan touches) while it searches.

/// Sets bit `i`.
pub(super) fn set(bits: &mut [u64], i: u32) {
    bits[(i / 64) as usize] |= 1 << (i % 64);
}

/// Whether bit `i` is set.
pub(super) fn get(bits: &[u64], i: u32) -> bool {
    bits[(i / 64) as usize] & (1 << (i % 64)) != 0
}

/// How many bits are set.
pub(super) fn count(bits: &[u64]) -> u32 {
    bits.iter().map(|w| w.count_ones()).sum()
}

/// How many bits of `bits` are not in `over`.
pub(super) fn count_new(bits: &[u64], over: &[u64]) -> u32 {
    bits.iter()
        .zip(over)
        .map(|(a, b)| (a & !b).count_ones())
        .sum()
}

/// Whether every bit of `a` is in `b`.
pub(super) fn subset(a: &[u64], b: &[u64]) -> bool {
    a.iter().zip(b).all(|(x, y)| x & !y == 0)
}

/// Adds the bits of `src` to `dst`.
pub(super) fn or_into(dst: &mut [u64], src: &[u64]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d |= s;
    }
}
