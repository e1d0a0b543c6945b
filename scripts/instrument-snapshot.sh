#!/usr/bin/env bash
# Instruments every PTX the project knows (tests/corpus, the nvcc -O3 and -lineinfo PTX of
# bench/workloads and tests/cases) with every configuration the runtime uses, into OUT_DIR,
# with the passes of the checkout in SRC_DIR (default: this one). Two snapshots compared
# with `diff -r` show whether a change of the passes changed any instrumented byte.
# Compare builds with the same inputs: nvcc writes the source's path into the PTX, so run
# this from one checkout and name the other as SRC_DIR. The PTX is made once
# (bench/work/snapshot-ptx; delete it after changing a case or workload).
#
#   scripts/instrument-snapshot.sh OUT_DIR [SRC_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$1"
src="${2:-$root}"
scripts/setup-toolchain.sh >/dev/null 2>&1 || "$root/scripts/setup-toolchain.sh" >/dev/null
nvcc="$root/.toolchain/nvidia/cu13/bin/nvcc"
[ -x "$nvcc" ] || nvcc="$(ls "$root"/.toolchain/*/bin/nvcc "$root"/.toolchain/nvidia/*/bin/nvcc 2>/dev/null | head -1)"
ptx="$root/bench/work/snapshot-ptx"
mkdir -p "$ptx"
for cu in "$root"/bench/workloads/*.cu "$root"/tests/cases/*.cu; do
  name="$(basename "$(dirname "$cu")")-$(basename "$cu" .cu).ptx"
  [ -s "$ptx/$name" ] && continue
  (cd "$(dirname "$cu")" && "$nvcc" -O3 -arch=sm_90 -lineinfo -ptx -o "$ptx/$name" "$cu" 2>/dev/null) || rm -f "$ptx/$name"
done
cp "$root/crates/passes/examples/snapshot.rs" "$src/crates/passes/examples/snapshot.rs" 2>/dev/null || true
(cd "$src" && cargo run -q --release -p gpusan-passes --example snapshot -- "$out" \
  "$root"/tests/corpus/ptx/*.ptx "$root"/tests/corpus/triton/*.ptx "$ptx"/*.ptx)
