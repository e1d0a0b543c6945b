#!/usr/bin/env bash
# GMOD's Table 3 under `gpusan run --mode canary` (issue 17): single, sequential and
# concurrent kernels overflowing a cudaMalloc buffer past its end, or underflowing into its
# lower neighbour, with clean twins, built with PTX and as machine code only (no PTX:
# `cuobjdump -lptx` checked), natively and under canary mode; device-malloc variants as
# known gaps; the overflow right after the cudaMallocs (the plan's known window) recorded;
# detection latency (the scan's %globaltimer minus the overflowing thread's, recorded, not
# judged) of the machine-code build at --canary-interval-ms 1, 0.1 and 0.05 (1 and 5 if
# fractions are refused). bench/canary/gmod.py does the work and the judging (see its
# docstring); bench/canary/gmod_table3.cu is the program.
# ok: every coarse bug reported as canary_overwrite (nothing else), naming the allocation
# (and the next one for the underflow), in both builds; every clean twin silent, exit 0,
# native's output, the guard having scanned; the machine-code build holds no PTX.
# Without a GPU (or with CANARY_DRY=1) it builds, checks the builds and writes a result
# saying `skipped`.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${WORK:=$(mktemp -d /tmp/canary_gmod.XXXXXX)}" "${RESULT:=$WORK/result.json}" "${NVCC:=nvcc}"
mkdir -p "$WORK"
export PYTHONUNBUFFERED=1
timeout -k 3 57 python3 "$here/../canary/gmod.py" --gpusan "${GPUSAN:-}" --nvcc "$NVCC" --work "$WORK" \
  --result "$RESULT"
rc=$?
[ -s "$RESULT" ] || echo "{\"case\": \"canary_gmod\", \"ok\": false, \"notes\": \"gmod.py wrote nothing (exit $rc)\"}" >"$RESULT"
exit 0
