#!/usr/bin/env bash
# Fuzzes here, for as long as asked: builds the fuzz targets (scripts/fuzz-build.sh, stable
# Rust, no cargo-fuzz) and runs them with bench/fuzz-long.sh, which goes on past a crash,
# hang or out-of-memory and counts each.
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
#   SECONDS  wall time (default 60); the targets share the cores (FUZZ_JOBS, default all)
#   TARGET   default: every target of fuzz/targets.sh
# Environment:
#   OUT              summary, logs and failing inputs (default fuzz/artifacts/run)
#   FUZZ_SANITIZER   none (default) or address: AddressSanitizer too, for the `unsafe` code
#                    inside dependencies (stable rustc takes -Zsanitizer only with
#                    RUSTC_BOOTSTRAP=1, which fuzz-build.sh sets; the runtime ships with
#                    the toolchain)
#
# CI runs scripts/fuzz-ci.sh instead (every target for 30 s, failing at the first crash).
# Replay an input: fuzz/target/<host>/release/TARGET FILE; minimize a crash:
# fuzz/target/<host>/release/TARGET -minimize_crash=1 -runs=100000 FILE.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
secs=${1:-60}
shift || true
if [ $# -gt 0 ]; then
  export FUZZ_TARGETS="$*"
fi
bin=$(scripts/fuzz-build.sh)
export OUT=${OUT:-$root/fuzz/artifacts/run}
exec bench/fuzz-long.sh "$bin" "$secs" "$@"
