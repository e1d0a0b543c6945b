#!/usr/bin/env bash
# The next GPU call for issue 17, in order of what matters most, each part under its own
# time limit so a slow part cannot starve the rest. Writes everything under $OUT and a log,
# $OUT/next-call.log. Fits the 600 s a call may take (about 580 s in all).
#
#   bench/next-call.sh DIR    DIR: gpusan, libgpusan_inject.so, containment (release, stripped)
#
# 1. reliability, canary cases: the one-launch batch kernel finds what it must, and no
#    false positive on the clean programs (its first run on a GPU)                 ~140 s
#    and the GMOD cases again with the batch kernel over several blocks (wide_batch)  ~45 s
# 2. the Transformer's guard cost (call 19: the guard's kernels): native, canary, the two
#    kernels of before, an interval of 4 ms, no guard kernels, empty guard kernels (the
#    guard's driver calls without its GPU work), the batch kernel over one block per
#    256 entries; 3 rounds, 100 steps                                               ~275 s
# 3. bench/fence/throughput.sh 16: 16 tenants' throughput and memory under time-slicing,
#    MPS and gpusan serve (issue 18; with the tenant's launch queue)                 ~40 s
#    then bench/fence/tenants.sh 4: the fenced tenant's host cost per launch, queued,
#    and the containment example                                                    ~30 s
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
  OUT=${PART_OUT:-$out} timeout "$limit" "$@" >> "$log" 2>&1
  echo "== rc=$? after $(( $(date +%s) - t0 ))s" >> "$log"
}
GPUSAN_RELIABILITY_CASE_S=60 GPUSAN_RELIABILITY_ONLY='canary_gmod|canary_programs|canary_torch' \
  part 140 "$repo/bench/reliability.sh" "$dir"
# The reliability logs are large: the call brings back a limited number of files.
rm -f "$out"/reliability-logs.tar.gz
# The batch kernel over several blocks finds the GMOD cases too (its JSON kept apart).
mkdir -p "$out/wide"
PART_OUT=$out/wide GPUSAN_CANARY_DIAG=wide_batch GPUSAN_RELIABILITY_CASE_S=40 GPUSAN_RELIABILITY_ONLY='canary_gmod' \
  part 45 "$repo/bench/reliability.sh" "$dir"
rm -f "$out"/wide/reliability-logs.tar.gz
GPUSAN_CANARY_ONLY='torch_transformer' GPUSAN_CANARY_ROUNDS=3 GPUSAN_CANARY_TORCH_STEPS=100 GPUSAN_CANARY_BUDGET_S=275 \
  GPUSAN_CANARY_VARIANTS='two=GPUSAN_CANARY_DIAG=two_kernels;i4=--canary-interval-ms 4;nok=GPUSAN_CANARY_DIAG=no_kernels;empty=GPUSAN_CANARY_DIAG=empty_kernels;wide=GPUSAN_CANARY_DIAG=wide_batch' \
  part 290 "$repo/bench/canary-overhead.sh" "$dir"
rm -f "$out"/canary-overhead-logs.tar.gz
part 60 "$repo/bench/fence/throughput.sh" "$dir" 16 5
part 45 "$repo/bench/fence/tenants.sh" "$dir" 4
ls -la "$out" >> "$log"
tail -40 "$log"
