#!/usr/bin/env bash
# Builds every fuzz target of fuzz/ (libFuzzer binaries) on stable Rust with plain cargo:
# no cargo-fuzz to install, no nightly. The flags are those `cargo fuzz build
# --sanitizer none` passes (cargo-fuzz's src/project.rs): SanitizerCoverage through the
# stable `sancov-module` LLVM pass with inline 8-bit counters, the PC table, comparison
# tracing and stack depth, branch folding off, the `fuzzing` cfg, debug assertions (and
# so overflow checks), one codegen unit. `--target` keeps the flags off build scripts and
# proc macros. The targets are safe Rust over safe-Rust crates, so no sanitizer is needed
# to find what they look for: panics, hangs, unbounded memory.
#
# Usage: scripts/fuzz-build.sh [DIR]
#   Builds into fuzz/target/<host>/release/. With DIR, also copies the binaries there,
#   stripped, for bench/fuzz-long.sh on a machine without Rust (they need only libc,
#   libm, libgcc_s and libstdc++, as `ldd` shows); the dictionaries and seeds come from
#   the repository there (fuzz/, fuzz/seed-corpus.sh).
# Prints the folder of the binaries on standard output.
# Environment:
#   FUZZ_TARGETS    default: every target of fuzz/targets.sh
#   FUZZ_SANITIZER  none (default) or address: AddressSanitizer too, for the `unsafe` code
#                   inside dependencies, into fuzz/target/asan/. Stable rustc takes
#                   -Zsanitizer only with RUSTC_BOOTSTRAP=1, set here; the ASan runtime
#                   ships with the stable toolchain.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=../fuzz/targets.sh
source fuzz/targets.sh
read -r -a targets <<<"${FUZZ_TARGETS:-${FUZZ_ALL_TARGETS[*]}}"

triple=$(rustc -vV | sed -n 's/^host: //p')
flags=(
  -Cpasses=sancov-module
  -Cllvm-args=-sanitizer-coverage-level=4
  -Cllvm-args=-sanitizer-coverage-inline-8bit-counters
  -Cllvm-args=-sanitizer-coverage-pc-table
  -Cllvm-args=-sanitizer-coverage-trace-compares
  -Cllvm-args=-sanitizer-coverage-stack-depth
  -Cllvm-args=-simplifycfg-branch-fold-threshold=0
  --cfg fuzzing
  -Cdebug-assertions
  -Ccodegen-units=1
)
target_dir=$root/fuzz/target
case ${FUZZ_SANITIZER:-none} in
  none) ;;
  address)
    flags+=(-Zsanitizer=address)
    export RUSTC_BOOTSTRAP=1
    target_dir=$root/fuzz/target/asan
    ;;
  *)
    echo "fuzz-build: FUZZ_SANITIZER is none or address" >&2
    exit 2
    ;;
esac
bins=()
for t in "${targets[@]}"; do bins+=(--bin "$t"); done
# Not --locked: fuzz/Cargo.lock pins what the main workspace's lock pins, and a dependency
# the tested crates gain or drop is added or removed at the next build (commit the change)
# rather than failing CI.
RUSTFLAGS="${flags[*]} ${RUSTFLAGS:-}" cargo build --release --target-dir "$target_dir" \
  --manifest-path fuzz/Cargo.toml --target "$triple" "${bins[@]}" >&2
out="$target_dir/$triple/release"

if [ $# -gt 0 ]; then
  dest=$1
  mkdir -p "$dest"
  for t in "${targets[@]}"; do
    # --strip-debug keeps the symbol table, so a crash's backtrace still names functions.
    strip --strip-debug -o "$dest/$t" "$out/$t"
  done
  out=$(cd "$dest" && pwd)
fi
echo "$out"
