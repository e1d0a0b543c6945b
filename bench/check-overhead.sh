#!/usr/bin/env bash
# Runs on the GPU machine: first kernel-time numbers for `gpusan run --mode check`, with
# native and compute-sanitizer memcheck in the same call (CUDA events, medians). Workloads:
# bench/runtime/kernel.cu (saxpy over 64M floats, bandwidth-bound) and launch.cu (1000
# tiny launches). Writes $OUT/check-overhead.json.
#   Usage: bench/check-overhead.sh DIR_WITH_GPUSAN
set -uo pipefail
dir=$(cd "$1" && pwd); repo=$(cd "$(dirname "$0")/.." && pwd); out=${OUT:-/tmp/out}; work=$(mktemp -d)
export PATH=/usr/local/cuda/bin:$PATH
for b in kernel launch; do
  nvcc -O3 -arch=sm_90 -lineinfo -o "$work/$b" "$repo/bench/runtime/$b.cu" || exit 1
done
python3 "$repo/bench/runtime/overhead.py" --bin "$work" --gpusan "$dir/gpusan" --out "$work/gpusan.json" \
  --benches kernel,launch --mode check --rounds 3 > "$work/overhead.txt" 2>&1
python3 - "$work" "$out/check-overhead.json" <<'PY'
import json, subprocess, sys, statistics
work, dest = sys.argv[1:]
doc = json.load(open(work + "/gpusan.json"))
cs = {}
for b in ("kernel", "launch"):
    runs = []
    for _ in range(3):
        p = subprocess.run(["compute-sanitizer", "--tool", "memcheck", f"{work}/{b}"], capture_output=True, text=True, timeout=600)
        for line in p.stdout.splitlines():
            if line.startswith("{") and '"metrics"' in line:
                runs.append(json.loads(line)["metrics"])
    cs[b] = {k: statistics.median(r[k] for r in runs) for k in (runs[0] if runs else {})}
doc["compute_sanitizer"] = cs
json.dump(doc, open(dest, "w"), indent=1)
for b, m in doc["benches"].items():
    for k, v in m.get("metrics", {}).items():
        if k in ("saxpy_64M.ms", "empty.device_us_per_launch", "saxpy4k.device_us_per_launch"):
            c = cs.get(b, {}).get(k)
            print(f"{k:32s} native {v['native']:.4f}  gpusan-check {v['gpusan']:.4f} ({v['ratio']:.3f}x)  compute-sanitizer {c if c is None else round(c, 4)} ({'' if c is None else round(c / v['native'], 2)}x)")
PY
