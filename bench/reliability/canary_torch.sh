#!/usr/bin/env bash
# PyTorch with its caching allocator on, under `gpusan run --mode canary` (issue 17): a
# custom op built by load_inline as sm_90 machine code only writes one float past a
# 1000-float tensor, into the 96 bytes of slack of its 4096-byte block (the pool block's
# tail canary), 20 ms after the allocation: reported as canary_overwrite; the same right
# after the allocation (the plan's known window) recorded; its clean twin silent with
# native's result;
# eager MLP and Transformer training steps (bench/binary/torch_steps.py) silent and
# bit-identical to native. bench/canary/torch_case.py runs and judges it;
# bench/canary/torch_canary.py is the program. Without a GPU (or with CANARY_DRY=1) it
# writes a result saying `skipped`.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${WORK:=$(mktemp -d /tmp/canary_torch.XXXXXX)}" "${RESULT:=$WORK/result.json}"
mkdir -p "$WORK"
export PYTHONUNBUFFERED=1
timeout -k 3 57 python3 "$here/../canary/torch_case.py" --gpusan "${GPUSAN:-}" --work "$WORK" --result "$RESULT"
rc=$?
[ -s "$RESULT" ] || echo "{\"case\": \"canary_torch\", \"ok\": false, \"notes\": \"torch_case.py wrote nothing (exit $rc)\"}" >"$RESULT"
exit 0
