#!/usr/bin/env bash
# Process memory with the resolve cache filled by hostile entries: eight
# tenants whose tool has a 1 MiB description resolve 100 distinct keys
# each (about 800 MiB of answers asked for) against a cache bounded at
# CACHE_MIB (default 64). Prints the idle and filled resident sets and
# fails when the filled one is above (bound + idle) * 1.25.
#
#   bench/cache-memory.sh            # 64 MiB bound
#   CACHE_MIB=256 bench/cache-memory.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PINFOLD_BENCH_CACHE_MIB="${CACHE_MIB:-64}" \
    cargo bench --locked -p pinfold-resolve --bench hostile_memory 2>&1 |
    grep -E '^hostile_memory|error|panicked'
