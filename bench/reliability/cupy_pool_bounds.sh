#!/usr/bin/env bash
# Per-array bounds inside CuPy's memory pool (issue 15): cupy_pool_bounds.py `bugs` and
# `clean`, natively, under `gpusan run --mode check` and under compute-sanitizer, all at once.
# Facts:
# - natively both exit 0; in `bugs` the write past x lands in y (where y
#   follows x in the chunk they were cut from: neighbour_sum 13664);
# - gpusan check, `bugs`: findings in gpusan_cupy_slack, gpusan_cupy_neighbour and
#   gpusan_cupy_thread (an array allocated on another thread), no "bounds are off" line;
# - gpusan check, `clean`: 0 errors, the native sums;
# - compute-sanitizer: its error counts, expected to miss writes that stay inside the pool's
#   driver allocations (recorded, not judged).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$WORK"
export GPUSAN_CACHE_DIR="$WORK/cache" CUPY_CACHE_DIR="$WORK/cupy-cache"
mkdir -p "$GPUSAN_CACHE_DIR" && chmod 700 "$GPUSAN_CACHE_DIR"
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
limit=${CPB_TIMEOUT:-50}
run() {  # label, then the command; in the background
  local label=$1; shift
  ( t0=$(date +%s.%N)
    timeout -k 3 "$limit" "$@" >"$label.out" 2>"$label.err"
    echo "$? $(python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),2))" "$t0")" >"$label.rc" ) &
}
py="$here/cupy_pool_bounds.py"
for k in bugs clean; do
  run "native_$k" python3 "$py" "$k"
  run "check_$k" "$GPUSAN" run --mode check --report-json "$WORK/check_$k.json" -- python3 "$py" "$k"
  if [ -x "$cs" ]; then run "cs_$k" "$cs" --tool memcheck python3 "$py" "$k"; fi
done
wait
python3 - "$RESULT" <<'PY'
import json, os, re, sys
KERNELS = ["gpusan_cupy_slack", "gpusan_cupy_neighbour", "gpusan_cupy_thread"]
res, notes, ok = {}, [], True

def run(label):
    if not os.path.exists(label + ".rc"):
        return None
    rc, secs = open(label + ".rc").read().split()
    out = open(label + ".out", errors="replace").read()
    err = open(label + ".err", errors="replace").read()
    lines = [l for l in out.splitlines() if l.startswith("{")]
    r = {"rc": int(rc), "seconds": float(secs), "program": None, "stderr_tail": err[-600:],
         "gpusan_lines": [l for l in err.splitlines() if l.startswith("gpusan:")][:5]}
    try:
        r["program"] = json.loads(lines[-1])
    except Exception:
        pass
    if label.startswith("cs_"):
        m = re.search(r"ERROR SUMMARY: (\d+) error", out + err)
        r["errors"] = int(m.group(1)) if m else None
    elif label.startswith("check"):
        try:
            rep = json.load(open(label + ".json"))
            errs = [json.dumps(e) for e in rep.get("errors", [])]
            r.update(total=rep["summary"]["total"], by_kind=rep["summary"]["by_kind"],
                     by_kernel={k: sum(1 for e in errs if k in e) for k in KERNELS}, notes=rep.get("notes", []))
        except Exception as e:
            r["total"] = None
            notes.append("%s: no report (%s)" % (label, e))
    return r

for label in ["native_bugs", "native_clean", "check_bugs", "check_clean", "cs_bugs", "cs_clean"]:
    res[label] = run(label)

def need(cond, what):
    global ok
    if not cond:
        ok = False
        notes.append(what)

for k in ["bugs", "clean"]:
    n = res["native_" + k]
    need(n and n["rc"] == 0 and n["program"], "native %s did not run: %s" % (k, n and n["stderr_tail"][-300:]))
r = res["check_bugs"]
need(r and r["rc"] == 0 and r["program"], "check_bugs: rc %s" % (r and r["rc"]))
if r and r.get("total") is not None:
    for k in KERNELS:
        need(r["by_kernel"][k] > 0, "check_bugs: nothing found in %s" % k)
need(r and not any("bounds are off" in l for l in r["gpusan_lines"]), "check_bugs: %s" % (r and r["gpusan_lines"]))
r = res["check_clean"]
need(r and r["rc"] == 0 and r.get("total") == 0, "check_clean: rc %s, %s errors" % (r and r["rc"], r and r.get("total")))
nat = (res["native_clean"] or {}).get("program") or {}
mine = (r or {}).get("program") or {}
need(all(nat.get(k) == mine.get(k) for k in ["a_sum", "x_sum", "neighbour_sum", "thread_sum"]),
     "check_clean: results differ from native: %s vs %s" % (mine, nat))
json.dump({"case": "cupy_pool_bounds", "ok": ok,
           "expected": "CuPy MemoryPool: gpusan --mode check finds RawKernel writes past a pooled array (into its "
                       "rounding, into the next array cut from the same chunk, on an array another thread allocated); "
                       "the clean twin silent with native results; compute-sanitizer recorded (expected to miss)",
           "native": {"bugs": res["native_bugs"], "clean": res["native_clean"]},
           "gpusan": {"bugs": res["check_bugs"], "clean": res["check_clean"]},
           "compute_sanitizer": {"bugs": res["cs_bugs"], "clean": res["cs_clean"]},
           "notes": "; ".join(notes)}, open(sys.argv[1], "w"), indent=1)
PY
