#!/usr/bin/env bash
# Fuzz smoke run: builds every fuzz target and runs each for a few seconds
# over its seeds and past crashes, so CI notices a target that no longer
# builds or an input that crashes again. Stable Rust is enough:
# RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass the -Z flags it needs.
#
#   bash fuzz/smoke.sh                    (FUZZ_SECONDS=5 per target)
#   FUZZ_SECONDS=300 bash fuzz/smoke.sh   (a real session)
set -euo pipefail
cd "$(dirname "$0")"
seconds="${FUZZ_SECONDS:-5}"

if ! cargo fuzz --version >/dev/null 2>&1; then
    # Pinned: a newer cargo-fuzz may need a newer toolchain than CI has.
    cargo install --locked cargo-fuzz --version 0.13.2
fi
export RUSTC_BOOTSTRAP=1

# Unoptimised and without AddressSanitizer: this builds in about half the
# time of cargo-fuzz's default, and the parsers are safe Rust, where ASan
# has nothing to find that a panic would not show.
flags=(--dev --sanitizer none)
# No debug info either: a panic still names its file and line.
export CARGO_PROFILE_DEV_DEBUG=0
cargo fuzz build "${flags[@]}"
for target in $(cargo fuzz list); do
    dirs=("corpus/$target")
    for d in "seeds/$target" "regressions/$target"; do
        [[ -d $d ]] && dirs+=("$d")
    done
    mkdir -p "corpus/$target"
    echo "fuzz smoke: $target for ${seconds}s"
    # The progress lines are noise in a CI log; a crash prints in full.
    set +e
    cargo fuzz run "${flags[@]}" "$target" "${dirs[@]}" -- \
        -max_total_time="$seconds" -max_len=8192 -print_final_stats=1 2>&1 \
        | grep -v -E '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse)'
    status=${PIPESTATUS[0]}
    set -e
    if [[ $status -ne 0 ]]; then
        echo "fuzz smoke: $target failed; the input is in fuzz/artifacts/$target/ (fuzz/README.md)" >&2
        exit 1
    fi
done
echo "fuzz smoke: every target ran clean"
