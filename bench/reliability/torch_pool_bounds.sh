#!/usr/bin/env bash
# Per-tensor bounds inside PyTorch's caching allocator (issue 15), the allocator ON.
# torch_pool_bounds.py `bugs` and `clean` (each one process), natively, under
# `gpusan run --mode check` (the default allocator, and with expandable segments), and under
# compute-sanitizer (memcheck), all at once. Facts:
# - natively both exit 0; in `bugs` the write past `a` overwrites its neighbour `b`
#   (neighbour_sum 7000 where b follows a);
# - gpusan check, `bugs`: findings in gpusan_case_read_past, gpusan_case_write_neighbour and
#   gpusan_case_stale_read, and in PyTorch's eager kernels (the over-long view), no
#   "tensor bounds are off" line; gpusan_case_stale_reused is recorded only (its address is
#   a live tensor's once the block is handed out again);
# - gpusan check, `clean`: 0 errors, the native sums (the side-stream tensor freed with
#   record_stream while its kernels were queued included);
# - compute-sanitizer: its error count for each, expected to miss what stays inside the
#   allocator's segments (recorded, not judged).
# The first gpusan run builds the allocator shim into $GPUSAN_CACHE_DIR (its time is in the
# runs' seconds).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$WORK"
export GPUSAN_CACHE_DIR="$WORK/cache" TRITON_CACHE_DIR="$WORK/triton-cache"
mkdir -p "$GPUSAN_CACHE_DIR" && chmod 700 "$GPUSAN_CACHE_DIR"
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_NO_CUDA_MEMORY_CACHING
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
limit=${TPB_TIMEOUT:-50}
run() {  # label, then the command; in the background
  local label=$1; shift
  ( t0=$(date +%s.%N)
    timeout -k 3 "$limit" "$@" >"$label.out" 2>"$label.err"
    echo "$? $(python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),2))" "$t0")" >"$label.rc" ) &
}
py="$here/torch_pool_bounds.py"
for k in bugs clean; do
  run "native_$k" python3 "$py" "$k"
  run "check_$k" "$GPUSAN" run --mode check --report-json "$WORK/check_$k.json" -- python3 "$py" "$k"
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
    run "expandable_$k" "$GPUSAN" run --mode check --report-json "$WORK/expandable_$k.json" -- python3 "$py" "$k"
  if [ -x "$cs" ]; then run "cs_$k" "$cs" --tool memcheck python3 "$py" "$k"; fi
done
wait
python3 - "$RESULT" <<'PY'
import json, os, re, sys
KERNELS = ["gpusan_case_read_past", "gpusan_case_write_neighbour", "gpusan_case_stale_read"]
RECORDED = ["gpusan_case_stale_reused"]
res, notes, ok = {}, [], True

def run(label):
    if not os.path.exists(label + ".rc"):
        return None
    rc, secs = open(label + ".rc").read().split()
    out = open(label + ".out", errors="replace").read()
    err = open(label + ".err", errors="replace").read()
    lines = [l for l in out.splitlines() if l.startswith("{")]
    r = {"rc": int(rc), "seconds": float(secs), "program": None, "stderr_tail": err[-600:]}
    try:
        r["program"] = json.loads(lines[-1])
    except Exception:
        pass
    r["gpusan_lines"] = [l for l in err.splitlines() if l.startswith("gpusan:")][:5]
    if label.startswith("cs_"):
        m = re.search(r"ERROR SUMMARY: (\d+) error", out + err)
        r["errors"] = int(m.group(1)) if m else None
    elif not label.startswith("native"):
        try:
            rep = json.load(open(label + ".json"))
            errs = [json.dumps(e) for e in rep.get("errors", [])]
            r["total"] = rep["summary"]["total"]
            r["by_kind"] = rep["summary"]["by_kind"]
            r["by_kernel"] = {k: sum(1 for e in errs if k in e) for k in KERNELS + RECORDED}
            r["eager_findings"] = sum(1 for e in errs if not any(k in e for k in KERNELS + RECORDED))
            r["notes"] = rep.get("notes", [])
        except Exception as e:
            r["total"] = None
            notes.append("%s: no report (%s)" % (label, e))
    return r

for label in ["native_bugs", "native_clean", "check_bugs", "check_clean", "expandable_bugs",
              "expandable_clean", "cs_bugs", "cs_clean"]:
    res[label] = run(label)

def need(cond, what):
    global ok
    if not cond:
        ok = False
        notes.append(what)

for k in ["bugs", "clean"]:
    n = res["native_" + k]
    need(n and n["rc"] == 0 and n["program"], "native %s did not run: %s" % (k, n and n["stderr_tail"][-300:]))
for label in ["check_bugs", "expandable_bugs"]:
    r = res[label]
    need(r and r["rc"] == 0 and r["program"], "%s: rc %s" % (label, r and r["rc"]))
    if r and r.get("total") is not None:
        for k in KERNELS:
            need(r["by_kernel"][k] > 0, "%s: nothing found in %s" % (label, k))
        need(r["eager_findings"] > 0, "%s: nothing found in PyTorch's eager kernels" % label)
    need(r and not any("tensor bounds are off" in l for l in r["gpusan_lines"]), "%s: %s" % (label, r and r["gpusan_lines"]))
for label in ["check_clean", "expandable_clean"]:
    r = res[label]
    need(r and r["rc"] == 0 and r.get("total") == 0, "%s: rc %s, %s errors %s" % (label, r and r["rc"], r and r.get("total"), r and r.get("by_kernel")))
    nat = (res["native_clean"] or {}).get("program") or {}
    mine = (r or {}).get("program") or {}
    same = all(nat.get(key) == mine.get(key) for key in ["neighbour_sum", "read_past_sum", "eager_sum", "side_sum"])
    need(same, "%s: results differ from native: %s vs %s" % (label, mine, nat))
    need(r and not any("tensor bounds are off" in l for l in r["gpusan_lines"]), "%s: %s" % (label, r and r["gpusan_lines"]))
json.dump({"case": "torch_pool_bounds", "ok": ok,
           "expected": "caching allocator on: gpusan --mode check finds the Triton read past a tensor inside its segment, "
                       "the Triton write into the neighbouring tensor, the Triton read of a freed tensor's storage and "
                       "PyTorch's eager kernels over an over-long view (default allocator and expandable segments); "
                       "the clean twins (record_stream included) silent with native results; compute-sanitizer recorded "
                       "(expected to miss); stale_reused recorded only",
           "native": {"bugs": res["native_bugs"], "clean": res["native_clean"]},
           "gpusan": {k: res[k] for k in ["check_bugs", "check_clean", "expandable_bugs", "expandable_clean"]},
           "compute_sanitizer": {"bugs": res["cs_bugs"], "clean": res["cs_clean"]},
           "notes": "; ".join(notes)}, open(sys.argv[1], "w"), indent=1)
PY
