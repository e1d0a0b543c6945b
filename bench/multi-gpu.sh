#!/usr/bin/env bash
# Issue 21's GPU call, for a host with 2 or more GPUs (`run` kind nvidia-h100-x2): writes
# everything under $OUT and a log, $OUT/multi-gpu.log. Fits one call (at most 560 s).
#
#   bench/multi-gpu.sh DIR    DIR: gpusan and libgpusan_inject.so (release, stripped)
#
# 1. tests/cases/multi_gpu/*.cu (peer copies past the end and naming the wrong device, a
#    kernel on device 0 writing past or reading freed memory of device 1 through peer access,
#    their clean twin), built with the machine's nvcc and judged by tests/cases/suite.py in
#    modes api and check, with compute-sanitizer beside → $OUT/multi-gpu-cases.json  ≤ 120 s
# 2. bench/multi_gpu/ddp_step.py under torchrun on 2 GPUs (the MLP, then the Transformer):
#    natively, under `gpusan run --mode check`, `--mode canary`, and compute-sanitizer
#    memcheck (3 steps; its ERROR SUMMARY lines counted), each judged: the parameters' hash
#    equal to native on every rank, no finding, median step time per rank → $OUT/ddp.json,
#    rewritten after each run                                                    ≤ 420 s
#
# NCCL's NVLink multicast stays off (NCCL_NVLS_ENABLE=0, KINDS.md); its ring algorithm and
# simple protocol are fixed, so that the sums, and so the hash, do not depend on timing.
set -uo pipefail
dir=${1:?usage: bench/multi-gpu.sh DIR}
dir=$(cd "$dir" && pwd)
out=${OUT:-/tmp/out}
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo" || exit 2
mkdir -p "$out"
log=$out/multi-gpu.log
work=$(mktemp -d)
say() { echo "== $(date +%T) $*" | tee -a "$log"; }
{ date; nvidia-smi -L; nvidia-smi topo -m; cat "$dir/COMMIT" 2>/dev/null; } > "$log" 2>&1
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$gpus" -lt 2 ]; then
  say "needs 2 GPUs, found $gpus: nothing run"
  exit 3
fi
export NCCL_NVLS_ENABLE=0 NCCL_ALGO=Ring NCCL_PROTO=Simple CUBLAS_WORKSPACE_CONFIG=:4096:8
nvcc=${NVCC:-nvcc}
cs=${COMPUTE_SANITIZER:-compute-sanitizer}

