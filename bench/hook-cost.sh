#!/usr/bin/env bash
# The cost of gpusan's hooks on a PyTorch training step in api mode (issue 15: <= 5%), on the
# GPU machine, in one call: bench/hook_cost.py runs bench/binary/torch_steps.py (Transformer,
# >= 50 timed steps a process) natively, under `gpusan run --mode api` and under
# `gpusan run --mode api --python-hooks off`, one process at a time, in rounds; the verdict
# is on the median of the rounds' paired ratios gpusan/native (bootstrap interval, min, max).
#
#   bench/hook-cost.sh DIR          DIR holds the prebuilt `gpusan` and `libgpusan_inject.so`
#
# Writes $OUT/hook-cost.json. Knobs: GPUSAN_HOOKCOST_ROUNDS (8), GPUSAN_HOOKCOST_STEPS (60),
# GPUSAN_HOOKCOST_DEADLINE_S (200: no round starts that would end past it, from the start),
# GPUSAN_HOOKCOST_MODEL (transformer), GPUSAN_HOOKCOST_DRY=1 (plans and writes the document,
# runs nothing). Nothing is pinned or set that would change the native run's speed; the
# gpusan runs share one cache folder of their own (the allocator shim built once, in the
# warm-up, which is not measured).
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ $# -lt 1 ] || ! dir=$(cd "$1" 2>/dev/null && pwd); then
  echo "usage: bench/hook-cost.sh DIR   (DIR: the gpusan binary and libgpusan_inject.so)" >&2
  exit 2
fi
out=${OUT:-/tmp/gpusan-hook-cost-out}
mkdir -p "$out"
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1
work=$(mktemp -d /tmp/gpusan-hook-cost.XXXXXX)
export GPUSAN_CACHE_DIR="$work/cache"
mkdir -p "$GPUSAN_CACHE_DIR" && chmod 700 "$GPUSAN_CACHE_DIR"
opts=(--gpusan "$dir/gpusan" --rounds "${GPUSAN_HOOKCOST_ROUNDS:-8}" --steps "${GPUSAN_HOOKCOST_STEPS:-60}"
  --deadline-s "${GPUSAN_HOOKCOST_DEADLINE_S:-200}" --model "${GPUSAN_HOOKCOST_MODEL:-transformer}"
  --out "$out/hook-cost.json")
dry=${GPUSAN_HOOKCOST_DRY:-0}
if [ "$dry" != 1 ] && ! timeout 60 python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  echo "hook-cost: no PyTorch with a CUDA device here: a dry run instead" >&2
  dry=1
fi
[ "$dry" = 1 ] && opts+=(--dry)
python3 "$repo/bench/hook_cost.py" "${opts[@]}" >"$work/stdout.json"
rc=$?
echo "hook-cost: $out/hook-cost.json (rc $rc)" >&2
exit $rc
