#!/usr/bin/env bash
# Start-to-finish time of a CuPy program that compiles and launches 50 kernels
# (bench/cupy_start.py), natively and under `gpusan run --mode check`, first run (empty
# caches: CuPy's, gpusan's) and cached run; medians of 3, in one sitting (issue 13).
#
#   bench/cupy-start.sh DIR OUT.json     DIR: the gpusan binary and libgpusan_inject.so
set -uo pipefail
dir=$(cd "$1" && pwd)
out=$2
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 2
work=$(mktemp -d /tmp/gpusan-cupystart.XXXXXX)
export PYTHONUNBUFFERED=1
t() {  # HOME, then the command: prints seconds and whether it finished
  local home=$1; shift
  mkdir -p "$home"
  local s=$EPOCHREALTIME
  HOME=$home timeout 300 "$@" > "$work/last.log" 2>&1
  local rc=$?
  local e=$EPOCHREALTIME
  grep -q "cupy-start done" "$work/last.log" && [ $rc -eq 0 ] && awk -v s="$s" -v e="$e" 'BEGIN { printf "%.3f\n", e - s }' || echo "fail"
}
declare -A samples
for rep in 1 2 3; do
  samples[native_first]+="$(t "$work/n$rep" python3 bench/cupy_start.py) "
  samples[native_cached]+="$(t "$work/n$rep" python3 bench/cupy_start.py) "
  samples[gpusan_first]+="$(t "$work/g$rep" "$dir/gpusan" run --mode check -- python3 bench/cupy_start.py) "
  samples[gpusan_cached]+="$(t "$work/g$rep" "$dir/gpusan" run --mode check -- python3 bench/cupy_start.py) "
done
python3 - "$out" "${samples[native_first]}" "${samples[native_cached]}" "${samples[gpusan_first]}" "${samples[gpusan_cached]}" <<'PY'
import json, statistics, sys
out, *cols = sys.argv[1:]
names = ["native_first", "native_cached", "gpusan_first", "gpusan_cached"]
doc = {"command": "bench/cupy-start.sh DIR OUT.json", "kernels": 50, "unit": "seconds, process start to end"}
for n, c in zip(names, cols):
    xs = [float(x) for x in c.split() if x != "fail"]
    doc[n] = {"samples": xs, "failures": c.split().count("fail"), "median": statistics.median(xs) if xs else None}
m = {n: doc[n]["median"] for n in names}
if all(m.values()):
    doc["first_run_ratio"] = round(m["gpusan_first"] / m["native_first"], 3)
    doc["cached_run_ratio"] = round(m["gpusan_cached"] / m["native_cached"], 3)
    doc["added_per_kernel_first_s"] = round((m["gpusan_first"] - m["native_first"]) / 50, 4)
json.dump(doc, open(out, "w"), indent=1)
print(json.dumps(doc, indent=1))
PY
