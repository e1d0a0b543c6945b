#!/usr/bin/env bash
# fork and CUDA (issue 12: with threads allocating at fork time, children hung on a lock of
# gpusan's; children of a parent that never initialised CUDA were not checked at all).
# fork300.cu, natively and under `gpusan run --mode check`:
#   busy:  300 children forked while 4 threads of a CUDA parent allocate, set and free; each
#          child calls CUDA (refused there) and exits. No child may hang or crash, and the
#          report stays clean (such children are not judged: CUDA cannot be used in them).
#   clean: 64 children of a parent that never touched CUDA, 16 at a time, each doing real
#          CUDA work (its own context: some 0.3 s each on the H100, so 300 of them do not
#          fit the case's minute); every tenth writes one element past its buffer in a
#          kernel, another tenth sets one byte past it. All exit 0; the report holds exactly
#          those errors and one process per child.
# FORK300_CHILDREN (busy), FORK300_CLEAN_CHILDREN / FORK300_AT_ONCE (clean) change the
# counts (the errors expected follow).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$WORK"
children=${FORK300_CHILDREN:-300}
clean_children=${FORK300_CLEAN_CHILDREN:-64}
at_once=${FORK300_AT_ONCE:-16}
"$NVCC" -arch=sm_90 -lineinfo -o fork300 "$here/fork300.cu" >build.log 2>&1 ||
  { python3 -c 'import json,sys; json.dump({"case": "fork300", "ok": False, "notes": "nvcc failed: " + open("build.log").read()[-400:]}, open(sys.argv[1], "w"))' "$RESULT"; exit 0; }
export GPUSAN_CACHE_DIR="$WORK/cache"  # this run's own instrumentation cache
mkdir -p "$GPUSAN_CACHE_DIR" && chmod 700 "$GPUSAN_CACHE_DIR"
run() {  # label, then the command
  local label=$1; shift
  local t0; t0=$(date +%s.%N)
  timeout -k 5 55 "$@" >"$label.out" 2>"$label.err"
  echo "$? $(python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),2))" "$t0")" >"$label.rc"
}
run native-busy ./fork300 busy "$children"
run gpusan-busy "$GPUSAN" run --mode check --report-json "$WORK/gpusan-busy.json" -- ./fork300 busy "$children"
run native-clean ./fork300 clean "$clean_children" "$at_once"
run gpusan-clean "$GPUSAN" run --mode check --report-json "$WORK/gpusan-clean.json" -- ./fork300 clean "$clean_children" "$at_once"
python3 - "$RESULT" "$children" "$clean_children" <<'PY'
import json, sys
path, busy_children, children = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def load(label):
    rc, secs = open(f"{label}.rc").read().split()
    r = {"rc": int(rc), "seconds": float(secs)}
    lines = [l for l in open(f"{label}.out", errors="replace").read().splitlines() if l.startswith("{")]
    try:
        r["program"] = json.loads(lines[-1])
    except Exception:
        r["program"] = None
        r["stderr_tail"] = open(f"{label}.err", errors="replace").read()[-600:]
    try:
        rep = json.load(open(f"{label}.json"))
        r["report"] = {"total": rep["summary"]["total"], "by_kind": rep["summary"]["by_kind"],
                       "cuda_processes": rep.get("cuda_processes"), "notes": rep.get("notes", [])}
    except Exception:
        if label.startswith("gpusan"):
            r["report"] = None
    return r
res = {l: load(l) for l in ["native-busy", "gpusan-busy", "native-clean", "gpusan-clean"]}
notes, ok = [], True
def check(cond, why):
    global ok
    if not cond:
        ok = False
        notes.append(why)
nb, gb, nc, gc = (res[l]["program"] for l in ["native-busy", "gpusan-busy", "native-clean", "gpusan-clean"])
if nb is None or "error" in nb:
    notes.append(f"natively the busy parent could not start (no GPU?): {nb}")
    nb = None
if gb is not None and "error" in gb:
    gb = None
check(nb is not None and nb["hung"] == 0 and nb["crashed"] == 0, "busy, natively: children hung or crashed (or no result)")
check(gb is not None and gb["hung"] == 0 and gb["crashed"] == 0 and res["gpusan-busy"]["rc"] == 0,
      "busy, under gpusan: children hung or crashed (or no result)")
rb = res["gpusan-busy"].get("report")
check(rb is not None and rb["total"] == 0, "busy, under gpusan: the report is not clean")
check(nc is not None and nc["ok"] == children and res["native-clean"]["rc"] == 0, "clean, natively: not every child exited 0")
check(gc is not None and gc["ok"] == children and res["gpusan-clean"]["rc"] == 0, "clean, under gpusan: not every child exited 0")
rc_ = res["gpusan-clean"].get("report")
if gc is not None and rc_ is not None:
    want = {"out_of_bounds_write": gc["kernel_bugs"], "memset_out_of_bounds": gc["memset_bugs"]}
    res["gpusan-clean"]["expected_by_kind"] = want
    check(rc_["total"] == sum(want.values()) and all(rc_["by_kind"].get(k) == v for k, v in want.items()),
          f"clean, under gpusan: errors {rc_['by_kind']} (expected {want})")
    check(rc_["cuda_processes"] == children, f"clean, under gpusan: {rc_['cuda_processes']} processes reported (expected {children})")
else:
    check(False, "clean, under gpusan: no report")
json.dump({"case": "fork300", "ok": ok,
           "expected": f"busy: {busy_children} children forked while 4 threads allocate, none hung, report clean; "
                       f"clean: {children} children of a CUDA-free parent all exit 0, each seeded overflow reported once, "
                       f"{children} processes in the report",
           "native": {"busy": res["native-busy"], "clean": res["native-clean"]},
           "gpusan": {"busy": res["gpusan-busy"], "clean": res["gpusan-clean"]},
           "notes": "; ".join(notes)}, open(path, "w"), indent=1)
PY
