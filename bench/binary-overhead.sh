#!/usr/bin/env bash
# The binary route's overhead (issue 14), on the GPU machine, in one call: the check-overhead
# workloads (bench/workloads/, and the third-party programs when bench/work/third_party was
# carried) built machine-code-only (-gencode arch=compute_90,code=sm_90) and with PTX, and
# the PyTorch MLP and Transformer training steps (bench/binary/torch_steps.py), each run
# natively, under `gpusan run --mode check --route binary`, under `--route ptx` (PTX build)
# and under compute-sanitizer memcheck, interleaved (bench/binary_overhead.py).
#
#   Usage: bench/binary-overhead.sh DIR_WITH_GPUSAN      (DIR: gpusan + libgpusan_inject.so)
#
# Writes $OUT/binary-overhead.json (medians, ratios to native, compute-sanitizer over binary,
# geomeans against the targets: binary <= 3x native, >= 10x faster than compute-sanitizer;
# the binary route's coverage and false positives; the torch steps' bit-identical check),
# $OUT/binary-overhead-table.txt and $OUT/binary-overhead-logs.tar.gz. Everything stops by
# GPUSAN_BINOVH_BINARY_ARGS (more options for the binary tool, e.g. '--binary-kinds none'),
# GPUSAN_BINOVH_TOOLS (e.g. native,binary), GPUSAN_BINOVH_TAG (output file suffix),
# GPUSAN_BINOVH_BUDGET_S (default 420 s: room in a 600 s call for the machine's start and
# the transfers); the JSON holds whatever finished. Knobs: OUT, GPUSAN_BINOVH_ROUNDS (2),
# GPUSAN_BINOVH_CS_ROUNDS (1), GPUSAN_BINOVH_TORCH_STEPS (10), GPUSAN_BINOVH_ONLY (regex of
# workload names), GPUSAN_BINOVH_NO_TORCH=1, GPUSAN_BINOVH_DRY=1 (write the plan, run
# nothing: works without a GPU), NVCC, COMPUTE_SANITIZER.
set -uo pipefail

t0=$(date +%s)
budget=${GPUSAN_BINOVH_BUDGET_S:-420}
deadline=$((t0 + budget))
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ $# -lt 1 ] || ! dir=$(cd "$1" 2>/dev/null && pwd); then
  echo "usage: bench/binary-overhead.sh DIR_WITH_GPUSAN" >&2
  exit 2
fi
out=${OUT:-/tmp/gpusan-binary-overhead-out}
mkdir -p "$out"
work=$(mktemp -d /tmp/gpusan-binary-overhead.XXXXXX)
export PATH="/usr/local/cuda/bin:$PATH"
export PYTHONUNBUFFERED=1
cs=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/compute-sanitizer/compute-sanitizer)}
[ -x "$dir/gpusan" ] || echo "binary-overhead: WARNING: $dir/gpusan missing: gpusan runs will be recorded as skipped" >&2

opts=(--rounds "${GPUSAN_BINOVH_ROUNDS:-2}" --cs-rounds "${GPUSAN_BINOVH_CS_ROUNDS:-1}"
      --torch-steps "${GPUSAN_BINOVH_TORCH_STEPS:-10}")
[ -n "${GPUSAN_BINOVH_ONLY:-}" ] && opts+=(--only "$GPUSAN_BINOVH_ONLY")
[ "${GPUSAN_BINOVH_NO_TORCH:-0}" = 1 ] && opts+=(--no-torch)
[ "${GPUSAN_BINOVH_DRY:-0}" = 1 ] && opts+=(--dry-run)
[ -n "${GPUSAN_BINOVH_BINARY_ARGS:-}" ] && opts+=(--binary-args "$GPUSAN_BINOVH_BINARY_ARGS")
[ -n "${GPUSAN_BINOVH_TOOLS:-}" ] && opts+=(--tools "$GPUSAN_BINOVH_TOOLS")
tag=${GPUSAN_BINOVH_TAG:-}  # a suffix for the output files: two configurations in one call
# The outer timeout is a backstop only: the Python side stops starting runs before the
# deadline and rewrites the JSON after each run.
timeout $((deadline - $(date +%s) + 20)) python3 "$repo/bench/binary_overhead.py" \
  --gpusan "$dir/gpusan" --compute-sanitizer "$cs" --nvcc "${NVCC:-nvcc}" \
  --out "$out/binary-overhead$tag.json" --deadline "$deadline" --work "$work" \
  --table-out "$out/binary-overhead$tag-table.txt" "${opts[@]}"
rc=$?
tar czf "$out/binary-overhead$tag-logs.tar.gz" -C "$work" logs 2>/dev/null
echo "binary-overhead: exit $rc after $(( $(date +%s) - t0 )) s; outputs in $out"
exit "$rc"
