#!/usr/bin/env bash
# The GPU suite of `gpusan run`: runs on the GPU machine, from the repo root, in one call.
#
#   bench/gpu-suite.sh DIR        DIR holds the prebuilt `gpusan` and `libgpusan_inject.so`
#
# 1. builds every tests/cases/*.cu with the machine's nvcc (-arch=sm_90 -lineinfo, static
#    cudart; cases whose header says `also-cudart-shared: yes` also with -cudart shared), the
#    overhead benchmarks of bench/runtime/ (-O3) and a small helper for the interface checks;
# 2. bench/runtime/overhead.py: each benchmark natively and under `gpusan run`, alternating
#    → $OUT/runtime-overhead.json;
# 3. tests/cases/suite.py: each case natively, under `gpusan run --mode api --leak-check full
#    --report-json`, judged against its header; the command-line contract of `gpusan run`;
#    bench/injection's PyTorch and Triton programs under gpusan; then every case under
#    compute-sanitizer memcheck as far as time allows → $OUT/runtime-cases.json;
# 4. $OUT/suite-logs.tar.gz (every run's output and report), and both tables printed last.
#
# 5. with GPUSAN_SUITE_PY=1, bench/python-suite.sh: the Python cases (tests/cases/python) in
#    the last GPUSAN_SUITE_PY_BUDGET_S seconds (default 240) of the budget, which the C++
#    cases leave to it → $OUT/python-cases.json, python-logs.tar.gz; GPUSAN_SUITE_PY=only
#    runs the Python cases alone (no builds, no benchmarks, no C++ cases).
#
# 6. with GPUSAN_SUITE_SASS_ONLY=1 (issue 14), the C++ cases built as machine code only
#    (-gencode arch=compute_90,code=sm_90: no PTX, which `cuobjdump -lptx` checks per
#    executable) and run under `gpusan run --mode check --route binary` (GPUSAN_SUITE_MODES
#    defaults to check) with compute-sanitizer as the second column → $OUT/runtime-cases-sass.json,
#    beside the normal runtime-cases.json; no benchmarks (bench/binary-overhead.sh measures the
#    binary route), no interface checks, no programs. A case's `binary: missed-by-design WHY`
#    header is judged apart (tests/cases/README.md).
#
# Time: everything is bounded by GPUSAN_SUITE_BUDGET_S (default 450 s, under the 8 minutes
# one call may take); each run has its own `timeout`. GPUSAN_SUITE_MODES may name `default`:
# `gpusan run` with no `--mode`, judged as check (and failed if its report is not check mode);
# GPUSAN_SUITE_BENCH=0 skips the overhead benchmarks. Environment knobs: OUT (default
# /tmp/gpusan-suite-out), GPUSAN_SUITE_MODES (default "api"; later "api check"),
# GPUSAN_SUITE_ONLY (regex of case names), NVCC, COMPUTE_SANITIZER, GPUSAN_SUITE_PY.
set -uo pipefail

t0=$(date +%s)
budget=${GPUSAN_SUITE_BUDGET_S:-450}
deadline=$((t0 + budget))
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 2

if [ $# -lt 1 ]; then
  echo "usage: bench/gpu-suite.sh DIR   (DIR: the gpusan binary and libgpusan_inject.so)" >&2
  exit 2
fi
if ! dir=$(cd "$1" 2>/dev/null && pwd); then
  echo "gpu-suite: no such directory: $1" >&2
  exit 2
fi
gpusan="$dir/gpusan"
out=${OUT:-/tmp/gpusan-suite-out}
mkdir -p "$out"
work=$(mktemp -d /tmp/gpusan-suite.XXXXXX)
mkdir -p "$work/bin" "$work/benchbin" "$work/logs"
export PATH="/usr/local/cuda/bin:$PATH"
export PYTHONUNBUFFERED=1
nvcc=${NVCC:-nvcc}
cs=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/compute-sanitizer/compute-sanitizer)}
jobs=$(nproc 2>/dev/null || echo 4)
sass=${GPUSAN_SUITE_SASS_ONLY:-0}
if [ "$sass" = 1 ]; then
  modes=${GPUSAN_SUITE_MODES:-check}
  arch_flags="-gencode arch=compute_90,code=sm_90"
  cases_json=runtime-cases-sass.json
else
  modes=${GPUSAN_SUITE_MODES:-api}
  arch_flags="-arch=sm_90"
  cases_json=runtime-cases.json
fi
say() { echo "[gpu-suite +$(( $(date +%s) - t0 ))s] $*"; }
# Seconds from now until epoch $1 plus $2 of grace, at least 5: an outer `timeout` per step.
until_s() { local s=$(( $1 - $(date +%s) + $2 )); [ "$s" -lt 5 ] && s=5; echo "$s"; }

[ -x "$gpusan" ] || say "WARNING: $gpusan missing or not executable: gpusan runs will be recorded as skipped"

