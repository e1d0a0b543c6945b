#!/usr/bin/env bash
# Zero false positives of `gpusan run --mode canary` on real, clean programs (issue 17):
# every clean C++ case of tests/cases, bench/canary/programs.cu (fork before and after CUDA,
# CUDA graphs captured in global mode with memory nodes and a reset, 8 threads allocating,
# pitched/3D/managed/mapped/pool allocations written to their last byte), a Triton, a CuPy, a
# numba-cuda (numpy 2.2.6 from the carried bench/work/wheels), a JAX program and PyTorch
# blocks churned on two streams (torch_churn_prog.py: the reuse rule's worst case); each
# natively and under canary mode. ok: every program that runs natively is silent under
# canary mode, exits as natively and prints native's output. bench/canary/programs_case.py
# runs and judges; without a GPU (or with CANARY_DRY=1) it builds and writes `skipped`.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${WORK:=$(mktemp -d /tmp/canary_programs.XXXXXX)}" "${RESULT:=$WORK/result.json}" "${NVCC:=nvcc}"
mkdir -p "$WORK"
export PYTHONUNBUFFERED=1
timeout -k 3 57 python3 "$here/../canary/programs_case.py" --gpusan "${GPUSAN:-}" --nvcc "$NVCC" --work "$WORK" \
  --result "$RESULT"
rc=$?
[ -s "$RESULT" ] || echo "{\"case\": \"canary_programs\", \"ok\": false, \"notes\": \"programs_case.py wrote nothing (exit $rc)\"}" >"$RESULT"
exit 0
