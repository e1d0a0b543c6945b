#!/usr/bin/env bash
# Per-tensor bounds inside a pool's segment (issue 15), RMM-style: pool_blocks.cu carves
# a 4 MiB cudaMalloc segment itself and describes each block through the NVTX memory API
# (heap over the segment, one region per block), as RMM does.
#   bug:   a kernel writes 400 bytes past block A (4000 B), through the pool's slack into
#          block B: gpusan --mode check must report it (out of bounds of the NVTX block);
#   clean: the twin, in bounds: gpusan silent, the program's check prints "ok";
#   uaf:   A's region unregistered, the device synchronized, a kernel reads A: recorded
#          (gpusan should report a use after free).
# Native runs are the reference; compute-sanitizer memcheck runs in the same call, plain
# and with `--nvtx yes` (its NVTX support), as the second column: recorded, not judged.
# ok: gpusan finds the bug, is silent on the clean twin, and the clean twin is right.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$WORK"
fail() { echo "{\"case\": \"pool_blocks\", \"ok\": false, \"notes\": \"$1\"}" >"$RESULT"; exit 0; }
[ -x "$GPUSAN" ] || fail "no gpusan at $GPUSAN"
# CUDA 13 ships the NVTX v3 headers (include/nvtx3); the pinned toolchain's are the fallback.
nvtx_inc="$here/../../.toolchain/nvidia/cu13/include"
"$NVCC" -arch=sm_90 -lineinfo -o prog "$here/pool_blocks.cu" 2>nvcc.err \
  || "$NVCC" -arch=sm_90 -lineinfo -I"$nvtx_inc" -o prog "$here/pool_blocks.cu" 2>>nvcc.err \
  || fail "nvcc failed: $(tail -c 300 nvcc.err | tr '\n"' '  ')"
cs=$(command -v compute-sanitizer || true)
[ -n "$cs" ] || cs=$(dirname "$(command -v "$NVCC")")/compute-sanitizer
[ -x "$cs" ] || cs=
export GPUSAN_CACHE_DIR="$WORK/cache"
runs=()
run() {  # label, then the command
  local label=$1; shift
  local t0; t0=$(date +%s.%N)
  timeout 40 "$@" >"$label.out" 2>"$label.err"
  echo "$?" >"$label.rc"
  python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),2))" "$t0" >"$label.time"
  runs+=("$label")
}
for v in clean bug uaf; do run "native-$v" ./prog "$v"; done
for v in clean bug uaf; do
  run "gpusan-$v" "$GPUSAN" run --mode check --report-json "$WORK/gpusan-$v.json" -- ./prog "$v"
done
if [ -n "$cs" ]; then
  for v in clean bug; do
    run "cs-$v" "$cs" --tool memcheck ./prog "$v"
    run "cs-nvtx-$v" "$cs" --tool memcheck --nvtx yes ./prog "$v"
  done
fi
python3 - "$RESULT" "${runs[@]}" <<'PY'
import json, re, sys
path, labels = sys.argv[1], sys.argv[2:]
res = {}
for l in labels:
    out = open(f"{l}.out", errors="replace").read()
    err = open(f"{l}.err", errors="replace").read()
    r = {"rc": int(open(f"{l}.rc").read()), "seconds": float(open(f"{l}.time").read()),
         "stdout_tail": out[-300:], "stderr_tail": err[-1500:]}
    try:
        rep = json.load(open(f"{l}.json"))
        r["by_kind"] = rep["summary"]["by_kind"]
        r["coverage"] = rep.get("coverage", {}).get("summary") if isinstance(rep.get("coverage"), dict) else None
        r["first_error"] = (rep.get("errors") or [{}])[0].get("details", {}).get("nearest")
    except Exception:
        r["by_kind"] = None
    if l.startswith("cs-"):
        m = re.search(r"ERROR SUMMARY: (\d+) error", out + err)
        r["errors"] = int(m.group(1)) if m else None
    res[l] = r
g = lambda l: res.get(l, {}).get("by_kind") or {}
checks = {
    "native_clean_ok": res["native-clean"]["rc"] == 0 and "ok" in res["native-clean"]["stdout_tail"],
    "gpusan_clean_silent": res["gpusan-clean"]["rc"] == 0 and res["gpusan-clean"]["by_kind"] == {}
        and "ok" in res["gpusan-clean"]["stdout_tail"],
    "gpusan_bug_found": g("gpusan-bug").get("out_of_bounds_write", 0) > 0,
}
notes = (f"gpusan uaf: {g('gpusan-uaf')} (expected use_after_free); compute-sanitizer bug: "
         f"{res.get('cs-bug', {}).get('errors')} errors plain, {res.get('cs-nvtx-bug', {}).get('errors')} with --nvtx yes")
doc = {"case": "pool_blocks", "ok": all(checks.values()),
       "expected": "an NVTX-described block overflowed into its neighbour inside one cudaMalloc segment is "
                   "reported by gpusan --mode check, its clean twin silent",
       "checks": checks,
       "native": {k: v for k, v in res.items() if k.startswith("native-")},
       "gpusan": {k: v for k, v in res.items() if k.startswith("gpusan-")},
       "compute_sanitizer": {k: v for k, v in res.items() if k.startswith("cs-")},
       "notes": notes}
json.dump(doc, open(path, "w"), indent=1)
PY
