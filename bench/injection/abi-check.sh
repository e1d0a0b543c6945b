#!/usr/bin/env bash
# Runs on the GPU machine: the device ABI between instrumented kernels and the runtime
# (table upload before launches, error buffer drained into reports), with abi_test.cpp.
# Writes $OUT/device-abi.json.   Usage: bench/injection/abi-check.sh DIR_WITH_GPUSAN
set -uo pipefail
dir=$(cd "$1" && pwd); here=$(cd "$(dirname "$0")" && pwd); out=${OUT:-/tmp/out}; work=$(mktemp -d)
export PATH=/usr/local/cuda/bin:$PATH
nvcc -O2 -o "$work/abi_test" "$here/abi_test.cpp" -lcuda || exit 1
"$work/abi_test" > "$work/native.txt" 2>&1; native_rc=$?
"$dir/gpusan" run --report-json "$work/report.json" -- "$work/abi_test" > "$work/gpusan.txt" 2> "$work/gpusan.err"; rc=$?
python3 - "$native_rc" "$rc" "$work" "$out/device-abi.json" <<'PY'
import json, sys
native_rc, rc, work, dest = sys.argv[1:]
rep = json.load(open(work + "/report.json"))
errs = rep.get("errors", [])
d = errs[0]["details"] if errs else {}
checks = {
  "native_ok": int(native_rc) == 0 and "OK" in open(work + "/native.txt").read(),
  "gpusan_ok": int(rc) == 0 and "OK" in open(work + "/gpusan.txt").read(),
  "table_seen_by_kernel": "table magic=0x54415347 entries=3" in open(work + "/gpusan.txt").read(),
  "one_error_reported": rep["summary"]["total"] == 1 and errs and errs[0]["kind"] == "out_of_bounds_write",
  "kernel_block_thread_line": d.get("kernel") == "abi_probe" and d.get("block") == [2, 0, 0] and d.get("thread") == [5, 0, 0] and (d.get("ptx") or {}).get("line") == 42,
  # The record carries no root allocation, so the report names the allocation holding the
  # address: the 1024-byte one if the address falls past it into a gap, or the 4096-byte
  # neighbour the driver may have placed right behind it.
  "nearest_allocation": (d.get("nearest") or {}).get("allocation", {}).get("size") in (1024, 4096),
}
doc = {"what": "device ABI: table upload before launch, error buffer drain", "checks": checks, "all_pass": all(checks.values()),
       "native_stdout": open(work + "/native.txt").read(), "gpusan_stdout": open(work + "/gpusan.txt").read(),
       "gpusan_stderr": open(work + "/gpusan.err").read()[-3000:], "report": rep}
json.dump(doc, open(dest, "w"), indent=1)
print(json.dumps(checks, indent=1)); print(doc["gpusan_stderr"])
PY
