#!/usr/bin/env bash
# gpusan run as a drop-in for compute-sanitizer (issue 16): cs_dropin.cu launches `oob`
# (one out-of-bounds write per launch) four times and `good` twice. compute-sanitizer and
# gpusan run it with the same options:
#   --tool memcheck --kernel-name kns=oob --launch-skip 1 --launch-count 2 --print-limit 1
#   --log-file <dir>/x.%p.log --error-exitcode 7
# Facts that must agree: the second and third `oob` launches are checked, so each tool
# finds 2 errors (compute-sanitizer's ERROR SUMMARY; gpusan's summary total), prints 1
# error report (--print-limit 1) into one log file named with its own pid, and exits 7.
# Without the filters and window, both find 4. Natively the program prints ok and exits 0.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$WORK"
fail() { echo "{\"case\": \"cs_dropin\", \"ok\": false, \"notes\": \"$1\"}" >"$RESULT"; exit 0; }
"$NVCC" -O2 -lineinfo -arch=sm_90 -o app "$here/cs_dropin.cu" || fail "build failed"
[ -x app ] || fail "no binary"
cs=$(command -v compute-sanitizer || true)
for d in "$(dirname "$(command -v "$NVCC" 2>/dev/null || echo /x/x)")" "${CUDA_HOME:-/usr/local/cuda}/bin" \
         "${CUDA_HOME:-/usr/local/cuda}/compute-sanitizer" /usr/local/cuda/bin; do
  [ -z "$cs" ] && [ -x "$d/compute-sanitizer" ] && cs="$d/compute-sanitizer"
done
[ -n "$cs" ] || fail "compute-sanitizer not found"
export GPUSAN_CACHE_DIR="$WORK/cache"
flags=(--tool memcheck --kernel-name kns=oob --launch-skip 1 --launch-count 2 --print-limit 1 --error-exitcode 7)
mkdir -p cs-logs gpusan-logs

timeout 40 ./app >native.out 2>native.err; echo $? >native.rc
timeout 50 "$cs" "${flags[@]}" --log-file "$WORK/cs-logs/x.%p.log" ./app >cs.out 2>cs.err; echo $? >cs.rc
timeout 50 "$GPUSAN" run "${flags[@]}" --log-file "$WORK/gpusan-logs/x.%p.log" --report-json "$WORK/gpusan.json" \
  -- ./app >gpusan.out 2>gpusan.err; echo $? >gpusan.rc
timeout 50 "$cs" --tool memcheck --error-exitcode 7 ./app >cs-all.out 2>&1; echo $? >cs-all.rc
timeout 50 "$GPUSAN" run --tool memcheck --error-exitcode 7 --report-json "$WORK/gpusan-all.json" -- ./app \
  >gpusan-all.out 2>gpusan-all.err; echo $? >gpusan-all.rc

python3 - "$RESULT" <<'PY'
import glob, json, os, re, sys
rc = lambda l: int(open(f"{l}.rc").read())
def cs_errors(text):
    m = re.search(r"ERROR SUMMARY: (\d+) error", text)
    return int(m.group(1)) if m else None
def logs(d):
    files = glob.glob(f"{d}/x.*.log")
    return [os.path.basename(f) for f in files], "".join(open(f, errors="replace").read() for f in files)
def gpusan_total(path):
    try:
        return json.load(open(path))["summary"]["total"]
    except Exception:
        return None
cs_files, cs_log = logs("cs-logs")
g_files, g_log = logs("gpusan-logs")
cs = {"rc": rc("cs"), "log_files": cs_files, "errors": cs_errors(cs_log),
      "printed": cs_log.count("Invalid __global__ write"),
      "all_rc": rc("cs-all"), "all_errors": cs_errors(open("cs-all.out", errors="replace").read())}
g = {"rc": rc("gpusan"), "log_files": g_files, "errors": gpusan_total("gpusan.json"),
     "printed": g_log.count("Out-of-bounds __global__ write"),
     "all_rc": rc("gpusan-all"), "all_errors": gpusan_total("gpusan-all.json")}
try:
    g["coverage"] = {f'{k["name"]}': [k["launches"], k.get("unchecked") or k.get("checked_by")]
                     for k in json.load(open("gpusan.json"))["coverage"]["kernels"]}
except Exception as e:
    g["coverage_error"] = str(e)
native = {"rc": rc("native"), "stdout": open("native.out").read().strip()}
pid_named = lambda files: len(files) == 1 and re.fullmatch(r"x\.\d+\.log", files[0]) is not None
checks = {
    "native": native == {"rc": 0, "stdout": "ok"},
    "cs_as_expected": cs["rc"] == 7 and cs["errors"] == 2 and cs["printed"] == 1 and pid_named(cs_files)
                      and cs["all_errors"] == 4 and cs["all_rc"] == 7,
    "gpusan_agrees": all(g[k] == cs[k] for k in ("rc", "errors", "printed", "all_rc", "all_errors"))
                     and pid_named(g_files),
}
if not all(checks.values()):
    g["stderr"] = open("gpusan.err", errors="replace").read()[-1500:]
    g["log"] = g_log[-1500:]
    cs["log"] = cs_log[-1500:]
out = {"case": "cs_dropin", "ok": all(checks.values()),
       "expected": "compute-sanitizer and gpusan with the same options agree: 2 errors (launches 2 and 3 of oob), "
                   "1 printed, one log file named with the pid, exit 7; 4 errors without filters",
       "native": native, "compute_sanitizer": cs, "gpusan": g, "checks": checks}
json.dump(out, open(sys.argv[1], "w"), indent=1)
PY
