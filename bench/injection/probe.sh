#!/usr/bin/env bash
# Runs on the GPU machine: which door does each kind of CUDA program take to the driver?
# Builds the probe programs with the machine's nvcc, runs each natively, with
# libgpusan_inject.so preloaded, and with it injected by the driver
# (CUDA_INJECTION64_PATH), and writes $OUT/injection-probe.json.
#
# Usage (from the repo root, on the GPU machine): bench/injection/probe.sh DIR_WITH_LIB
set -uo pipefail
lib_dir=$(cd "$1" && pwd)
lib="$lib_dir/libgpusan_inject.so"
out=${OUT:-/tmp/out}
work=$(mktemp -d)
here=$(cd "$(dirname "$0")" && pwd)
export PATH=/usr/local/cuda/bin:$PATH

san=$(ls /usr/local/cuda/compute-sanitizer/libsanitizer-public.so /usr/local/cuda*/compute-sanitizer/libsanitizer-public.so 2>/dev/null | head -1)
echo "sanitizer library: ${san:-none}"
nvcc --version | tail -2
nvcc -O2 -arch=sm_90 -o "$work/vecadd_static" "$here/vecadd.cu"
nvcc -O2 -arch=sm_90 -cudart shared -o "$work/vecadd_shared" "$here/vecadd.cu"
nvcc -O2 -o "$work/driver_ptx" "$here/driver_ptx.cpp" -lcuda

programs=(
  "static_cudart:$work/vecadd_static"
  "shared_cudart:$work/vecadd_shared"
  "driver_ptx:$work/driver_ptx"
  "pytorch:python3 $here/torch_step.py"
  "triton:python3 $here/triton_add.py"
)
results="$work/results.jsonl"
: > "$results"
for entry in "${programs[@]}"; do
  name=${entry%%:*}; cmd=${entry#*:}
  for mode in native preload inject; do
    pdir="$work/probe-$name-$mode"; mkdir -p "$pdir"
    env_args=(GPUSAN_PROBE_OUT="$pdir")
    case $mode in
      preload) env_args+=(LD_PRELOAD="$lib") ;;
      inject)  env_args+=(CUDA_INJECTION64_PATH="$lib" GPUSAN_SANITIZER_LIB="$san") ;;
    esac
    start=$(date +%s%N)
    env "${env_args[@]}" timeout 300 $cmd > "$work/stdout" 2> "$work/stderr"
    rc=$?
    secs=$(( ($(date +%s%N) - start) / 1000000 ))
    python3 - "$name" "$mode" "$rc" "$secs" "$work/stdout" "$work/stderr" "$pdir" >> "$results" <<'PY'
import json, sys, glob
name, mode, rc, secs, so, se, pdir = sys.argv[1:]
probes = [json.load(open(p)) for p in sorted(glob.glob(pdir + "/probe-*.json"))]
print(json.dumps({"program": name, "mode": mode, "exit_code": int(rc), "seconds": int(secs) / 1000,
  "stdout": open(so, errors="replace").read()[-2000:], "stderr": open(se, errors="replace").read()[-3000:], "probes": probes}))
PY
    echo "$name $mode rc=$rc $(tail -c 200 "$work/stdout" | tr '\n' ' ')"
  done
done
python3 - "$results" "$out/injection-probe.json" <<'PY'
import json, sys, platform, subprocess
runs = [json.loads(l) for l in open(sys.argv[1])]
smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
json.dump({"gpu": smi, "host": platform.platform(), "runs": runs}, open(sys.argv[2], "w"), indent=1)
PY
