#!/usr/bin/env bash
# PyTorch `multiprocessing` with the fork start method (issue 12: a child whose parent never
# initialised CUDA was not checked at all). torch_fork.py natively and under `gpusan run` in
# api and check modes: every run exits 0 with the right answers, the gpusan runs are silent
# (0 errors) and their reports hold 5 CUDA processes: the parent and its 4 workers (which
# leave by os._exit, so theirs come from their events files).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$WORK"
export GPUSAN_CACHE_DIR="$WORK/cache"  # this run's own instrumentation cache
mkdir -p "$GPUSAN_CACHE_DIR" && chmod 700 "$GPUSAN_CACHE_DIR"
run() {  # label, then the command
  local label=$1; shift
  local t0; t0=$(date +%s.%N)
  timeout -k 5 50 "$@" >"$label.out" 2>"$label.err"
  echo "$? $(python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),2))" "$t0")" >"$label.rc"
}
run native python3 "$here/torch_fork.py"
for mode in api check; do
  run "$mode" "$GPUSAN" run --mode "$mode" --report-json "$WORK/$mode.json" -- python3 "$here/torch_fork.py"
done
python3 - "$RESULT" <<'PY'
import json, sys
path = sys.argv[1]
res, ok, notes = {}, True, []
for label in ["native", "api", "check"]:
    rc, secs = open(f"{label}.rc").read().split()
    r = {"rc": int(rc), "seconds": float(secs)}
    lines = [l for l in open(f"{label}.out", errors="replace").read().splitlines() if l.startswith("{")]
    try:
        r["program"] = json.loads(lines[-1])
    except Exception:
        r["program"] = None
    r["stderr_tail"] = open(f"{label}.err", errors="replace").read()[-800:]
    good = r["rc"] == 0 and r["program"] is not None
    if label != "native":
        try:
            rep = json.load(open(f"{label}.json"))
            r["report"] = {"total": rep["summary"]["total"], "by_kind": rep["summary"]["by_kind"],
                           "cuda_processes": rep.get("cuda_processes"), "notes": rep.get("notes", []),
                           "unchecked_modules": rep.get("unchecked_modules")}
            good = good and rep["summary"]["total"] == 0 and rep.get("cuda_processes") == 5
        except Exception as e:
            r["report"] = None
            good = False
            notes.append(f"{label}: no report ({e})")
    if not good:
        notes.append(f"{label}: rc {r['rc']}, program {r['program']}" + (f", report {r.get('report')}" if label != "native" else ""))
    r["ok"] = good
    ok &= good
    res[label] = r
if res["native"]["program"] is None:
    notes.insert(0, "natively the program printed no result (no GPU, or no torch?)")
json.dump({"case": "torch_fork", "ok": ok,
           "expected": "fork-start multiprocessing, CUDA left to 4 workers: every run exits 0 with right answers; "
                       "under gpusan (api, check) 0 errors and 5 CUDA processes in the report",
           "native": res.pop("native"), "gpusan": res, "notes": "; ".join(notes)}, open(path, "w"), indent=1)
PY
