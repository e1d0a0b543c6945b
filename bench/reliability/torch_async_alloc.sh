#!/usr/bin/env bash
# PyTorch with the stream-ordered allocator (backend:cudaMallocAsync; issue 13: freed
# stream-ordered blocks go through gpusan's quarantine, given back after an event at the free's
# place in its stream). torch_async_alloc.py natively and under `gpusan run --mode api`, once
# with the default quarantine and once with a 1 MiB one (blocks leave quarantine all the time,
# so the event order is what keeps kernels' memory theirs): every run exits 0 with the native
# run's losses, the gpusan runs are silent, and the time per step of each is recorded.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$WORK"
export GPUSAN_CACHE_DIR="$WORK/cache"
mkdir -p "$GPUSAN_CACHE_DIR" && chmod 700 "$GPUSAN_CACHE_DIR"
export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
run() {  # label, then the command
  local label=$1; shift
  local t0; t0=$(date +%s.%N)
  timeout -k 5 40 "$@" >"$label.out" 2>"$label.err"
  echo "$? $(python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),2))" "$t0")" >"$label.rc"
}
run native python3 "$here/torch_async_alloc.py"
run api "$GPUSAN" run --mode api --report-json "$WORK/api.json" -- python3 "$here/torch_async_alloc.py"
run api_small_quarantine "$GPUSAN" run --mode api --quarantine-bytes 1048576 --report-json "$WORK/api_small_quarantine.json" \
  -- python3 "$here/torch_async_alloc.py"
python3 - "$RESULT" <<'PY'
import json, sys
path = sys.argv[1]
res, ok, notes = {}, True, []
for label in ["native", "api", "api_small_quarantine"]:
    rc, secs = open(f"{label}.rc").read().split()
    r = {"rc": int(rc), "seconds": float(secs)}
    lines = [l for l in open(f"{label}.out", errors="replace").read().splitlines() if l.startswith("{")]
    try:
        r["program"] = json.loads(lines[-1])
    except Exception:
        r["program"] = None
    r["stderr_tail"] = open(f"{label}.err", errors="replace").read()[-800:]
    good = r["rc"] == 0 and r["program"] is not None and r["program"].get("backend") == "cudaMallocAsync"
    if label != "native":
        try:
            rep = json.load(open(f"{label}.json"))
            r["report"] = {"total": rep["summary"]["total"], "by_kind": rep["summary"]["by_kind"],
                           "notes": rep.get("notes", [])}
            good = good and rep["summary"]["total"] == 0
            good = good and not any("could not be given back" in str(n) for n in rep.get("notes", []))
        except Exception as e:
            r["report"] = None
            good = False
            notes.append(f"{label}: no report ({e})")
        native = res["native"].get("program") or {}
        mine = r["program"] or {}
        if native.get("losses") and mine.get("losses"):
            worst = max(abs(a - b) / max(1e-6, abs(a)) for a, b in zip(native["losses"], mine["losses"]))
            r["worst_relative_loss_difference"] = worst
            good = good and len(native["losses"]) == len(mine["losses"]) and worst < 1e-4
            if native.get("ms_per_step") and mine.get("ms_per_step"):
                r["step_time_ratio"] = round(mine["ms_per_step"] / native["ms_per_step"], 2)
        else:
            good = False
    if not good:
        notes.append(f"{label}: rc {r['rc']}, program {str(r['program'])[:300]}, report {r.get('report')}")
    r["ok"] = good
    ok &= good
    res[label] = r
if res["native"]["program"] is None:
    notes.insert(0, "natively the program printed no result (no GPU, or no torch?)")
json.dump({"case": "torch_async_alloc", "ok": ok,
           "expected": "PyTorch backend:cudaMallocAsync training: every run exits 0 with the native losses "
                       "(relative difference < 1e-4); under gpusan api (default and 1 MiB quarantine) 0 errors, "
                       "no release failures; step time ratio recorded",
           "native": res.pop("native"), "gpusan": res, "notes": "; ".join(notes)}, open(path, "w"), indent=1)
PY
