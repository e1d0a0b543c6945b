#!/usr/bin/env bash
# Runs on the GPU machine: Triton kernels instrumented at build time through the ptxas
# stand-in (`gpusan run --mode check` sets TRITON_PTXAS_PATH). The masked kernel must run
# clean, the unmasked one must be reported out of bounds. Writes $OUT/triton-check.json.
# Usage: bench/injection/triton-check.sh DIR_WITH_GPUSAN
set -uo pipefail
dir=$(cd "$1" && pwd); here=$(cd "$(dirname "$0")" && pwd); out=${OUT:-/tmp/out}; work=$(mktemp -d)
export PATH=/usr/local/cuda/bin:$PATH PYTORCH_NO_CUDA_MEMORY_CACHING=1
mkdir -p "$out"
for mask in 1 0; do
  # A fresh Triton cache per run: the check must see ptxas run, not a cached cubin.
  TRITON_CACHE_DIR="$work/cache$mask" MASK=$mask GPUSAN_PTXAS_KEEP="$work/ptx$mask" \
    "$dir/gpusan" run --mode check --report-json "$work/report$mask.json" -- python3 "$here/triton_oob.py" \
    > "$work/out$mask.txt" 2> "$work/err$mask.txt"
  echo "rc=$?" >> "$work/out$mask.txt"
done
python3 - "$work" "$out/triton-check.json" <<'PY'
import glob, json, sys
work, dest = sys.argv[1:]
rep = {m: json.load(open(f"{work}/report{m}.json")) for m in "10"}
kinds = {m: sorted(r["summary"]["by_kind"]) for m, r in rep.items()}
checks = {
    "stand_in_instrumented_ptx": all(glob.glob(f"{work}/ptx{m}/*.gpusan.ptx") for m in "10"),
    "masked_runs_clean": rep["1"]["summary"]["total"] == 0 and "OK" in open(f"{work}/out1.txt").read(),
    "unmasked_reported_out_of_bounds": any("out_of_bounds" in k for k in kinds["0"]),
}
doc = {"what": "Triton kernels instrumented through the ptxas stand-in", "checks": checks, "all_pass": all(checks.values()),
       "kinds": kinds, "stderr": {m: open(f"{work}/err{m}.txt").read()[-3000:] for m in "10"}, "reports": rep}
json.dump(doc, open(dest, "w"), indent=2)
print(json.dumps(checks))
PY
