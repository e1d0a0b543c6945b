#!/usr/bin/env bash
# Runs on the GPU machine: which of the driver's private export tables (cuGetExportTable)
# do real programs ask for? Fence mode's forwarding layer must serve them to tenants
# (docs/fence-design.md §8). Each program runs with libgpusan_inject.so preloaded and
# GPUSAN_PROBE_OUT set (nothing checked: the probe records and passes every call through);
# writes $OUT/export-tables.json: per program, the tables asked for (UUID, result, first
# word of the table) and the driver functions resolved through cuGetProcAddress.
#
#   bench/injection/export-tables.sh DIR_WITH_LIB
set -uo pipefail
lib=$(cd "$1" && pwd)/libgpusan_inject.so
out=${OUT:-/tmp/out}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
export PATH=/usr/local/cuda/bin:$PATH
nvcc -O2 -arch=sm_90 -o "$work/vecadd" "$here/vecadd.cu"
declare -A programs=(
  [cuda_cpp]="$work/vecadd"
  [pytorch]="python3 $here/torch_step.py"
  [cupy]="python3 -c 'import cupy as cp; x = cp.arange(1 << 20, dtype=cp.float32); print(float((x * 2).sum()))'"
  [triton]="python3 $here/triton_add.py"
)
for name in "${!programs[@]}"; do
  mkdir -p "$work/$name"
  GPUSAN_PROBE_OUT="$work/$name" LD_PRELOAD="$lib" timeout 120 bash -c "${programs[$name]}" >"$work/$name.log" 2>&1
  echo "$name: rc=$?"
done
python3 - "$work" "$out/export-tables.json" <<'PY'
import glob, json, os, sys
work, out = sys.argv[1:]
doc = {"what": "cuGetExportTable requests and cuGetProcAddress resolutions of real programs, "
               "libgpusan_inject.so preloaded with GPUSAN_PROBE_OUT (bench/injection/export-tables.sh)",
       "programs": {}}
for d in sorted(p for p in glob.glob(os.path.join(work, "*")) if os.path.isdir(p)):
    tables, procs = {}, set()
    for f in glob.glob(os.path.join(d, "probe-*.json")):
        p = json.load(open(f))
        for k, n in (p.get("export_tables") or {}).items():
            tables[k] = tables.get(k, 0) + n
        procs |= {r["symbol"] for r in p.get("resolved", []) if r.get("door") == "getproc"}
    log = open(d + ".log", errors="replace").read()[-400:]
    doc["programs"][os.path.basename(d)] = {"export_tables": tables, "getproc_symbols": sorted(procs),
                                            "log_tail": log}
json.dump(doc, open(out, "w"), indent=1)
for name, p in doc["programs"].items():
    print(name, len(p["export_tables"]), "tables,", len(p["getproc_symbols"]), "getproc symbols")
    for k, n in p["export_tables"].items():
        print("   ", k, n)
PY
