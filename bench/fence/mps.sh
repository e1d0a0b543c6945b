#!/usr/bin/env bash
# Runs on the GPU machine (issue 18): does one tenant's fault reach another? The same two
# driver-API programs (bench/fence/cotenants.cpp) side by side: a victim adding 1 to every
# word of a 64 MiB buffer launch after launch for a few seconds, and a faulter that starts
# a second later and stores to an address no allocation holds (`wild`) or executes `trap`.
# Three ways of sharing the GPU, in the same call:
#   timeslice  both programs natively, each its own context (the driver time-slices them)
#   mps        both as clients of an MPS daemon (concurrent, one GPU context underneath)
#   fence      both as tenants of `gpusan serve` (`gpusan run --mode fence`)
# and the victim alone natively (its launch rate without a neighbour).
# Writes $OUT/fence-vs-mps.json.
#
#   bench/fence/mps.sh DIR [SECONDS]    DIR: gpusan, libgpusan_inject.so
set -uo pipefail
dir=$(cd "$1" && pwd)
secs=${2:-4}
out=${OUT:-/tmp/out}
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
export PATH=/usr/local/cuda/bin:$PATH
nvcc -O2 -o "$work/cot" "$repo/bench/fence/cotenants.cpp" -lcuda || exit 1
results="$work/results.jsonl"
: > "$results"

# run_pair NAME FAULT PREFIX...: the victim and, a second later, the faulter, each started
# with PREFIX (empty natively); both outputs and exit codes go to $results.
run_pair() {
  local name=$1 fault=$2; shift 2
  local t0; t0=$(date +%s.%N)
  timeout 60 "$@" "$work/cot" victim "$secs" > "$work/$name-$fault.victim" 2>&1 &
  local v=$!
  sleep 1
  timeout 30 "$@" "$work/cot" faulter "$fault" > "$work/$name-$fault.faulter" 2>&1
  local frc=$?
  wait "$v"; local vrc=$?
  local t1; t1=$(date +%s.%N)
  python3 - "$name" "$fault" "$vrc" "$frc" "$work/$name-$fault.victim" "$work/$name-$fault.faulter" "$t0" "$t1" >> "$results" <<'PY'
import json, sys
name, fault, vrc, frc, vf, ff, t0, t1 = sys.argv[1:]
v = open(vf, errors="replace").read(); f = open(ff, errors="replace").read()
line = next((l for l in v.splitlines() if l.startswith("VICTIM")), "")
parts = line.split()
iters = int(parts[-1]) if parts and parts[-1].lstrip("-").isdigit() else None
print(json.dumps({"sharing": name, "fault": fault, "victim_rc": int(vrc), "victim_ok": line.startswith("VICTIM ok"),
                  "victim_line": line, "victim_iterations": iters, "faulter_rc": int(frc),
                  "faulter_line": next((l for l in f.splitlines() if l.startswith("FAULTER")), ""),
                  "victim_tail": v[-400:], "faulter_tail": f[-400:], "wall_s": round(float(t1) - float(t0), 3)}))
PY
}

# The victim alone: its launch rate without a neighbour. And a launch's host cost as the
# program sees it (20,000 back to back, one synchronization), natively here and under MPS
# and gpusan serve below.
timeout 60 "$work/cot" victim "$secs" > "$work/alone.victim" 2>&1
alone_rc=$?
timeout 60 "$work/cot" launches 20000 > "$work/launches-native.txt" 2>&1

for fault in wild trap; do
  run_pair timeslice "$fault"
done

mps_start() {
  export CUDA_MPS_PIPE_DIRECTORY=$work/mps-pipe CUDA_MPS_LOG_DIRECTORY=$work/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d
  sleep 1
}
mps_stop() {
  echo quit | timeout 10 nvidia-cuda-mps-control
  sleep 1
  pkill -f nvidia-cuda-mps-server 2>/dev/null
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
if command -v nvidia-cuda-mps-control >/dev/null; then
  for fault in wild trap; do
    mps_start
    [ "$fault" = wild ] && timeout 60 "$work/cot" launches 20000 > "$work/launches-mps.txt" 2>&1
    run_pair mps "$fault"
    cp "$work/mps-log/server.log" "$work/mps-$fault.server.log" 2>/dev/null
    mps_stop
  done
else
  echo '{"sharing": "mps", "error": "nvidia-cuda-mps-control not found"}' >> "$results"
fi

for fault in wild trap; do
  sock="$work/serve-$fault.sock"
  "$dir/gpusan" serve --socket "$sock" 2> "$work/manager-$fault.log" &
  manager=$!
  for _ in $(seq 100); do "$dir/gpusan" serve --status --socket "$sock" >/dev/null 2>&1 && break; sleep 0.1; done
  [ "$fault" = wild ] && timeout 60 "$dir/gpusan" run --mode fence --server "$sock" --fence-memory-log2 28 -- \
    "$work/cot" launches 20000 > "$work/launches-fence.txt" 2>&1
  run_pair fence "$fault" "$dir/gpusan" run --mode fence --server "$sock" --fence-memory-log2 28 --
  "$dir/gpusan" serve --status --socket "$sock" > "$work/status-$fault.txt" 2>&1
  alive=$?
  kill "$manager"; wait "$manager" 2>/dev/null
  echo "{\"sharing\": \"fence-manager\", \"fault\": \"$fault\", \"manager_answered_status_after\": $([ $alive = 0 ] && echo true || echo false)}" >> "$results"
done

python3 - "$work" "$alone_rc" "$secs" > "$out/fence-vs-mps.json" <<'PY'
import json, os, sys, glob
work, alone_rc, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rows = [json.loads(l) for l in open(os.path.join(work, "results.jsonl")) if l.strip()]
alone = open(os.path.join(work, "alone.victim"), errors="replace").read()
logs = {os.path.basename(p): open(p, errors="replace").read()[-2000:]
        for p in sorted(glob.glob(os.path.join(work, "*.log")) + glob.glob(os.path.join(work, "status-*.txt")))}
def launches(kind):
    try:
        line = next(l for l in open(os.path.join(work, f"launches-{kind}.txt"), errors="replace") if l.startswith("LAUNCHES"))
        return float(line.split()[-1])
    except (OSError, StopIteration, ValueError):
        return None
cost = {k: launches(k) for k in ("native", "mps", "fence")}
print(json.dumps({"what": "a victim and a faulting neighbour under time-slicing, MPS and gpusan serve (bench/fence/cotenants.cpp)",
                  "seconds": secs, "victim_alone": {"rc": alone_rc, "line": alone.strip()[-200:]},
                  "host_us_per_launch": cost,
                  "runs": rows, "logs": logs}, indent=1))
PY
python3 -c "
import json; d=json.load(open('$out/fence-vs-mps.json'))
print('victim alone:', d['victim_alone']['line'], '| host us per launch', d['host_us_per_launch'])
for r in d['runs']: print(r.get('sharing'), r.get('fault'), 'victim', r.get('victim_line', r.get('error', '')), '| faulter', r.get('faulter_line', ''), r.get('manager_answered_status_after', ''))"
