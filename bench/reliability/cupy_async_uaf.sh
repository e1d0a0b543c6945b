#!/usr/bin/env bash
# A use after free through CuPy's stream-ordered allocator (issue 13): cupy_async_uaf.py bug
# and clean, natively and under `gpusan run --mode check`. The bug run reads through a freed
# array's pointer after cudaMallocAsync handed its block to a new array (natively it reads the
# new array's 7s, silently); gpusan holds the freed block in quarantine, so the new array
# gets other memory and the instrumented RawKernel (NVRTC door) reports use_after_free. The
# clean twin (the same reuse, the new array read) stays silent. Every run exits 0.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$WORK"
export GPUSAN_CACHE_DIR="$WORK/cache"
mkdir -p "$GPUSAN_CACHE_DIR" && chmod 700 "$GPUSAN_CACHE_DIR"
export CUPY_CACHE_DIR="$WORK/cupy-cache"
run() {  # label, then the command
  local label=$1; shift
  local t0; t0=$(date +%s.%N)
  timeout -k 5 25 "$@" >"$label.out" 2>"$label.err"
  echo "$? $(python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),2))" "$t0")" >"$label.rc"
}
for s in bug clean; do
  run "native_$s" python3 "$here/cupy_async_uaf.py" "$s"
  run "check_$s" "$GPUSAN" run --mode check --report-json "$WORK/check_$s.json" -- python3 "$here/cupy_async_uaf.py" "$s"
done
python3 - "$RESULT" <<'PY'
import json, sys
path = sys.argv[1]
res, ok, notes = {"native": {}, "gpusan": {}}, True, []
for s in ["bug", "clean"]:
    for label in [f"native_{s}", f"check_{s}"]:
        rc, secs = open(f"{label}.rc").read().split()
        r = {"rc": int(rc), "seconds": float(secs)}
        lines = [l for l in open(f"{label}.out", errors="replace").read().splitlines() if l.startswith("{")]
        try:
            r["program"] = json.loads(lines[-1])
        except Exception:
            r["program"] = None
        r["stderr_tail"] = open(f"{label}.err", errors="replace").read()[-800:]
        good = r["rc"] == 0 and r["program"] is not None
        if label.startswith("check"):
            try:
                rep = json.load(open(f"{label}.json"))
                kinds = sorted(rep["summary"]["by_kind"])
                r["report"] = {"by_kind": rep["summary"]["by_kind"], "notes": rep.get("notes", []),
                               "coverage": rep.get("coverage", {}).get("summary", rep.get("coverage_summary"))}
                good = good and kinds == (["use_after_free"] if s == "bug" else [])
                good = good and r["program"]["reused"] is False
            except Exception as e:
                r["report"] = None
                good = False
                notes.append(f"{label}: no report ({e})")
        else:
            # Natively the pool hands the freed block out again (the bug is silent there).
            r["reused"] = (r["program"] or {}).get("reused")
        if not good:
            notes.append(f"{label}: rc {r['rc']}, program {r['program']}, report {str(r.get('report'))[:300]}")
        r["ok"] = good
        ok &= good
        res["native" if label.startswith("native") else "gpusan"][s] = r
if res["native"]["bug"]["program"] is None:
    notes.insert(0, "natively the program printed no result (no GPU, or no cupy?)")
json.dump({"case": "cupy_async_uaf", "ok": ok,
           "expected": "CuPy MemoryAsyncPool + RawKernel: under gpusan check the stale read after the pool's reuse is "
                       "use_after_free (the block was not handed out again), the clean twin 0 errors; all exit 0",
           "native": res["native"], "gpusan": res["gpusan"], "notes": "; ".join(notes)}, open(path, "w"), indent=1)
PY
