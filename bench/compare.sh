#!/usr/bin/env bash
# Runs ralph's benchmarks (benches/) on the release build and prints one
# table: each measurement, ralph's figure, the target, and the figures of
# the two bash drivers ralph replaces. Those two columns are reference
# numbers from the issue (measured on a 2-core machine with a no-op agent
# and sleeps stubbed out), not measured here.
#
#   bench/compare.sh                        everything (about three minutes)
#   RALPH_BENCH_SIZES_MB=1,100 bench/compare.sh   skip the 1 GB outputs
#   RALPH_BENCH_RUNS=10 bench/compare.sh    more repetitions
#
# Measure on a quiet machine: each bench prints the load average it saw.
set -euo pipefail
cd "$(dirname "$0")/.."

out="$(mktemp)"
log="$(mktemp)"
trap 'rm -f "$out" "$log"' EXIT

echo "building and running the benches (details: cargo bench)…" >&2
if ! RALPH_BENCH_OUT="$out" cargo bench --locked --bench iteration --bench analyze \
    --bench commands --bench parallel --bench remote --bench sandbox >"$log" 2>&1; then
    cat "$log" >&2
    exit 1
fi
grep -E '^(  |[a-z].*load average)' "$log" >&2 || true
echo >&2

value() { awk -F'\t' -v k="$1" '$1 == k { v = $2 } END { print v }' "$out"; }

# A run of output: seconds, throughput and peak RSS in one cell.
output() {
    local s mbs rss
    s="$(value "$1.s")" mbs="$(value "$1.mb_s")" rss="$(value "$1.rss_mb")"
    if [[ -n $s ]]; then printf '%.2f s, %.0f MB/s, %.1f MiB' "$s" "$mbs" "$rss"; fi
}
single() {
    local v
    v="$(value "$1")"
    # shellcheck disable=SC2059 # the format comes from the table below
    if [[ -n $v ]]; then printf "$2" "$v"; fi
}

# measurement | key | format (none: an output cell) | target | ralph.sh | ralph-claude-code
rows=(
    "loop: ralph's own work per iteration|overhead_ms|%.2f ms|<= 2 ms|~7 ms|~2.5 s"
    "loop: ralph.sh's own work per iteration, measured alongside (no sleep)|ralph_sh_overhead_ms|%.2f ms|||"
    "loop: ralph's own work over ralph.sh's|overhead_vs_ralph_sh|%.2f|<= 0.33||"
    "loop: processes created per iteration|processes_per_iteration|%.0f|1|6|~480 (84 jq)"
    "loop: wall time per iteration, no-op agent|iteration_ms|%.2f ms|||"
    "loop: spawning the no-op agent directly|spawn_ms|%.2f ms|||"
    "sandbox: set-up per spawn|setup_ms|%.2f ms|<= 1 ms||"
    "sandbox: a confined spawn over a plain one|spawn_extra_ms|%.2f ms|||"
)
for mode in analyze live; do
    for kind in text stream_json json; do
        for mb in 1 100 1000; do
            case $kind in
                text) name="text" ;;
                stream_json) name="claude stream-json" ;;
                json) name="claude json" ;;
            esac
            size="$mb MB"
            [[ $mb == 1000 ]] && size="1 GB"
            target="" rcc=""
            [[ $mb == 100 && $mode == analyze ]] && target="<= 0.5 s"
            [[ $mb == 1000 ]] && target="<= 32 MiB RSS"
            [[ $mb == 100 && $mode == analyze && $kind != text ]] && rcc="38 s, 800 MB"
            label="ralph analyze"
            [[ $mode == live ]] && label="live agent run"
            rows+=("$label: $name $size|$mode.$kind.${mb}mb||$target||$rcc")
        done
    done
done
rows+=(
    "ralph status, 10,000 stories|status_10k_ms|%.1f ms|<= 30 ms||"
    "ralph --version (start-up)|version_ms|%.2f ms|<= 5 ms||"
    "8 stories, 2 s agent, 0.1 s gate: --jobs 1|parallel.jobs1_s|%.2f s||one at a time|one at a time"
    "the same, --jobs 4|parallel.jobs4_s|%.2f s|||"
    "--jobs 4 against the ideal (4.4 s)|parallel.ratio|%.2f x|<= 1.2 x||"
    "ralph's own work per merged story|parallel.merge_ms|%.1f ms|<= 20 ms||"
    "ralph worker --remote: 12 stories, 4 workers|remote.wall_s|%.2f s|||"
    "  against the ideal (6 s)|remote.ratio|%.2f x|<= 1.3 x||"
    "  delivery per story, no gate|remote.deliver_ms|%.0f ms|<= 150 ms||"
)

line() { printf '| %-46s | %-30s | %-13s | %-9s | %-18s |\n' "$@"; }
line "measurement" "ralph" "target" "ralph.sh*" "ralph-claude-code*"
line "$(printf -- '-%.0s' {1..46})" "$(printf -- '-%.0s' {1..30})" "-------------" \
    "---------" "------------------"
for row in "${rows[@]}"; do
    IFS='|' read -r name key fmt target sh rcc <<<"$row"
    if [[ -n $fmt ]]; then v="$(single "$key" "$fmt")"; else v="$(output "$key")"; fi
    [[ -z $v ]] && continue
    line "$name" "$v" "$target" "$sh" "$rcc"
done
echo "* reference figures of the bash drivers, from the issue; not measured here"
