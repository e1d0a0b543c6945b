#!/usr/bin/env bash
# Runs on the GPU machine: do the caches make a second `gpusan run --mode check` start as
# fast as native? gpusan keeps instrumented PTX on disk (GPUSAN_CACHE_DIR) and the driver
# keeps what it compiled from it (its JIT cache, CUDA_CACHE_PATH); both are emptied for a
# cold run. For each program (a few workloads of bench/workloads), the wall time of the
# whole process: natively, under gpusan with empty caches (instrument + JIT every module),
# and under gpusan again with the caches the first run filled; medians of GPUSAN_JIT_RUNS
# runs (default 7).
# Writes $OUT/jit-cache.json.
#   Usage: bench/jit-cache.sh DIR_WITH_GPUSAN
set -uo pipefail
dir=$(cd "$1" && pwd)
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/gpusan-jit-out}
mkdir -p "$out"
work=$(mktemp -d)
export PATH=/usr/local/cuda/bin:$PATH
runs=${GPUSAN_JIT_RUNS:-7}
progs=(sgemm stencil2d reduction histogram)
for p in "${progs[@]}"; do
  nvcc -O3 -arch=sm_90 -lineinfo -o "$work/$p" "$repo/bench/workloads/$p.cu" || exit 1
done
python3 - "$dir/gpusan" "$work" "$out/jit-cache.json" "$runs" "${progs[@]}" <<'PY'
import json, os, statistics, subprocess, sys, time, shutil
gpusan, work, dest, runs, progs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:]
def wall(cmd, env=None):
    t = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    return time.monotonic() - t, p.returncode, p.stdout[-300:] + p.stderr[-300:]
res = {}
for prog in progs:
    b = os.path.join(work, prog)
    cache = os.path.join(work, "cache-" + prog)
    env = dict(os.environ, GPUSAN_CACHE_DIR=cache, CUDA_CACHE_PATH=os.path.join(cache, "nv"))
    cmd = [gpusan, "run", "--mode", "check", "--report-json", os.path.join(work, prog + ".json"), "--", b]
    native, cold, warm = [], [], []
    rcs = []
    for r in range(runs):
        t, rc, _ = wall([b]); native.append(t); rcs.append(rc)
        shutil.rmtree(cache, ignore_errors=True)
        t, rc, tail = wall(cmd, env); cold.append(t); rcs.append(rc)
        t, rc, tail = wall(cmd, env); warm.append(t); rcs.append(rc)
    n, c, w = statistics.median(native), statistics.median(cold), statistics.median(warm)
    res[prog] = {"native_s": n, "cold_cache_s": c, "warm_cache_s": w,
                 "warm_over_native": w / n, "cold_over_native": c / n,
                 "within_10_percent": w / n <= 1.10, "all_rc_zero": all(x == 0 for x in rcs),
                 "native_runs": native, "cold_runs": cold, "warm_runs": warm, "last_tail": tail}
    print(f"{prog:12s} native {n:.3f}s  gpusan cold {c:.3f}s ({c/n:.2f}x)  warm {w:.3f}s ({w/n:.2f}x)")
doc = {"what": "process wall time: native, gpusan --mode check with empty caches (gpusan's instrumented PTX, the driver's JIT cache), and again with both filled (medians)",
       "runs": runs, "programs": res,
       "summary": {"max_warm_over_native": max(v["warm_over_native"] for v in res.values()),
                   "target": "warm <= 1.10 x native", "met": all(v["within_10_percent"] for v in res.values())}}
json.dump(doc, open(dest, "w"), indent=1)
PY
