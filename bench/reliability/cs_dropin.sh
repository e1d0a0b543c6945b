#!/usr/bin/env bash
# gpusan run as a drop-in for compute-sanitizer (issue 16): cs_dropin.cu launches `oob`
# (one out-of-bounds write per launch) four times and `good` twice, synchronizing after
# each; a launch that fails ends the program ("launch failed", exit 3).
#
# compute-sanitizer stops a kernel at its first error: the launch fails and the program
# ends there (bench/results/h100-issue15: its ERROR SUMMARY then counts the one memcheck
# error plus "Target application returned an error"). gpusan does that with
# `--check-reaction abort`; by default (`report`) the faulting access is skipped and the
# kernel and program go on, so every launch's error is counted. So:
#   filtered (`--tool memcheck --kernel-name kns=oob --launch-skip 1 --launch-count 2
#   --print-limit 1 --log-file <dir>/x.%p.log --error-exitcode 7`):
#     compute-sanitizer and gpusan --check-reaction abort agree: 1 memcheck error (oob's
#     second launch, the first checked), the program fails there, 1 printed, one log file
#     named with the tool's pid, exit 7; gpusan's default finds 2 (oob launches 2 and 3)
#     and the program prints ok;
#   unfiltered (`--tool memcheck --error-exitcode 7`): compute-sanitizer and gpusan abort
#     agree: 1 memcheck error, the program fails, exit 7; gpusan's default finds 4 (every
#     launch of oob), the program prints ok, exit 7.
# Kernel filters' name basis: each tool with `--kernel-name F` for patterns of the mangled
# name `_Z3oobPii` and of the demangled `oob(int*, int)` only (no commas: they separate
# pairs): they must agree on which select `oob` (compute-sanitizer's --help says the
# mangled name, for every key).
# Natively the program prints ok and exits 0.
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
mkdir -p cs-logs abort-logs report-logs

# NAME: a run's files are NAME.out (program and tool output), NAME.rc, NAME.json (gpusan's report).
cs_run() { local name=$1; shift; timeout 20 "$cs" "$@" ./app >"$name.out" 2>&1; echo $? >"$name.rc"; }
g_run() { local name=$1; shift; timeout 20 "$GPUSAN" run "$@" --report-json "$WORK/$name.json" -- ./app >"$name.out" 2>&1
          echo $? >"$name.rc"; }

timeout 20 ./app >native.out 2>native.err; echo $? >native.rc
cs_run cs "${flags[@]}" --log-file "$WORK/cs-logs/x.%p.log"
g_run abort "${flags[@]}" --check-reaction abort --log-file "$WORK/abort-logs/x.%p.log"
g_run report "${flags[@]}" --log-file "$WORK/report-logs/x.%p.log"
cs_run cs-all --tool memcheck --error-exitcode 7
g_run abort-all --tool memcheck --check-reaction abort --error-exitcode 7
g_run report-all --tool memcheck --error-exitcode 7
names=(kne=_Z3oobPii kns=3oobPi 'regex=^_Z3oob' kne=oob 'kns=oob(int*' 'regex=^oob\(')
for i in "${!names[@]}"; do
  cs_run "cs-name$i" --tool memcheck --kernel-name "${names[$i]}"
  g_run "g-name$i" --tool memcheck --check-reaction abort --kernel-name "${names[$i]}"
done

python3 - "$RESULT" "${names[@]}" <<'PY'
import glob, json, os, re, sys
out, names = sys.argv[1], sys.argv[2:]
def read(f):
    try: return open(f, errors="replace").read()
    except OSError: return ""
rc = lambda n: int(read(f"{n}.rc") or -1)
APP_ERROR = "Target application returned an error"
def cs_memcheck(text):
    """compute-sanitizer's memcheck errors: its ERROR SUMMARY less the program's own failure."""
    m = re.search(r"ERROR SUMMARY: (\d+) error", text)
    return int(m.group(1)) - (APP_ERROR in text) if m else None
def logs(d):
    files = glob.glob(f"{d}/x.*.log")
    return [os.path.basename(f) for f in files], "".join(read(f) for f in files)
def report(n):
    try: return json.load(open(f"{n}.json"))
    except Exception: return {}
def g_writes(n):
    return ((report(n).get("summary") or {}).get("by_kind") or {}).get("out_of_bounds_write")
