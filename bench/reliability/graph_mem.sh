#!/usr/bin/env bash
# CUDA graph memory nodes (issue 12): memory a graph's allocation node made, freed outside
# the graph with cudaFree / cudaFreeAsync and trimmed, comes back at the next launch; used
# to be "Free of unknown pointer" and double frees. Native, `gpusan run --mode api` and
# `--mode check`: correct sums, exit 0, silent (with --leak-check full); the variant whose
# kernel writes one element past the graph's allocation is reported in check mode.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$WORK"
"$NVCC" -arch=sm_90 -lineinfo -o prog "$here/graph_mem.cu" ||
  { echo '{"ok": false, "notes": "nvcc failed"}' >"$RESULT"; exit 0; }
runs=()
run() {  # label, then the command
  local label=$1; shift
  timeout 60 "$@" >"$label.out" 2>"$label.err"
  echo "$?" >"$label.rc"
  runs+=("$label")
}
run native ./prog
run native-bug ./prog bug
for mode in api check; do
  run "$mode" "$GPUSAN" run --mode "$mode" --leak-check full --report-json "$WORK/$mode.json" -- ./prog
done
run check-bug "$GPUSAN" run --mode check --report-json "$WORK/check-bug.json" -- ./prog bug
python3 - "$RESULT" "${runs[@]}" <<'PY'
import json, sys
path, labels = sys.argv[1], sys.argv[2:]
res, ok = {}, True
for l in labels:
    out = open(f"{l}.out", errors="replace").read()
    r = {"rc": int(open(f"{l}.rc").read()), "stdout_tail": out[-300:],
         "stderr_tail": open(f"{l}.err", errors="replace").read()[-800:]}
    try:
        rep = json.load(open(f"{l}.json")); r["kinds"] = sorted(rep["summary"]["by_kind"]); r["total"] = rep["summary"]["total"]
        r["notes"] = rep.get("notes", [])
    except Exception:
        r["kinds"] = None
    if l == "native":
        good = r["rc"] == 0 and "ok" in out
    elif l == "native-bug":
        good = True  # an out-of-bounds write natively: whatever happens is the reference
    elif l in ("api", "check"):
        good = r["rc"] == 0 and "ok" in out and r["kinds"] == []
    else:  # check-bug
        good = r["kinds"] is not None and any(k.startswith("out_of_bounds") for k in r["kinds"])
    r["ok"] = good
    ok &= good
    res[l] = r
json.dump({"case": "graph_mem", "ok": ok,
           "expected": "graph allocations freed outside the graph (cudaFree, cudaFreeAsync, trim), freed inside, captured: correct, exit 0, silent in api and check mode; the off-by-one reported in check mode",
           "native": {"clean": res.pop("native"), "bug": res.pop("native-bug")}, "gpusan": res, "notes": ""},
          open(path, "w"), indent=1)
PY
