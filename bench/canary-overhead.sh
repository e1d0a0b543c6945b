#!/usr/bin/env bash
# Runs on the GPU machine, in one call: what `gpusan run --mode canary` costs (issue 17),
# native and canary in the same call, alternating by round (bench/canary_overhead.py): the
# CUDA workloads of bench/check_overhead.py (saxpy, stencil2d, sgemm, reduction, histogram,
# gather, 1000 tiny launches, 20,000 live allocations), the PyTorch MLP and Transformer
# training steps (bench/binary/torch_steps.py) and a torch.compile'd model
# (bench/workloads/torch_compile.py). Medians over rounds of each program's own median;
# canary / native per workload, geomean and worst against <= 1.01 and <= 1.03; false
# positives, correctness, bit-identical training, many_allocs' memory, the guard's counters.
#
#   Usage: bench/canary-overhead.sh DIR_WITH_GPUSAN      (DIR: gpusan + libgpusan_inject.so)
#
# Writes $OUT/canary-overhead.json, $OUT/canary-overhead-table.txt and
# $OUT/canary-overhead-logs.tar.gz; stops starting runs by GPUSAN_CANARY_BUDGET_S (default
# 400 s; the JSON is rewritten after every run, so a cut run leaves what finished).
# Knobs: OUT (default /tmp/gpusan-canary-overhead-out), GPUSAN_CANARY_ROUNDS (rounds of the
# PyTorch workloads, ~15 s a run: default 3), GPUSAN_CANARY_CUDA_ROUNDS (of the CUDA ones, ~1 s
# a run: default 9),
# GPUSAN_CANARY_ONLY (regex of workload names), GPUSAN_CANARY_VARIANTS ('NAME=OPTIONS;...': more
# canary-mode runs with these gpusan options, each a tool with its own ratio to native), GPUSAN_CANARY_INTERVAL_MS (passed as
# --canary-interval-ms; default: gpusan's), GPUSAN_CANARY_TORCH_STEPS (30),
# GPUSAN_BENCH_CPUS (the taskset -c list every run is pinned to; default 4 CPUs of GPU 0's
# affinity, 'none' unpinned), GPUSAN_CANARY_THIRD_PARTY=1 (also the third-party programs of bench/work/third_party,
# when carried), NVCC, GPUSAN_CANARY_DRY=1 (no GPU: the plan only), GPUSAN_CANARY_PYTHON (the
# PyTorch workloads' python; default python3).
set -uo pipefail
t0=$(date +%s)
budget=${GPUSAN_CANARY_BUDGET_S:-400}
deadline=$((t0 + budget))
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ $# -lt 1 ] || ! dir=$(cd "$1" 2>/dev/null && pwd); then
  echo "usage: bench/canary-overhead.sh DIR_WITH_GPUSAN" >&2
  exit 2
fi
out=${OUT:-/tmp/gpusan-canary-overhead-out}
mkdir -p "$out"
work=$(mktemp -d /tmp/gpusan-canary-overhead.XXXXXX)
export PATH="/usr/local/cuda/bin:$PATH"
export PYTHONUNBUFFERED=1
[ -x "$dir/gpusan" ] || echo "canary-overhead: WARNING: $dir/gpusan missing: canary runs will be recorded as skipped" >&2
opts=(--rounds "${GPUSAN_CANARY_ROUNDS:-3}" --cuda-rounds "${GPUSAN_CANARY_CUDA_ROUNDS:-9}"
  --torch-steps "${GPUSAN_CANARY_TORCH_STEPS:-30}")
[ -n "${GPUSAN_CANARY_ONLY:-}" ] && opts+=(--only "$GPUSAN_CANARY_ONLY")
[ -n "${GPUSAN_CANARY_INTERVAL_MS:-}" ] && opts+=(--interval-ms "$GPUSAN_CANARY_INTERVAL_MS")
[ "${GPUSAN_CANARY_THIRD_PARTY:-0}" = 1 ] && opts+=(--third-party "$repo/bench/work/third_party")
[ "${GPUSAN_CANARY_DRY:-0}" = 1 ] && opts+=(--dry)
# GPUSAN_CANARY_VARIANTS: 'NAME=OPTIONS;NAME=OPTIONS': more canary runs, each its own column.
IFS=';' read -r -a variants <<<"${GPUSAN_CANARY_VARIANTS:-}"
for v in "${variants[@]}"; do [ -n "$v" ] && opts+=(--variant "$v"); done
[ -n "${GPUSAN_CANARY_PYTHON:-}" ] && opts+=(--python "$GPUSAN_CANARY_PYTHON")
# The outer timeout is a backstop: the Python side starts no run the deadline would cut.
timeout $((deadline - $(date +%s) + 20)) python3 "$repo/bench/canary_overhead.py" \
  --gpusan "$dir/gpusan" --nvcc "${NVCC:-nvcc}" --out "$out/canary-overhead.json" --deadline "$deadline" \
  --work "$work" --table-out "$out/canary-overhead-table.txt" "${opts[@]}"
rc=$?
tar czf "$out/canary-overhead-logs.tar.gz" -C "$work" logs 2>/dev/null
echo "canary-overhead: exit $rc after $(( $(date +%s) - t0 )) s; outputs in $out"
exit "$rc"