def program(text):
    return "failed" if "launch failed" in text else "ok" if re.search(r"^ok$", text, re.M) else "?"
pid_named = lambda files: len(files) == 1 and re.fullmatch(r"x\.\d+\.log", files[0]) is not None

cs_files, cs_log = logs("cs-logs")
cs = {"rc": rc("cs"), "log_files": cs_files, "memcheck_errors": cs_memcheck(cs_log),
      "printed": cs_log.count("Invalid __global__ write"), "program": program(read("cs.out")),
      "all_rc": rc("cs-all"), "all_memcheck_errors": cs_memcheck(read("cs-all.out")),
      "all_program": program(read("cs-all.out"))}
ab_files, ab_log = logs("abort-logs")
# gpusan's findings printed: each ends in a bare bar line.
printed = lambda log: sum(1 for l in log.splitlines() if l == "=========")
abort = {"rc": rc("abort"), "log_files": ab_files, "memcheck_errors": g_writes("abort"),
         "printed": printed(ab_log), "program": program(read("abort.out")),
         "all_rc": rc("abort-all"), "all_memcheck_errors": g_writes("abort-all"),
         "all_program": program(read("abort-all.out")),
         "kinds": (report("abort").get("summary") or {}).get("by_kind")}
rp_files, rp_log = logs("report-logs")
default = {"rc": rc("report"), "log_files": rp_files, "errors": g_writes("report"),
           "printed": printed(rp_log), "program": program(read("report.out")),
           "all_rc": rc("report-all"), "all_errors": g_writes("report-all"),
           "all_program": program(read("report-all.out"))}
try:
    default["coverage"] = {k["name"]: [k["launches"], k.get("unchecked") or k.get("checked_by")]
                           for k in report("report")["coverage"]["kernels"]}
except Exception as e:
    default["coverage_error"] = str(e)
name_basis = {n: {"compute_sanitizer": "Invalid __global__ write" in read(f"cs-name{i}.out"),
                  "gpusan": bool(g_writes(f"g-name{i}")), "rcs": [rc(f"cs-name{i}"), rc(f"g-name{i}")]}
              for i, n in enumerate(names)}
native = {"rc": rc("native"), "stdout": read("native.out").strip()}
same = ("rc", "memcheck_errors", "printed", "program", "all_rc", "all_memcheck_errors", "all_program")
checks = {
    "native": native == {"rc": 0, "stdout": "ok"},
    "cs_stops_at_the_first_error": cs["memcheck_errors"] == 1 and cs["program"] == "failed" and cs["rc"] == 7
                                   and cs["printed"] == 1 and pid_named(cs_files)
                                   and cs["all_memcheck_errors"] == 1 and cs["all_program"] == "failed"
                                   and cs["all_rc"] == 7,
    "gpusan_abort_agrees": all(abort[k] == cs[k] for k in same) and pid_named(ab_files),
    "gpusan_default_counts_every_launch": default["errors"] == 2 and default["program"] == "ok"
                                          and default["rc"] == 7 and default["printed"] == 1
                                          and pid_named(rp_files) and default["all_errors"] == 4
                                          and default["all_program"] == "ok" and default["all_rc"] == 7,
    # The first three patterns are the mangled name's: both must select oob with them.
    "filters_match_the_same_names": all(v["compute_sanitizer"] == v["gpusan"] for v in name_basis.values())
                                    and all(name_basis[n]["gpusan"] for n in names[:3]),
}
if not all(checks.values()):
    for n, d in (("abort", abort), ("report", default)):
        d["output"] = read(f"{n}.out")[-800:]
    abort["log"], default["log"], cs["log"] = ab_log[-1500:], rp_log[-1500:], cs_log[-1500:]
    cs["all_output"] = read("cs-all.out")[-1500:]
result = {"case": "cs_dropin", "ok": all(checks.values()),
          "expected": "filtered and unfiltered, compute-sanitizer and gpusan --check-reaction abort agree (1 memcheck "
                      "error, the program fails there, 1 printed, a pid-named log, exit 7); gpusan's default report "
                      "reaction counts every launch's error (2 filtered, 4 unfiltered) and the program prints ok; "
                      "both tools' kernel filters select by the same name (mangled)",
          "native": native, "compute_sanitizer": cs, "gpusan_abort": abort, "gpusan_default": default,
          "name_basis": name_basis, "checks": checks}
json.dump(result, open(out, "w"), indent=1)
PY
