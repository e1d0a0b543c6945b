#!/usr/bin/env bash
# Runs on the GPU machine (issue 18): N tenants at once, one of them faulting. N-1 victims
# (bench/fence/cotenants.cpp `victim`: 64 MiB each, launch after launch for SECONDS, every
# word checked at the end) and, a second in, a faulter (`trap`, or `wild` with FAULT=wild).
# Under gpusan serve, then the same under MPS. Then, under gpusan serve, the recovery: from
# the faulter's exit to a new tenant's first finished launch (`cotenants launches 1`).
# Writes $OUT/fence-many.json.
#
#   bench/fence/many.sh DIR [N] [SECONDS]    DIR: gpusan, libgpusan_inject.so (N default 16)
set -uo pipefail
dir=$(cd "$1" && pwd)
n=${2:-16}
secs=${3:-5}
fault=${FAULT:-trap}
out=${OUT:-/tmp/out}
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
export PATH=/usr/local/cuda/bin:$PATH
nvcc -O2 -o "$work/cot" "$repo/bench/fence/cotenants.cpp" -lcuda || exit 1

# round NAME PREFIX...: N-1 victims and the faulter, each started with PREFIX.
round() {
  local name=$1; shift
  local pids=()
  for i in $(seq 2 "$n"); do
    timeout 120 "$@" "$work/cot" victim "$secs" > "$work/$name-victim$i.txt" 2>&1 &
    pids+=($!)
  done
  sleep 1
  timeout 60 "$@" "$work/cot" faulter "$fault" > "$work/$name-faulter.txt" 2>&1
  echo "$?" > "$work/$name-faulter.rc"
  date +%s.%N > "$work/$name-faulter.end"
  for p in "${pids[@]}"; do wait "$p"; done
}

sock="$work/s.sock"
"$dir/gpusan" serve --socket "$sock" 2> "$work/manager.log" &
manager=$!
for _ in $(seq 100); do "$dir/gpusan" serve --status --socket "$sock" >/dev/null 2>&1 && break; sleep 0.1; done
fence=("$dir/gpusan" run --mode fence --server "$sock" --fence-memory-log2 28 --)
# --status while they run: a background tenant a second in.
( sleep 1.5; "$dir/gpusan" serve --status --socket "$sock" > "$work/status-during.txt" 2>&1 ) &
round fence "${fence[@]}"
# Recovery: once the round is over (the faulter gone), a new tenant from its start to its
# first launch done.
t0=$(date +%s.%N)
timeout 60 "${fence[@]}" "$work/cot" launches 1 > "$work/recovery.txt" 2>&1
t1=$(date +%s.%N)
"$dir/gpusan" serve --status --socket "$sock" > "$work/status-after.txt" 2>&1
kill "$manager"; wait "$manager" 2>/dev/null

if command -v nvidia-cuda-mps-control >/dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY=$work/mps-pipe CUDA_MPS_LOG_DIRECTORY=$work/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d
  sleep 1
  round mps
  echo quit | timeout 10 nvidia-cuda-mps-control
  sleep 1
  pkill -f nvidia-cuda-mps-server 2>/dev/null
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
fi

python3 - "$work" "$n" "$secs" "$fault" "$t0" "$t1" > "$out/fence-many.json" <<'PY'
import glob, json, os, sys
work, n, secs, fault, t0, t1 = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], float(sys.argv[5]), float(sys.argv[6])
def read(p):
    try:
        return open(p, errors="replace").read()
    except OSError:
        return ""
rounds = {}
for name in ("fence", "mps"):
    victims = [read(p) for p in sorted(glob.glob(os.path.join(work, f"{name}-victim*.txt")))]
    if not victims:
        continue
    lines = [next((l for l in v.splitlines() if l.startswith("VICTIM")), "no VICTIM line") for v in victims]
    rounds[name] = {"victims": len(victims), "victims_ok": sum(l.startswith("VICTIM ok") for l in lines),
                    "victim_lines": lines,
                    "faulter": next((l for l in read(os.path.join(work, f"{name}-faulter.txt")).splitlines()
                                     if l.startswith("FAULTER")), "no FAULTER line"),
                    "faulter_rc": read(os.path.join(work, f"{name}-faulter.rc")).strip()}
rec = read(os.path.join(work, "recovery.txt"))
print(json.dumps({"what": f"{n} tenants at once, one faulting ({fault}) a second in: gpusan serve, then MPS; then the recovery",
                  "tenants": n, "seconds": secs, "fault": fault, "rounds": rounds,
                  "recovery": {"new_tenant_first_launch_s": round(t1 - t0, 4), "ok": "LAUNCHES" in rec, "output": rec[-300:]},
                  "status_during": read(os.path.join(work, "status-during.txt"))[-3000:],
                  "status_after": read(os.path.join(work, "status-after.txt"))[-1000:],
                  "manager_log": read(os.path.join(work, "manager.log"))[-4000:]}, indent=1))
PY
python3 -c "
import json; d=json.load(open('$out/fence-many.json'))
for k, r in d['rounds'].items(): print(k, 'victims ok', r['victims_ok'], 'of', r['victims'], '| faulter', r['faulter'][-80:].replace(chr(10), ' '))
print('recovery', d['recovery'])"
