#!/usr/bin/env bash
# Runs on the GPU machine, in one call: the kernel-time overhead of `gpusan run --mode check`
# next to native and compute-sanitizer memcheck, on the workload set of bench/workloads/
# (saxpy, 2-D stencil, tiled SGEMM, reduction, global-atomic histogram, random gather, 1000
# tiny launches, 20,000 allocations, a torch.compile'd model) and the third-party programs
# bench/third-party.sh prepared (PolyBench-ACC gemm/2mm/atax, Rodinia pathfinder; carry
# bench/work/third_party along, the GPU machine has no internet).
#
#   Usage: bench/check-overhead.sh DIR_WITH_GPUSAN      (DIR: gpusan + libgpusan_inject.so)
#
# Builds every workload with the machine's nvcc (-O3 -arch=sm_90 -lineinfo), runs each
# natively, under `DIR/gpusan run --mode check --report-json R.json` and under
# `compute-sanitizer --tool memcheck`, interleaved, for GPUSAN_BENCH_ROUNDS rounds (default
# 3; compute-sanitizer only in the first GPUSAN_BENCH_CS_ROUNDS of them when that is set),
# and writes $OUT/check-overhead.json (bench/check_overhead.py: medians, ratios, errors
# reported, correctness, the summary against the targets) and
# $OUT/check-overhead-logs.tar.gz. Everything stops by GPUSAN_BENCH_BUDGET_S (default 470 s,
# under the 8 minutes one call may take); the JSON holds whatever finished by then.
# Knobs: OUT (default /tmp/gpusan-check-overhead-out), GPUSAN_BENCH_ONLY (regex of
# workload names), NVCC, COMPUTE_SANITIZER, GPUSAN_BENCH_COUNT=1 (after the timed rounds, one
# untimed run per workload under `gpusan run --mode check --count-checks`: the fractions of
# checks the optimizations remove, dynamic and static, in check_counts of each workload and
# a table column; leave time for it in the budget), GPUSAN_BENCH_BASELINE=DIR (another build's
# gpusan + libgpusan_inject.so, run in check mode in the same rounds: gpusan / baseline per
# workload, for changes that must cost nothing).
set -uo pipefail

t0=$(date +%s)
budget=${GPUSAN_BENCH_BUDGET_S:-470}
deadline=$((t0 + budget))
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ $# -lt 1 ] || ! dir=$(cd "$1" 2>/dev/null && pwd); then
  echo "usage: bench/check-overhead.sh DIR_WITH_GPUSAN" >&2
  exit 2
fi
out=${OUT:-/tmp/gpusan-check-overhead-out}
mkdir -p "$out"
work=$(mktemp -d /tmp/gpusan-check-overhead.XXXXXX)
export PATH="/usr/local/cuda/bin:$PATH"
export PYTHONUNBUFFERED=1
cs=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/compute-sanitizer/compute-sanitizer)}
[ -x "$dir/gpusan" ] || echo "check-overhead: WARNING: $dir/gpusan missing: gpusan runs will be recorded as skipped" >&2
[ -d "$repo/bench/work/third_party" ] ||
  echo "check-overhead: WARNING: no bench/work/third_party (run bench/third-party.sh and carry it): no third-party programs" >&2

only=()
[ -n "${GPUSAN_BENCH_ONLY:-}" ] && only=(--only "$GPUSAN_BENCH_ONLY")
[ "${GPUSAN_BENCH_COUNT:-0}" = 1 ] && only+=(--count)
[ -n "${GPUSAN_BENCH_BASELINE:-}" ] && only+=(--baseline-gpusan "$(cd "$GPUSAN_BENCH_BASELINE" && pwd)/gpusan")
# The outer timeout is a backstop only: the Python side stops starting runs before the
# deadline and rewrites the JSON after each run.
timeout $((deadline - $(date +%s) + 20)) python3 "$repo/bench/check_overhead.py" \
  --gpusan "$dir/gpusan" --compute-sanitizer "$cs" --nvcc "${NVCC:-nvcc}" \
  --out "$out/check-overhead.json" --rounds "${GPUSAN_BENCH_ROUNDS:-3}" \
  ${GPUSAN_BENCH_CS_ROUNDS:+--cs-rounds "$GPUSAN_BENCH_CS_ROUNDS"} --deadline "$deadline" \
  --work "$work" --table-out "$out/check-overhead-table.txt" "${only[@]}"
rc=$?
tar czf "$out/check-overhead-logs.tar.gz" -C "$work" logs 2>/dev/null
echo "check-overhead: exit $rc after $(( $(date +%s) - t0 )) s; outputs in $out"
exit "$rc"
