#!/usr/bin/env bash
# One GPU call for issues 17 and 18, in order of what matters most, each part under its own
# time limit so a slow part cannot starve the rest. Writes everything under $OUT and a log,
# $OUT/next-call.log. Fits the 600 s a call may take (about 555 s in all).
#
#   bench/next-call.sh DIR    DIR: gpusan, libgpusan_inject.so, containment (release, stripped)
#
# 1. bench/canary/launch-cost.sh: where canary's 0.8 µs per launch goes (issue 17)     ~70 s
# 2. bench/fence/many.sh 16: 16 tenants, one faulting, gpusan serve and MPS, recovery   ~60 s
# 3. bench/fence/tenants.sh 4: 4 tenants, containment with reads and a TMA copy         ~40 s
# 4. bench/fence/mps.sh 3: a faulting neighbour, time-slicing, MPS, gpusan serve       ~70 s
# 5. bench/canary-overhead.sh: PyTorch steps, 3 rounds, native and canary             ~200 s
# 6. bench/reliability.sh, canary cases: no false positive came back                   ~85 s
set -uo pipefail
dir=${1:?usage: bench/next-call.sh DIR}
out=${OUT:-/tmp/out}
repo=$(cd "$(dirname "$0")/.." && pwd)
log=$out/next-call.log
mkdir -p "$out"
{ date; nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1; cat "$dir/COMMIT" 2>/dev/null; } > "$log"
part() {
  local limit=$1; shift
  echo "== $* (limit ${limit}s)" >> "$log"
  local t0; t0=$(date +%s)
  OUT=$out timeout "$limit" "$@" >> "$log" 2>&1
  echo "== rc=$? after $(( $(date +%s) - t0 ))s" >> "$log"
}
part 100 "$repo/bench/canary/launch-cost.sh" "$dir" 5
part 70 "$repo/bench/fence/many.sh" "$dir" 16 5
part 45 "$repo/bench/fence/tenants.sh" "$dir" 4
part 75 "$repo/bench/fence/mps.sh" "$dir" 3
GPUSAN_CANARY_ONLY='torch_mlp|torch_transformer' GPUSAN_CANARY_ROUNDS=3 GPUSAN_CANARY_BUDGET_S=160 \
  part 185 "$repo/bench/canary-overhead.sh" "$dir"
GPUSAN_RELIABILITY_CASE_S=45 GPUSAN_RELIABILITY_ONLY='canary_programs|canary_torch' \
  part 85 "$repo/bench/reliability.sh" "$dir"
ls -la "$out" >> "$log"
tail -60 "$log"