# ---------------------------------------------------------------- 1. the cases
say "building tests/cases/multi_gpu"
mkdir -p "$work/bin"
for src in tests/cases/multi_gpu/*.cu; do
  name=$(basename "$src" .cu)
  ( timeout 120 "$nvcc" -arch=sm_90 -lineinfo -o "$work/bin/$name" "$src" > "$work/bin/$name.log" 2>&1 \
      || say "BUILD FAILED: $src" ) &
done
wait
cat "$work"/bin/*.log >> "$log" 2>/dev/null
say "cases"
timeout 100 python3 tests/cases/suite.py --cases tests/cases/multi_gpu --bin "$work/bin" --gpusan "$dir/gpusan" \
  --out "$out/multi-gpu-cases.json" --modes "api check" --compute-sanitizer "$cs" --no-interface \
  --deadline $(( $(date +%s) + 90 )) --logs "$work/logs" --table-out "$out/multi-gpu-cases.txt" >> "$log" 2>&1
say "suite.py exit $?"

# ---------------------------------------------------------------- 2. DDP
# The summary, rewritten after each run: a call cut short still leaves what it had.
summarize() {
  python3 - "$out" "$work/ddp-runs.txt" "$work" > "$out/ddp.json.tmp" 2>> "$log" <<'PY' && mv "$out/ddp.json.tmp" "$out/ddp.json"
import json, os, re, sys
out, runs, work = sys.argv[1], sys.argv[2], sys.argv[3]


def max_abs_diff(name, model):
    # Rank 0's parameters against native's: a recompiled kernel changes low bits only.
    try:
        import torch
        a = torch.load(os.path.join(work, f"params-{name}-{model}.pt"))
        b = torch.load(os.path.join(work, f"params-native-{model}.pt"))
        return float((a - b).abs().max()) if a.shape == b.shape else None
    except Exception:
        return None


rows = []
for line in open(runs):
    name, model, rc, log = line.split()
    ranks = []
    for r in range(2):
        p = os.path.join(out, f"ddp-{name}-{model}-rank{r}.json")
        ranks.append(json.load(open(p)) if os.path.exists(p) else None)
    findings = None
    report = os.path.join(out, f"ddp-{name}-{model}-report.json")
    if os.path.exists(report):
        doc = json.load(open(report))
        findings = {"total": doc["summary"]["total"], "by_kind": doc["summary"]["by_kind"],
                    "cuda_processes": doc.get("cuda_processes"), "notes": doc.get("notes", [])}
    elif name == "sanitizer" and os.path.exists(log):
        # compute-sanitizer prints one ERROR SUMMARY per process it followed.
        counts = [int(n) for n in re.findall(r"ERROR SUMMARY: (\d+) error", open(log, errors="replace").read())]
        findings = {"total": sum(counts), "error_summaries": counts}
    steps = next((r["steps"] for r in ranks if r), None)
    rows.append({"run": name, "model": model, "rc": int(rc), "steps": steps, "findings": findings,
                 "median_ms": [r and r["median_ms"] for r in ranks],
                 "params_sha256": [r and r["params_sha256"] for r in ranks]})
native = {r["model"]: r for r in rows if r["run"] == "native"}
for r in rows:
    n = native.get(r["model"])
    if not n or r["run"] == "native":
        continue
    if r["steps"] == n["steps"]:
        r["same_params_as_native"] = r["params_sha256"] == n["params_sha256"] and None not in r["params_sha256"]
        r["params_max_abs_diff_vs_native"] = max_abs_diff(r["run"], r["model"])
    r["step_ratio_vs_native"] = [m and b and m / b for m, b in zip(r["median_ms"], n["median_ms"])]
json.dump({"what": "bench/multi-gpu.sh: DDP on 2 GPUs natively, under gpusan check and canary, and "
           "compute-sanitizer (fewer steps: its parameters are not compared)", "runs": rows}, sys.stdout, indent=1)
PY
}
ddp() {  # NAME MODEL STEPS LIMIT WRAPPER...
  local name=$1 model=$2 steps=$3 limit=$4
  shift 4
  local t0 txt="$work/ddp-$name-$model.txt"
  t0=$(date +%s)
  timeout "$limit" "$@" torchrun --standalone --nproc_per_node=2 bench/multi_gpu/ddp_step.py \
    --model "$model" --steps "$steps" --out "$out/ddp-$name-$model" --params "$work/params-$name-$model.pt" > "$txt" 2>&1
  local rc=$?
  tail -40 "$txt" >> "$log"
  say "ddp $name $model: rc=$rc after $(( $(date +%s) - t0 ))s"
  echo "$name $model $rc $txt" >> "$work/ddp-runs.txt"
  summarize
}
# Limits that fit one call (600 s) with the cases' 120: 2 x (45 + 75 + 45) + 90 = 420.
for model in mlp transformer; do
  ddp native "$model" 20 45
  ddp check "$model" 20 75 "$dir/gpusan" run --mode check --report-json "$out/ddp-check-$model-report.json" --
  ddp canary "$model" 20 45 "$dir/gpusan" run --mode canary --report-json "$out/ddp-canary-$model-report.json" --
done
ddp sanitizer mlp 3 90 "$cs" --target-processes all --tool memcheck --print-limit 20

cat "$out/ddp.json" >> "$log" 2>/dev/null
tar -czf "$out/multi-gpu-logs.tar.gz" -C "$work" . 2>/dev/null
say "done"
