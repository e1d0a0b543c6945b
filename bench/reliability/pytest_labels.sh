#!/usr/bin/env bash
# `pytest --gpusan` on the GPU (issue 15): pytest_labels_test.py (CuPy, MemoryAsyncPool, a
# RawKernel writing 16 ints past a 1000-int array in `test_overflow`, which never
# synchronizes; two clean tests around it), natively and with `--gpusan` (the plugin from
# python/ through `-p gpusan.pytest_plugin`, the binary through $GPUSAN_BIN). Expected:
# natively 3 passed; under gpusan exit 1 (errors found), out_of_bounds_write findings all
# labelled `...::test_overflow`, none in the clean tests, the per-test summary naming it.
# Also recorded (not judged): whether the allocation stack starts with the test file's
# Python frames (only where CuPy allocates with the GIL held).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$WORK"
export GPUSAN_CACHE_DIR="$WORK/cache" CUPY_CACHE_DIR="$WORK/cupy-cache"
mkdir -p "$GPUSAN_CACHE_DIR" && chmod 700 "$GPUSAN_CACHE_DIR"
cp "$here/pytest_labels_test.py" "$WORK/test_labels.py"
export PYTHONPATH="$repo/python${PYTHONPATH:+:$PYTHONPATH}" GPUSAN_BIN="$GPUSAN"
run() {  # label, then the command
  local label=$1; shift
  local t0; t0=$(date +%s.%N)
  timeout -k 5 50 "$@" >"$label.out" 2>"$label.err"
  echo "$? $(python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),2))" "$t0")" >"$label.rc"
}
have_pytest=$(python3 -c 'import pytest; print(1)' 2>/dev/null || echo 0)
if [ "$have_pytest" = 1 ]; then
  run native python3 -m pytest -q -p no:cacheprovider test_labels.py
  run gpusan python3 -m pytest -q -p no:cacheprovider -p gpusan.pytest_plugin --gpusan \
    --gpusan-args "--report-json $WORK/gpusan.json" test_labels.py
fi
python3 - "$RESULT" "$have_pytest" <<'PY'
import json, sys
path, have = sys.argv[1], sys.argv[2] == "1"
res = {"case": "pytest_labels", "ok": False,
       "expected": "natively 3 passed, exit 0; pytest --gpusan exit 1, every out_of_bounds_write labelled "
                   "test_labels.py::test_overflow, none in the clean tests, the summary naming it",
       "native": {}, "gpusan": {}, "notes": ""}
if not have:
    res["notes"] = "pytest is not installed on this machine: nothing run"
    json.dump(res, open(path, "w"), indent=1)
    sys.exit()
notes = []
for label in ["native", "gpusan"]:
    rc, secs = open(f"{label}.rc").read().split()
    out = open(f"{label}.out", errors="replace").read()
    res[label] = {"rc": int(rc), "seconds": float(secs), "stdout_tail": out[-1500:],
                  "stderr_tail": open(f"{label}.err", errors="replace").read()[-1500:],
                  "passed_3": "3 passed" in out}
ok = res["native"]["rc"] == 0 and res["native"]["passed_3"]
g = res["gpusan"]
ok &= g["rc"] == 1 and g["passed_3"]
try:
    rep = json.load(open("gpusan.json"))
    errors = rep.get("errors", [])
    g["by_kind"] = rep["summary"]["by_kind"]
    g["labels"] = sorted({(e["kind"], e.get("label")) for e in errors})
    oob = [e for e in errors if e["kind"] == "out_of_bounds_write"]
    ok &= bool(oob) and all(e.get("label") == "test_labels.py::test_overflow" for e in oob)
    ok &= all(e.get("label") not in ("test_labels.py::test_clean_before", "test_labels.py::test_clean_after")
              for e in errors)
    frames = [f for e in oob for f in (e["details"].get("nearest") or {}).get("allocation", {}).get("alloc_stack", [])]
    g["alloc_python_frames"] = [f"{f.get('function')} at {f.get('file')}:{f.get('line')}" for f in frames
                                if (f.get("file") or "").endswith(".py")][:6]
    g["coverage"] = rep.get("coverage", {}).get("summary")
except Exception as e:
    ok = False
    notes.append(f"no gpusan report ({e})")
ok &= "test_labels.py::test_overflow" in g["stdout_tail"] and "out_of_bounds_write" in g["stdout_tail"]
res["ok"] = bool(ok)
if not g.get("alloc_python_frames"):
    notes.append("no Python frames in the allocation stack (CuPy allocates with the GIL released?)")
res["notes"] = "; ".join(notes)
json.dump(res, open(path, "w"), indent=1, default=list)
PY