# The Python cases (bench/python-suite.sh): their own budget, the last part of ours.
py=${GPUSAN_SUITE_PY:-0}
py_budget=0
if [ "$py" = 1 ] || [ "$py" = only ]; then
  py_budget=${GPUSAN_SUITE_PY_BUDGET_S:-240}
fi
python_suite() {
  local left=$(( deadline - $(date +%s) ))
  [ "$left" -lt "$py_budget" ] && py_budget=$left
  if [ "$py_budget" -lt 30 ]; then
    say "python cases: no time left (${py_budget} s)"
    echo '{"error": "no time left in the suite budget for the Python cases"}' >"$out/python-cases.json"
    return
  fi
  say "python cases (${py_budget} s)"
  OUT="$out" GPUSAN_PY_BUDGET_S="$py_budget" COMPUTE_SANITIZER="$cs" \
    timeout -k 10 $((py_budget + 90)) bash bench/python-suite.sh "$dir"
  say "python-suite.sh exit $?"
}
if [ "$py" = only ]; then
  python_suite
  say "done in $(( $(date +%s) - t0 )) s"
  exit 0
fi
[ -f "$dir/libgpusan_inject.so" ] || say "WARNING: $dir/libgpusan_inject.so missing"

# ---------------------------------------------------------------- 1. environment
say "environment"
python3 - "$gpusan" "$dir" "$cs" "$nvcc" "$budget" "$modes" > "$work/env.json" <<'PY'
import datetime, hashlib, json, os, platform, subprocess, sys
gpusan, d, cs, nvcc, budget, modes = sys.argv[1:]
def sh(cmd, timeout=30):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return (r.stdout + r.stderr).strip()
    except Exception as e:  # noqa: BLE001 (any failure is recorded, never fatal)
        return f"unavailable: {e}"
def sha(p):
    try:
        return hashlib.sha256(open(p, "rb").read()).hexdigest()
    except OSError as e:
        return f"unavailable: {e}"
smi = sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm",
          "--format=csv,noheader"])
json.dump({
    "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "gpus": [l.strip() for l in smi.splitlines() if l.strip()],
    "gpu_query_fields": "name, driver_version, memory.total, compute_cap, clocks.max.sm",
    "host": platform.platform(), "cpus": os.cpu_count(),
    "nvcc": sh([nvcc, "--version"]).splitlines()[-1:],
    "compute_sanitizer": sh([cs, "--version"]).splitlines()[-1:],
    "gpusan_binary": gpusan, "gpusan_version": sh([gpusan, "--version"], 10),
    "gpusan_sha256": sha(gpusan), "inject_sha256": sha(os.path.join(d, "libgpusan_inject.so")),
    "git_head": sh(["git", "rev-parse", "HEAD"], 10),
    "python": platform.python_version(),
    "suite_budget_s": int(budget), "modes": modes.split(),
    "build_flags": {"cases": "nvcc -arch=sm_90 -lineinfo [-cudart shared]", "benchmarks": "nvcc -O3 -arch=sm_90 -lineinfo"},
}, sys.stdout, indent=1)
PY
cat "$work/env.json"; echo

