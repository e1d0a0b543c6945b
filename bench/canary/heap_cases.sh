#!/usr/bin/env bash
# The device-heap cases of tests/cases/ under `gpusan run --mode canary` (issue 17): kernels
# that call `malloc` and `free` load rewritten (gpusan_passes::canary_heap), and an overflow
# into a block's canary is reported when a kernel frees the block. Built with the machine's
# nvcc (-arch=sm_90: PTX and machine code, as nvcc builds by default), run natively and
# under gpusan; writes $OUT/heap-cases.json: each case's findings by kind, exit codes, and
# whether its output matched native's.
#
#   bench/canary/heap_cases.sh DIR     (DIR: gpusan and libgpusan_inject.so)
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=$(cd "$1" && pwd)
out=${OUT:-/tmp}
work=$(mktemp -d /tmp/gpusan-heap-cases.XXXXXX)
export PATH="/usr/local/cuda/bin:$PATH"
cases="check_device_heap_overflow check_device_heap_double_free check_device_heap_invalid_free check_device_heap_use_after_free check_clean_device_heap check_clean_device_heap_loops"
for c in $cases; do
  nvcc -O2 -arch=sm_90 -I "$repo/tests/cases" -o "$work/$c" "$repo/tests/cases/$c.cu" 2>"$work/$c.build.txt" || echo "build failed: $c" >&2
  timeout 60 "$work/$c" >"$work/$c.native.txt" 2>&1
  echo $? >"$work/$c.native.rc"
  timeout 90 "$dir/gpusan" run --mode canary --report-json "$work/$c.json" -- "$work/$c" >"$work/$c.gpusan.txt" 2>"$work/$c.gpusan.err"
  echo $? >"$work/$c.gpusan.rc"
done
python3 - "$work" "$out/heap-cases.json" $cases <<'PY'
import json, sys
work, out, cases = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = {}
for c in cases:
    rd = lambda s: open(f"{work}/{c}.{s}").read() if __import__("os").path.exists(f"{work}/{c}.{s}") else ""
    try:
        rep = json.load(open(f"{work}/{c}.json"))
    except Exception as e:
        rep = {"error": str(e)}
    errs = rep.get("errors") or []
    rows[c] = {
        "native_rc": rd("native.rc").strip(), "gpusan_rc": rd("gpusan.rc").strip(),
        "same_output": rd("native.txt") == rd("gpusan.txt"),
        "by_kind": (rep.get("summary") or {}).get("by_kind"),
        "first": errs[0]["details"] if errs else None,
        "notes": rep.get("notes"),
        "stderr_tail": rd("gpusan.err")[-1500:],
    }
json.dump(rows, open(out, "w"), indent=1)
for c, r in rows.items():
    print(c, r["native_rc"], r["gpusan_rc"], r["same_output"], r["by_kind"])
PY
