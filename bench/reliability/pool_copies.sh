#!/usr/bin/env bash
# Host copies and sets against the tensor, not only the pool's segment (issue 15):
# pool_copies.py {torch,cupy} {bugs,clean}, natively, under `gpusan run` (default mode) and
# under compute-sanitizer memcheck, all at once. Facts:
# - natively every run exits 0;
# - gpusan, bugs: memcpy_out_of_bounds and memset_out_of_bounds judged against the pool's
#   block (every finding's allocation is of kind pool_block, not the pool's driver
#   allocation), and use_after_free_host for the copy into the freed tensor's storage;
# - gpusan, clean: 0 errors, the native sums;
# - compute-sanitizer: its error count, expected to miss copies that stay inside the pool's
#   driver allocations (recorded, not judged).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$WORK"
export GPUSAN_CACHE_DIR="$WORK/cache" CUPY_CACHE_DIR="$WORK/cupy-cache"
mkdir -p "$GPUSAN_CACHE_DIR" && chmod 700 "$GPUSAN_CACHE_DIR"
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_NO_CUDA_MEMORY_CACHING
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
run() {  # label, then the command; in the background
  local label=$1; shift
  ( t0=$(date +%s.%N)
    timeout -k 3 50 "$@" >"$label.out" 2>"$label.err"
    echo "$? $(python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),2))" "$t0")" >"$label.rc" ) &
}
py="$here/pool_copies.py"
for lib in torch cupy; do
  for k in bugs clean; do
    run "native_${lib}_$k" python3 "$py" "$lib" "$k"
    run "gpusan_${lib}_$k" "$GPUSAN" run --report-json "$WORK/gpusan_${lib}_$k.json" -- python3 "$py" "$lib" "$k"
    if [ -x "$cs" ]; then run "cs_${lib}_$k" "$cs" --tool memcheck python3 "$py" "$lib" "$k"; fi
  done
done
wait
python3 - "$RESULT" <<'PY'
import json, os, re, sys
BUG_KINDS = ["memcpy_out_of_bounds", "memset_out_of_bounds", "use_after_free_host"]
res, notes, ok = {"native": {}, "gpusan": {}, "compute_sanitizer": {}}, [], True


def outcome(label):
    if not os.path.exists(label + ".rc"):
        return None
    rc, secs = open(label + ".rc").read().split()
    out = open(label + ".out", errors="replace").read()
    err = open(label + ".err", errors="replace").read()
    lines = [l for l in out.splitlines() if l.startswith("{")]
    r = {"rc": int(rc), "seconds": float(secs), "program": None, "stderr_tail": err[-500:]}
    try:
        r["program"] = json.loads(lines[-1])
    except Exception:
        pass
    if label.startswith("cs_"):
        m = re.search(r"ERROR SUMMARY: (\d+) error", out + err)
        r["errors"] = int(m.group(1)) if m else None
    return r


for lib in ["torch", "cupy"]:
    for k in ["bugs", "clean"]:
        key = f"{lib}_{k}"
        nat = outcome("native_" + key)
        res["native"][key] = nat
        if nat is None or nat["rc"] != 0 or nat["program"] is None:
            ok = False
            notes.append(f"native {key}: {nat and nat['stderr_tail'][-200:]}")
            continue
        g = outcome("gpusan_" + key) or {}
        try:
            rep = json.load(open(f"gpusan_{key}.json"))
            g["by_kind"] = rep["summary"]["by_kind"]
            g["messages"] = [e.get("message", "")[:240] for e in rep.get("errors", [])[:6]]
            g["judged_against"] = sorted({
                list(k)[0] if isinstance(k, dict) else str(k)
                for e in rep.get("errors", [])
                for k in [(((e.get("details") or {}).get("nearest") or {}).get("allocation") or {}).get("kind")]})
        except Exception as e:
            g["by_kind"] = None
            notes.append(f"gpusan {key}: no report ({e})")
        res["gpusan"][key] = g
        kinds = g.get("by_kind") or {}
        if k == "bugs":
            missing = [x for x in BUG_KINDS if not kinds.get(x)]
            extra = [x for x in kinds if x not in BUG_KINDS]
            named = g.get("judged_against") == ["pool_block"]
            good = g.get("by_kind") is not None and not missing and not extra and named
            if not good:
                notes.append(f"gpusan {key}: missing {missing}, extra {extra}, block named {named}")
        else:
            same = (g.get("program") or {}).get("a_sum") == nat["program"]["a_sum"] and \
                   (g.get("program") or {}).get("b_sum") == nat["program"]["b_sum"]
            good = g.get("by_kind") == {} and g.get("rc") == 0 and same
            if not good:
                notes.append(f"gpusan {key}: kinds {kinds}, rc {g.get('rc')}, same sums {same}")
        g["ok"] = good
        ok &= good
        res["compute_sanitizer"][key] = outcome("cs_" + key)
json.dump({"case": "pool_copies", "ok": ok,
           "expected": "host cudaMemcpy/cudaMemset past a pooled PyTorch tensor or CuPy array and into a freed "
                       "one's storage reported against the block (memcpy/memset_out_of_bounds, "
                       "use_after_free_host); clean twins silent with native sums; compute-sanitizer recorded",
           **res, "notes": "; ".join(notes) or "all facts hold"}, open(sys.argv[1], "w"), indent=1)
PY