# ---------------------------------------------------------------- 2. builds
say "building cases and benchmarks with $jobs jobs"
build_one() {  # SRC OUT CUDART(static|shared) OPT
  local src=$1 exe=$2 cudart=$3 opt=$4
  local extra=()
  [ "$cudart" = shared ] && extra=(-cudart shared)
  [ "$opt" = O3 ] && extra+=(-O3)
  # shellcheck disable=SC2086 (arch_flags is words)
  if timeout 300 "$nvcc" $arch_flags -lineinfo "${extra[@]}" -o "$exe" "$src" > "$exe.build-log" 2>&1; then
    rm -f "$exe.build-log"
  else
    mv "$exe.build-log" "$exe.build-error"
    echo "BUILD FAILED: $src ($cudart)"
  fi
}
export -f build_one
export nvcc arch_flags
{
  for src in tests/cases/*.cu; do
    name=$(basename "$src" .cu)
    printf '%s\0%s\0%s\0%s\0' "$src" "$work/bin/$name" static -
    if grep -q '^// also-cudart-shared: yes' "$src"; then
      printf '%s\0%s\0%s\0%s\0' "$src" "$work/bin/$name.shared" shared -
    fi
  done
  if [ "$sass" != 1 ]; then
    for b in launch malloc copy kernel; do
      printf '%s\0%s\0%s\0%s\0' "bench/runtime/$b.cu" "$work/benchbin/$b" static O3
    done
  fi
} | xargs -0 -n 4 -P "$jobs" bash -c 'build_one "$@"' _
# The interface helper: exits 3 after a CUDA call, aborts on --abort, echoes its arguments.
cat > "$work/exit3.cu" <<'CU'
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
int main(int argc, char** argv) {
    void* p = nullptr;
    if (cudaMalloc(&p, 256) != cudaSuccess || cudaFree(p) != cudaSuccess) return 1;
    if (argc > 1 && !strcmp(argv[1], "--abort")) abort();
    printf("argv=");
    for (int i = 2; i < argc; i++) printf("[%s]", argv[i]);
    printf("\n");
    return 3;
}
CU
build_one "$work/exit3.cu" "$work/bin-exit3" static -
built=$(find "$work/bin" -maxdepth 1 -type f -perm -u+x | wc -l)
failed=$(find "$work/bin" "$work/benchbin" -name '*.build-error' | wc -l)
say "built $built case executables; $failed build failures"
cp "$work"/bin/*.build-error "$work"/benchbin/*.build-error "$work/logs/" 2>/dev/null
if [ "$sass" = 1 ]; then
  # Machine code only means no PTX in any fatbin: what the binary route is for.
  : >"$work/ptx-present.txt"
  for exe in "$work"/bin/*; do
    [ -x "$exe" ] || continue
    if cuobjdump -lptx "$exe" 2>/dev/null | grep -q .; then basename "$exe" >>"$work/ptx-present.txt"; fi
  done
  python3 - "$work/env.json" "$work/ptx-present.txt" "$arch_flags" <<'PY'
import json, sys
env = json.load(open(sys.argv[1]))
ptx = [l.strip() for l in open(sys.argv[2]) if l.strip()]
env["sass_only"] = {"build_flags": f"nvcc {sys.argv[3]} -lineinfo [-cudart shared]", "route": "binary",
                    "executables_with_ptx": ptx}
env["build_flags"]["cases"] = env["sass_only"]["build_flags"]
json.dump(env, open(sys.argv[1], "w"), indent=1)
PY
  say "machine code only: $(wc -l <"$work/ptx-present.txt") executables still hold PTX"
fi

# ---------------------------------------------------------------- 3. overhead benchmarks
# About 2 minutes at most, so the cases keep most of the budget.
bench_mode=${modes%% *}
[ "$bench_mode" = default ] && bench_mode=check
if [ "$sass" != 1 ] && [ "${GPUSAN_SUITE_BENCH:-1}" != 0 ]; then
  bench_deadline=$(( $(date +%s) + 150 ))
  [ "$bench_deadline" -gt $((deadline - 200 - py_budget)) ] && bench_deadline=$((deadline - 200 - py_budget))
  say "overhead benchmarks (until +$((bench_deadline - t0))s)"
  timeout "$(until_s "$bench_deadline" 30)" python3 bench/runtime/overhead.py \
    --bin "$work/benchbin" --gpusan "$gpusan" --out "$out/runtime-overhead.json" \
    --mode "$bench_mode" --rounds 2 --deadline "$bench_deadline" --logs "$work/logs/bench" \
    --env-json "$work/env.json" --table-out "$work/overhead-table.txt"
  say "overhead.py exit $?"
fi

# ---------------------------------------------------------------- 4. cases, programs, interface, compute-sanitizer
cases_deadline=$((deadline - 20 - py_budget))
say "cases (until +$((cases_deadline - t0))s)"
only=()
[ -n "${GPUSAN_SUITE_ONLY:-}" ] && only=(--only "$GPUSAN_SUITE_ONLY")
programs=(--programs "pytorch=python3 bench/injection/torch_step.py" "triton=python3 bench/injection/triton_add.py")
[ "$sass" = 1 ] && programs=(--route binary --no-interface)
timeout "$(until_s "$cases_deadline" 15)" python3 tests/cases/suite.py \
  --cases tests/cases --bin "$work/bin" --gpusan "$gpusan" --out "$out/$cases_json" \
  --modes "$modes" --compute-sanitizer "$cs" --deadline "$cases_deadline" --logs "$work/logs" \
  --env-json "$work/env.json" --interface-bin "$work/bin-exit3" --table-out "$work/cases-table.txt" \
  "${programs[@]}" "${only[@]}"
say "suite.py exit $?"

# ---------------------------------------------------------------- 5. the Python cases
[ "$py" = 1 ] && python_suite

# ---------------------------------------------------------------- 6. logs and tables
tar czf "$out/suite-logs.tar.gz" -C "$work" logs env.json 2>/dev/null
say "outputs: $(find "$out" -maxdepth 1 -type f -printf '%f (%s B) ')"
python3 -c 'import json, sys; e = json.load(open(sys.argv[1])); print("GPU:", "; ".join(e["gpus"]), "| nvcc:", *e["nvcc"], "| compute-sanitizer:", *e["compute_sanitizer"], "| gpusan:", e["gpusan_version"])' "$work/env.json" 2>/dev/null
echo
echo "==================== overhead (gpusan/native)"
cat "$work/overhead-table.txt" 2>/dev/null || echo "(no overhead table: see logs)"
echo "==================== cases"
cat "$work/cases-table.txt" 2>/dev/null || echo "(no cases table: see logs)"
say "done in $(( $(date +%s) - t0 )) s"
