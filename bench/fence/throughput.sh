#!/usr/bin/env bash
# Runs on the GPU machine (issue 18): the throughput of N tenants sharing the GPU, and the
# memory that sharing costs, under time-slicing (N processes, each its own context), MPS
# and gpusan serve. Each tenant is bench/fence/cotenants.cpp `victim SECONDS` (64 MiB,
# launch and synchronize, every word checked at the end); throughput is the iterations of
# all tenants together. 1.5 s in, the GPU's memory in use (nvidia-smi) and the manager's
# (or MPS server's) resident memory are sampled; the GPU's memory before is the baseline.
# Writes $OUT/fence-throughput.json.
#
#   bench/fence/throughput.sh DIR [N] [SECONDS]   DIR: gpusan, libgpusan_inject.so (N 16)
set -uo pipefail
dir=$(cd "$1" && pwd)
n=${2:-16}
secs=${3:-5}
out=${OUT:-/tmp/out}
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
nvcc -O2 -o "$work/cot" "$repo/bench/fence/cotenants.cpp" -lcuda || exit 1

gpu_mib() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1 | tr -d ' '; }
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

# round NAME SERVER_PID PREFIX...: N tenants at once, started with PREFIX.
round() {
  local name=$1 server=$2; shift 2
  gpu_mib > "$work/$name-gpu-before.txt"
  local pids=()
  for i in $(seq 1 "$n"); do
    timeout 120 "$@" "$work/cot" victim "$secs" > "$work/$name-tenant$i.txt" 2>&1 &
    pids+=($!)
  done
  sleep 1.5
  gpu_mib > "$work/$name-gpu-during.txt"
  if [ "$server" != 0 ]; then rss_kib "$server" > "$work/$name-server-rss.txt"; fi
  for p in "${pids[@]}"; do wait "$p"; done
}

round timeslice 0

if command -v nvidia-cuda-mps-control >/dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY=$work/mps-pipe CUDA_MPS_LOG_DIRECTORY=$work/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d
  sleep 1
  # The server starts with the first client: its memory is sampled while they run.
  ( sleep 1.5; pid=$(pgrep -f nvidia-cuda-mps-server | head -1); [ -n "$pid" ] && rss_kib "$pid" > "$work/mps-server-rss.txt" ) &
  round mps 0
  echo quit | timeout 10 nvidia-cuda-mps-control
  sleep 1
  pkill -f nvidia-cuda-mps-server 2>/dev/null
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
fi

sock="$work/s.sock"
"$dir/gpusan" serve --socket "$sock" 2> "$work/manager.log" &
manager=$!
for _ in $(seq 100); do "$dir/gpusan" serve --status --socket "$sock" >/dev/null 2>&1 && break; sleep 0.1; done
rss_kib "$manager" > "$work/fence-server-rss-idle.txt"
round fence "$manager" "$dir/gpusan" run --mode fence --server "$sock" --fence-memory-log2 28 --
kill "$manager"; wait "$manager" 2>/dev/null

python3 - "$work" "$n" "$secs" > "$out/fence-throughput.json" <<'PY'
import glob, json, os, re, sys
work, n, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
def read(p):
    try:
        return open(p, errors="replace").read().strip()
    except OSError:
        return ""
def num(p):
    try:
        return float(read(p))
    except ValueError:
        return None
rounds = {}
for name in ("timeslice", "mps", "fence"):
    outs = [read(p) for p in sorted(glob.glob(os.path.join(work, f"{name}-tenant*.txt")))]
    if not outs:
        continue
    iters = []
    for o in outs:
        m = re.search(r"VICTIM ok (\d+)", o)
        iters.append(int(m.group(1)) if m else None)
    before, during = num(os.path.join(work, f"{name}-gpu-before.txt")), num(os.path.join(work, f"{name}-gpu-during.txt"))
    r = {"tenants": len(outs), "all_ok": all(i is not None for i in iters), "iterations": iters,
         "iterations_total": sum(i for i in iters if i), "gpu_memory_mib_before": before, "gpu_memory_mib_during": during,
         "gpu_memory_mib_per_tenant": round((during - before) / len(outs), 1) if before is not None and during is not None else None,
         "failures": [next((l for l in o.splitlines() if l.startswith("VICTIM")), o[-200:])
                      for o, i in zip(outs, iters) if i is None][:3]}
    rss = num(os.path.join(work, f"{name}-server-rss.txt"))
    if rss is not None:
        r["manager_rss_kib"] = rss  # gpusan serve's, or the MPS server's
        idle = num(os.path.join(work, "fence-server-rss-idle.txt")) if name == "fence" else None
        if idle is not None:
            r["manager_rss_kib_idle"] = idle
            r["manager_rss_kib_per_tenant"] = round((rss - idle) / len(outs), 1)
    rounds[name] = r
t = {k: v["iterations_total"] for k, v in rounds.items()}
ratios = {}
if t.get("fence") and t.get("mps"):
    ratios["fence_over_mps"] = round(t["fence"] / t["mps"], 4)
if t.get("fence") and t.get("timeslice"):
    ratios["fence_over_timeslice"] = round(t["fence"] / t["timeslice"], 4)
if t.get("mps") and t.get("timeslice"):
    ratios["mps_over_timeslice"] = round(t["mps"] / t["timeslice"], 4)
print(json.dumps({"what": f"{n} tenants (cotenants victim, {secs} s) sharing the GPU: time-slicing, MPS, gpusan serve; "
                  "throughput = iterations of all tenants; memory sampled 1.5 s in",
                  "tenants": n, "seconds": secs, "rounds": rounds, "ratios": ratios,
                  "manager_log": read(os.path.join(work, "manager.log"))[-2000:]}, indent=1))
PY
python3 -c "
import json; d=json.load(open('$out/fence-throughput.json'))
for k, r in d['rounds'].items(): print(k, 'ok' if r['all_ok'] else 'FAIL', 'iterations', r['iterations_total'], 'GPU MiB/tenant', r['gpu_memory_mib_per_tenant'], 'manager KiB/tenant', r.get('manager_rss_kib_per_tenant'))
print(d['ratios'])"
