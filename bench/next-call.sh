#!/usr/bin/env bash
# The next GPU call for issues 17 and 18, in order of what matters most, each part under its
# own time limit so a slow part cannot starve the rest. Writes everything under $OUT and a
# log, $OUT/next-call.log. Fits the 600 s a call may take (about 480 s in all).
#
#   bench/next-call.sh DIR    DIR: gpusan, libgpusan_inject.so, containment (release, stripped)
#
# 1. The Transformer step at the 4 ms default, every run pinned to the same CPUs
#    (bench/canary_overhead.py's --cpus): 6 rounds of 50 steps, against 1 ms and no guard
#    kernels; more processes with fewer steps, since the spread is between processes
#    (calls 18-21)                                                                 ~240 s
# 2. bench/fence/throughput.sh 16: the manager's memory with 8 MiB segments, throughput
#    against MPS and time-slicing                                                  ~40 s
# 3. bench/fence/mps.sh 3: the faulting neighbour, the victim's rate, host µs/launch ~40 s
# 4. the containment example: fenced bulk copies and a tensor copy (TMA) through a map the
#    manager made, at first run on a GPU; maps on another tenant's memory refused    ~10 s
# 5. gpusan trace's first run on a GPU: the PyTorch MLP's steps, every warp's accesses
#    through the binary route, characterized and swept (HW-only MLB)               ~90 s
# 6. the canary reliability cases at the 4 ms default                              ~140 s
#
# NEXT_CALL_SHORT=1 (a session with little device time, about 300 s): part 1 with 3 rounds,
# parts 2-5, not part 6. NEXT_CALL_SHORT=2 (about 150 s): parts 3-5 only.
set -uo pipefail
dir=${1:?usage: bench/next-call.sh DIR}
short=${NEXT_CALL_SHORT:-0}
out=${OUT:-/tmp/out}
repo=$(cd "$(dirname "$0")/.." && pwd)
log=$out/next-call.log
mkdir -p "$out"
{ date; nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1; nvidia-smi topo -m 2>&1; cat "$dir/COMMIT" 2>/dev/null; } > "$log"
part() {
  local limit=$1; shift
  echo "== $* (limit ${limit}s)" >> "$log"
  local t0; t0=$(date +%s)
  OUT=${PART_OUT:-$out} timeout "$limit" "$@" >> "$log" 2>&1
  echo "== rc=$? after $(( $(date +%s) - t0 ))s" >> "$log"
}
rounds=6 budget=240
[ "$short" = 1 ] && rounds=3 budget=110
[ "$short" = 2 ] || GPUSAN_CANARY_ONLY='torch_transformer' GPUSAN_CANARY_ROUNDS=$rounds GPUSAN_CANARY_TORCH_STEPS=50 GPUSAN_CANARY_BUDGET_S=$budget \
  GPUSAN_CANARY_VARIANTS='i1=--canary-interval-ms 1;nok=GPUSAN_CANARY_DIAG=no_kernels' \
  part $(( budget + 10 )) "$repo/bench/canary-overhead.sh" "$dir"
rm -f "$out"/canary-overhead-logs.tar.gz
[ "$short" = 2 ] || part 45 "$repo/bench/fence/throughput.sh" "$dir" 16 5
part 45 "$repo/bench/fence/mps.sh" "$dir" 3
echo "== containment (limit 60s)" >> "$log"
timeout 60 "$dir/containment" > "$out/containment.json" 2>> "$log"
echo "== rc=$?" >> "$log"
# The MLP alone: a traced run waits for every kernel and drains its records.
echo "== trace mlp (limit 80s)" >> "$log"
timeout 80 "$dir/gpusan" trace -o "$out/trace-torch-mlp.gstrace" -- python3 "$repo/bench/binary/torch_steps.py" mlp --steps 2 --warmup 1 >> "$log" 2>&1
echo "== rc=$?" >> "$log"
ls -la "$out"/trace-torch-mlp.gstrace* >> "$log" 2>&1
timeout 30 "$dir/gpusan" sim characterize "$out/trace-torch-mlp.gstrace" --json "$out/characterize-torch-mlp.json" >> "$log" 2>&1
for mode in hw-only derived; do
  timeout 40 "$dir/gpusan" sim mlb "$out/trace-torch-mlp.gstrace" --mode "$mode" --json "$out/mlb-torch-mlp-$mode.json" --svg "$out/mlb-torch-mlp-$mode.svg" >> "$log" 2>&1
done
rm -f "$out"/trace-torch-mlp.gstrace*
[ "$short" != 0 ] || GPUSAN_RELIABILITY_CASE_S=60 GPUSAN_RELIABILITY_ONLY='canary_gmod|canary_programs|canary_torch' \
  part 140 "$repo/bench/reliability.sh" "$dir"
# The reliability logs are large: the call brings back a limited number of files.
rm -f "$out"/reliability-logs.tar.gz
ls -la "$out" >> "$log"
tail -40 "$log"
