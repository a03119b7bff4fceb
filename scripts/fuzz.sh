#!/usr/bin/env bash
# Runs every cargo-fuzz target (fuzz/) for SECONDS each (default 60) from its
# committed corpus, and fails on any crash, panic, timeout or leak of memory
# past libFuzzer's limit. Prints the executions of each target.
#
#   scripts/fuzz.sh          # 60 s per target
#   scripts/fuzz.sh 10       # a quick look
#
# Stable Rust: RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its -Z flags. The
# targets build without a sanitizer (fuzz/README.md says why). New inputs
# libFuzzer finds go to fuzz/target/corpus/<target>, never into the committed
# corpus; a crashing input is kept in fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
SECONDS_PER_TARGET=${1:-60}
CARGO_FUZZ_VERSION=0.13.1
TARGETS=(json_card canon bearer resolve_key scope_plan resolve_result message_head)
export RUSTC_BOOTSTRAP=1
export CARGO_TERM_COLOR=never
fail() { echo "fuzz FAILED: $*" >&2; exit 1; }

if ! cargo fuzz --version 2>/dev/null | grep -q " $CARGO_FUZZ_VERSION"; then
    echo "installing cargo-fuzz $CARGO_FUZZ_VERSION"
    cargo install --locked --quiet "cargo-fuzz@$CARGO_FUZZ_VERSION" || fail "cannot install cargo-fuzz"
fi

started=$(date +%s)
cargo fuzz build --sanitizer none --codegen-units 16 || fail "the fuzz targets do not build"
echo "fuzz targets built in $(( $(date +%s) - started ))s"

# run_target NAME: fuzzes one target; its outcome goes to target/fuzz-NAME.result.
run_target() {
    local t=$1 work="target/corpus/$1" log="target/fuzz-$1.log" result="target/fuzz-$1.result"
    mkdir -p "$work"
    rm -f "$result"
    if ! cargo fuzz run --sanitizer none --codegen-units 16 "$t" "$work" "corpus/$t" -- \
        -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 \
        -max_len=8192 -print_final_stats=1 >"$log" 2>&1; then
        echo "crash" >"$result"
        return
    fi
    sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1 >"$result"
}

# Targets run JOBS at a time (default: one per core), each for the full
# SECONDS_PER_TARGET on one core of its own, so the step takes
# ceil(6 / JOBS) x SECONDS_PER_TARGET instead of 6 x.
JOBS=${FUZZ_JOBS:-$(nproc)}
summary=()
for ((i = 0; i < ${#TARGETS[@]}; i += JOBS)); do
    batch=("${TARGETS[@]:i:JOBS}")
    echo "==> ${batch[*]}: ${SECONDS_PER_TARGET}s each"
    for t in "${batch[@]}"; do run_target "$t" & done
    wait
    for t in "${batch[@]}"; do
        execs=$(cat "target/fuzz-$t.result" 2>/dev/null || true)
        if [ "$execs" = crash ]; then
            tail -n 60 "target/fuzz-$t.log" >&2
            fail "$t crashed (log: fuzz/target/fuzz-$t.log, input: fuzz/artifacts/$t/)"
        fi
        [ -n "$execs" ] || { tail -n 30 "target/fuzz-$t.log" >&2; fail "$t printed no statistics"; }
        [ "$execs" -gt 0 ] || fail "$t ran no input"
        summary+=("$t: $execs execs, 0 crashes")
        echo "    $t: $execs execs"
    done
done

echo
echo "fuzz summary (${SECONDS_PER_TARGET}s per target, $(( $(date +%s) - started ))s in all):"
printf '  %s\n' "${summary[@]}"
