#!/usr/bin/env bash
# Another tenant's cache hit before and after one tenant's 10,000
# invalidations (each of its sessions resolved once, then ended), in one
# process: criterion's `resolve_hit` and `resolve_hit_after_10k_invalidations`
# from services/resolve/benches/resolve.rs. Invalidation is a generation
# bump, so the two should agree within criterion's noise; the script prints
# both medians and their ratio.
#
#   bench/invalidation-flood.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(cargo bench --locked -p pinfold-resolve --bench resolve -- '^resolve_hit' 2>&1) || {
    printf '%s\n' "$out" >&2
    exit 1
}
# criterion prints "name   time:   [low unit mid unit high unit]"
median() {
    printf '%s\n' "$out" | awk -v name="$1" '
        $1 == name { found = 1 }
        found && /time:/ { for (i = 1; i <= NF; i++) if ($i ~ /^\[/) { v = $(i + 2); u = $(i + 3); break }
                           if (u == "ns") v /= 1000; else if (u == "ms") v *= 1000
                           print v; exit }'
}
before=$(median resolve_hit)
after=$(median resolve_hit_after_10k_invalidations)
[ -n "$before" ] && [ -n "$after" ] || { printf '%s\n' "$out" >&2; echo "could not read criterion's figures" >&2; exit 1; }
printf 'resolve_hit (another tenant)            %8.2f us\n' "$before"
printf 'after 10,000 invalidations of a tenant  %8.2f us\n' "$after"
awk -v a="$after" -v b="$before" 'BEGIN { printf "ratio after/before                      %8.3f\n", a / b }'
