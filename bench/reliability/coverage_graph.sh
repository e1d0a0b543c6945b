#!/usr/bin/env bash
# The report's coverage against the program's own count (issue 13): a cudart program runs
# two kernels (`add_one`, extern "C"; `scale<float>`, a template) through a CUDA graph
# replayed 50 times and `scale<float>` 3 times more directly. Built with PTX (checked at
# load in check mode) and as machine code only (unchecked). Facts:
# - natively the program prints ok and the launch counts it made;
# - check mode, PTX build: coverage lists add_one 100 and scale<float> 53 launches (each
#   graph replay counts its kernel nodes; the capture counts nothing), both checked, names
#   demangled; --require-checked then changes nothing (exit 0, no unchecked_launch);
# - check mode, SASS-only build: both unchecked ("machine code only"), the ERROR SUMMARY
#   line says no kernel launch was checked; with --require-checked --error-exitcode 97 the
#   run exits 97 with unchecked_launch errors, the program's output unchanged.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$WORK"
fail_build() { echo "{\"case\": \"coverage_graph\", \"ok\": false, \"notes\": \"build failed: $1\"}" >"$RESULT"; exit 0; }
"$NVCC" -O2 -arch=sm_90 -o ptx "$here/coverage_graph.cu" || fail_build ptx
"$NVCC" -O2 -gencode arch=compute_90,code=sm_90 -o sass "$here/coverage_graph.cu" || fail_build sass
[ -x ptx ] && [ -x sass ] || fail_build "no binary"
export GPUSAN_CACHE_DIR="$WORK/cache"

runs=()
run() {  # label, then the command
  local label=$1; shift
  timeout 40 "$@" >"$label.out" 2>"$label.err"
  echo "$?" >"$label.rc"
  runs+=("$label")
}
run native-ptx ./ptx
run native-sass ./sass
run check-ptx "$GPUSAN" run --mode check --report-json "$WORK/check-ptx.json" -- ./ptx
run require-ptx "$GPUSAN" run --mode check --require-checked --error-exitcode 97 --report-json "$WORK/require-ptx.json" -- ./ptx
run check-sass "$GPUSAN" run --mode check --report-json "$WORK/check-sass.json" -- ./sass
run require-sass "$GPUSAN" run --mode check --require-checked --error-exitcode 97 --report-json "$WORK/require-sass.json" -- ./sass

python3 - "$RESULT" "${runs[@]}" <<'PY'
import json, sys
path, labels = sys.argv[1], sys.argv[2:]
res = {}
for l in labels:
    out = open(f"{l}.out", errors="replace").read()
    err = open(f"{l}.err", errors="replace").read()
    r = {"rc": int(open(f"{l}.rc").read()), "stdout": out.strip()[-200:]}
    summary = [x for x in err.splitlines() if "ERROR SUMMARY" in x or "COVERAGE" in x]
    if summary:
        r["summary"] = summary
    try:
        rep = json.load(open(f"{l}.json"))
        r["kinds"] = rep["summary"]["by_kind"]
        r["kernels"] = {k["name"]: [k["launches"], k.get("checked_by") or k.get("unchecked")]
                        for k in rep.get("coverage", {}).get("kernels", [])}
    except Exception as e:  # no report: natively, or gpusan failed
        if not l.startswith("native"):
            r["report_error"] = str(e)
    if r["rc"] != 0:
        r["stderr"] = err[-600:]
    res[l] = r
want = "ok: add_one=100 scale<float>=53"
checks = {}
checks["native"] = all(res[l]["stdout"].endswith(want) and res[l]["rc"] == 0 for l in ("native-ptx", "native-sass"))
def counted(l, checked):
    k = res[l].get("kernels") or {}
    ok = k.get("add_one", [0])[0] == 100 and k.get("scale<float>", [0])[0] == 53 and len(k) == 2
    verdicts = [v[1] for v in k.values()]
    if checked:
        return ok and all(v in ("PTX at load", "build time") for v in verdicts)
    return ok and all("machine code only" in (v or "") for v in verdicts)
checks["check_ptx_counted_and_checked"] = counted("check-ptx", True) and res["check-ptx"]["rc"] == 0 \
    and res["check-ptx"]["stdout"].endswith(want) and not res["check-ptx"].get("kinds")
checks["require_ptx_clean"] = res["require-ptx"]["rc"] == 0 and not res["require-ptx"].get("kinds")
checks["check_sass_unchecked"] = counted("check-sass", False) and res["check-sass"]["rc"] == 0 \
    and any("no kernel launch was checked (2 kernels, 153 launches)" in x for x in res["check-sass"].get("summary", []))
checks["require_sass_fails"] = res["require-sass"]["rc"] == 97 \
    and res["require-sass"].get("kinds", {}).get("unchecked_launch") == 2 and res["require-sass"]["stdout"].endswith(want)
ok = all(checks.values())
json.dump({"case": "coverage_graph", "ok": ok,
           "expected": "coverage counts 100 add_one and 53 scale<float> launches (50 graph replays + 3 direct), "
                       "checked with PTX, unchecked and an error under --require-checked as machine code only",
           "checks": checks, "native": {k: v for k, v in res.items() if k.startswith("native")},
           "gpusan": {k: v for k, v in res.items() if not k.startswith("native")},
           "notes": ""}, open(path, "w"), indent=1)
PY
