#!/usr/bin/env bash
# Coverage as the report states it, against an independent count (issue 13), on the GPU
# machine: a PyTorch training step (20 steps of a 4-layer Transformer), the same model
# torch.compile'd, a CuPy program that counts its own launches, and a JAX program.
#
#   bench/coverage.sh DIR OUT.json     DIR: the gpusan binary and libgpusan_inject.so
#
# Independent counts: torch.profiler (CUPTI) in a native run of the same program for the
# PyTorch ones (every kernel launched, program start to end); the program's own count for
# CuPy; none for JAX (its report's numbers are recorded as they are).
set -uo pipefail
dir=$(cd "$1" && pwd)
out=$2
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 2
work=$(mktemp -d /tmp/gpusan-coverage.XXXXXX)
export HOME=$work/home PYTHONUNBUFFERED=1
mkdir -p "$HOME"
results=()
one() {  # name, then the program and its arguments
  local name=$1; shift
  timeout 300 python3 "$@" --profile > "$work/$name.native" 2>&1
  timeout 400 "$dir/gpusan" run --mode check --report-json "$work/$name.json" -- python3 "$@" > "$work/$name.gpusan" 2>&1
  python3 - "$name" "$work/$name.native" "$work/$name.json" "$work/$name.gpusan" > "$work/$name.row" <<'PY'
import json, sys
name, native, report, log = sys.argv[1:]
row = {"program": name}
for line in open(native, errors="replace"):
    if line.startswith("{"):
        row["independent"] = json.loads(line)
try:
    doc = json.load(open(report))
    cov = doc.get("coverage", {})
    row["report"] = cov.get("totals")
    row["by_kind"] = doc.get("summary", {}).get("by_kind")
    row["unchecked_examples"] = [
        {"name": k["name"][:100], "launches": k["launches"], "why": k.get("unchecked")}
        for k in cov.get("kernels", []) if k.get("unchecked")
    ][:8]
    row["checked"] = [
        {"name": k["name"][:100], "launches": k["launches"], "route": k.get("checked_by")}
        for k in cov.get("kernels", []) if not k.get("unchecked")
    ][:12]
except Exception as e:
    row["error"] = repr(e)
row["summary_line"] = [l.strip() for l in open(log, errors="replace") if "COVERAGE:" in l][-1:]
ind, rep = row.get("independent", {}), row.get("report") or {}
if "profiled_launches" in ind:
    row["launches_match"] = ind["profiled_launches"] == rep.get("launches")
if "program_launches" in ind:
    row["launches_match"] = ind["program_launches"] == rep.get("launches")
print(json.dumps(row))
PY
  cat "$work/$name.row"
  results+=("$work/$name.row")
}
one torch_train bench/coverage/torch_train.py
one torch_compile bench/coverage/torch_train.py --compile
one cupy bench/coverage/cupy_program.py
one jax bench/coverage/jax_program.py
python3 - "$out" "${results[@]}" <<'PY'
import json, sys
rows = [json.loads(open(f).read()) for f in sys.argv[2:] if open(f).read().strip()]
json.dump({"command": "bench/coverage.sh DIR OUT.json", "programs": rows}, open(sys.argv[1], "w"), indent=1)
PY
