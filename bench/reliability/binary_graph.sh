#!/usr/bin/env bash
# Patched kernels launched through CUDA graphs (issue 14, binary route): binary_graph.cu built
# machine-code only (-gencode arch=compute_90,code=sm_90, no PTX), natively, under
# `gpusan run --mode check --route binary` and under compute-sanitizer (memcheck). Before the
# fix, SASS-only programs whose patched kernels ran only in graphs FAULTED under gpusan
# (cudaErrorMisalignedAddress / IllegalAddress at the first synchronization: the graph's
# kernel nodes ran with a userdata gpusan never set). Two scenarios:
# - clean: captured graph (memory nodes inside), uploaded, launched 5 times; a hand-built
#   kernel node graph; kernels launched directly too. Must finish, print the same checksum as
#   native, report nothing, and list every kernel as checked by the binary route;
# - oob: the captured saxpy writes one float past its output's end (in the 256-byte tail, so
#   natively silent): gpusan must report out_of_bounds_write in kernel saxpy.
# ok: both finish with rc 0 natively and under gpusan, no GPU fault under gpusan, clean's
# output identical to native and silent, oob's overflow found, every kernel checked.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$WORK"
fail_build() { echo "{\"case\": \"binary_graph\", \"ok\": false, \"notes\": \"build failed: $1\"}" >"$RESULT"; exit 0; }
"$NVCC" -O2 -gencode arch=compute_90,code=sm_90 -o prog "$here/binary_graph.cu" || fail_build nvcc
[ -x prog ] || fail_build "no binary"
export GPUSAN_CACHE_DIR="$WORK/cache"
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/compute-sanitizer/compute-sanitizer)

runs=()
run() {  # label, then the command
  local label=$1; shift
  timeout 40 "$@" >"$label.out" 2>"$label.err"
  echo "$?" >"$label.rc"
  runs+=("$label")
}
for s in clean oob; do
  run "native-$s" ./prog "$s"
  run "gpusan-$s" "$GPUSAN" run --mode check --route binary --report-json "$WORK/gpusan-$s.json" -- ./prog "$s"
  if [ -x "$cs" ]; then
    run "cs-$s" "$cs" --tool memcheck --print-limit 10 --error-exitcode 0 ./prog "$s"
  fi
done

python3 - "$RESULT" "${runs[@]}" <<'PY'
import json, re, sys
path, labels = sys.argv[1], sys.argv[2:]
res = {}
for l in labels:
    out = open(f"{l}.out", errors="replace").read()
    err = open(f"{l}.err", errors="replace").read()
    r = {"rc": int(open(f"{l}.rc").read()), "finished": re.search(r"^ok$", out, re.M) is not None}
    m = re.search(r"^sum=(\S+)$", out, re.M)
    r["sum"] = m.group(1) if m else None
    r["cuda_errors"] = re.findall(r"CUDA error (\S+)", out)
    if l.startswith("gpusan"):
        try:
            rep = json.load(open(f"{l}.json"))
            r["kinds"] = rep["summary"]["by_kind"]
            r["errors"] = rep["summary"]["total"]
            r["error_kernels"] = sorted({e.get("details", {}).get("kernel", "?") for e in rep.get("errors", [])})
            r["kernels"] = {k["name"]: k.get("checked_by") or k.get("unchecked")
                            for k in rep.get("coverage", {}).get("kernels", [])}
            r["launches"] = {k["name"]: k.get("launches") for k in rep.get("coverage", {}).get("kernels", [])}
            r["counters"] = {k: v for k, v in rep.get("counters", {}).items() if k.startswith("binary")}
        except Exception as e:
            r["report_error"] = str(e)
        r["gpu_fault"] = "GPU fault" in err
        r["summary"] = [x for x in err.splitlines() if "SUMMARY" in x or "COVERAGE" in x or "UNCHECKED" in x]
    if l.startswith("cs"):
        m = re.search(r"ERROR SUMMARY: (\d+) error", out + err)
        r["errors"] = int(m.group(1)) if m else None
        r["kinds"] = sorted(set(re.findall(r"========= (Invalid [^\n]*?) of size", out + err)))
    if r["rc"] != 0 or not r["finished"]:
        r["stderr"] = err[-800:]
    res[l] = r
def g(l, k, d=None):
    return res.get(l, {}).get(k, d)
checks = {}
checks["native_and_gpusan_finish"] = all(g(l, "finished") and g(l, "rc") == 0
                                         for l in labels if not l.startswith("cs"))
checks["no_gpu_fault_under_gpusan"] = not any(g(l, "gpu_fault") for l in labels if l.startswith("gpusan"))
checks["clean_same_output"] = g("native-clean", "sum") is not None and g("gpusan-clean", "sum") == g("native-clean", "sum")
checks["clean_silent"] = g("gpusan-clean", "errors") == 0
checks["every_kernel_checked_by_binary"] = all(
    bool(g(f"gpusan-{s}", "kernels")) and all(v == "binary" for v in g(f"gpusan-{s}", "kernels").values())
    for s in ("clean", "oob"))
checks["oob_found_in_graph_node"] = "out_of_bounds_write" in (g("gpusan-oob", "kinds") or {}) \
    and any("saxpy" in k for k in (g("gpusan-oob", "error_kernels") or []))
ok = all(checks.values())
json.dump({"case": "binary_graph", "ok": ok,
           "expected": "SASS-only program whose kernels run in CUDA graphs (captured with memory nodes, uploaded, "
                       "hand-built kernel node, also direct): under --route binary no fault, clean silent with "
                       "native's output and every kernel checked; a write past the end in a graph node found",
           "checks": checks,
           "verdicts": {s: {"gpusan_binary": g(f"gpusan-{s}", "kinds"), "compute_sanitizer": g(f"cs-{s}", "kinds"),
                            "compute_sanitizer_errors": g(f"cs-{s}", "errors")} for s in ("clean", "oob")},
           "native": {k: v for k, v in res.items() if k.startswith("native")},
           "gpusan": {k: v for k, v in res.items() if k.startswith("gpusan")},
           "compute_sanitizer": {k: v for k, v in res.items() if k.startswith("cs")},
           "notes": "" if any(l.startswith("cs") for l in labels) else "compute-sanitizer not found"},
          open(path, "w"), indent=1)
PY
