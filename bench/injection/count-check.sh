#!/usr/bin/env bash
# Runs on the GPU machine: proves kernel substitution end to end. Programs run under
# `gpusan run --mode count`; the instrumented kernels count their executed global memory
# instructions, and the count must equal what the program does (vecadd: 10 launches x
# 2^20 threads x 3 accesses; driver_ptx: 4096 threads x 2). Each runs twice: the second
# run must load the instrumented machine code from gpusan's cache. PyTorch and Triton
# (machine code only on this GPU) must run correctly with their modules listed unchecked.
# Writes $OUT/substitution.json.   Usage: bench/injection/count-check.sh DIR_WITH_GPUSAN
set -uo pipefail
dir=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}
work=$(mktemp -d)
export PATH=/usr/local/cuda/bin:$PATH GPUSAN_CACHE_DIR="$work/cache"
nvcc -O2 -arch=sm_90 -o "$work/vecadd_static" "$here/vecadd.cu"
nvcc -O2 -arch=sm_90 -cudart shared -o "$work/vecadd_shared" "$here/vecadd.cu"
nvcc -O2 -o "$work/driver_ptx" "$here/driver_ptx.cpp" -lcuda
rows="$work/rows.jsonl"; : > "$rows"
run() { # name expected_count run_index command...
  local name=$1 expect=$2 idx=$3; shift 3
  local rep="$work/$name-$idx.json" t0 t1 rc
  t0=$(date +%s%N)
  "$dir/gpusan" run --mode count --report-json "$rep" -- "$@" > "$work/stdout" 2> "$work/stderr"; rc=$?
  t1=$(date +%s%N)
  python3 - "$name" "$expect" "$idx" "$rc" "$(( (t1 - t0) / 1000000 ))" "$rep" "$work/stdout" "$work/stderr" >> "$rows" <<'PY'
import json, sys
name, expect, idx, rc, ms, rep, so, se = sys.argv[1:]
try: doc = json.load(open(rep))
except Exception as e: doc = {"error": str(e)}
c = doc.get("counters", {})
print(json.dumps({"program": name, "run": int(idx), "exit_code": int(rc), "wall_ms": int(ms),
  "expected_count": None if expect == "-" else int(expect), "counters": c,
  "count_matches": None if expect == "-" else c.get("executed_memory_instructions") == int(expect),
  "unchecked_modules": doc.get("unchecked_modules", {}), "errors": doc.get("summary", {}).get("total"),
  "stdout_tail": open(so, errors="replace").read()[-300:], "stderr_tail": open(se, errors="replace").read()[-1500:]}))
PY
  echo "$name run $idx rc=$rc $(tail -c 120 "$work/stdout" | tr '\n' ' ')"
}
for i in 1 2; do
  run vecadd_static 31457280 $i "$work/vecadd_static"
  run vecadd_shared 31457280 $i "$work/vecadd_shared"
  run driver_ptx 8192 $i "$work/driver_ptx"
done
run pytorch - 1 python3 "$here/torch_step.py"
run triton - 1 python3 "$here/triton_add.py"
for p in vecadd_static driver_ptx; do # native wall time for the startup comparison
  t0=$(date +%s%N); "$work/$p" > /dev/null; t1=$(date +%s%N)
  echo "{\"program\": \"$p\", \"native_wall_ms\": $(( (t1 - t0) / 1000000 ))}" >> "$rows"
done
python3 - "$rows" "$out/substitution.json" <<'PY'
import json, sys, subprocess
rows = [json.loads(l) for l in open(sys.argv[1])]
gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
json.dump({"what": "gpusan run --mode count: kernel substitution proven by exact counts, cache reuse, programs without PTX",
           "gpu": gpu, "rows": rows}, open(sys.argv[2], "w"), indent=1)
for r in rows:
    print({k: r.get(k) for k in ("program", "run", "exit_code", "wall_ms", "native_wall_ms", "expected_count", "count_matches", "counters", "unchecked_modules")})
PY
