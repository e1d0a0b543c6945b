#!/usr/bin/env bash
# Coverage as gpusan's report states it, against a count made without gpusan (issue 13), on the
# GPU machine: a PyTorch training step (20 steps of a 4-layer Transformer), the same model
# torch.compile'd, a CuPy program that counts its own launches, and a JAX program.
#
#   bench/coverage.sh DIR [OUT.json]    DIR: the gpusan binary and libgpusan_inject.so;
#                                       OUT.json defaults to $OUT/coverage.json
#
# Each program runs under `gpusan run --mode check --report-json`; the independent counts:
# torch.profiler (CUPTI) in a native run of the same program (every kernel launched, by name;
# CUPTI records nothing while the Compute Sanitizer API is on, so not in the gpusan run) for
# the PyTorch ones;
# the program's own count for CuPy; for JAX the kernels XLA compiled (its --xla_dump_to dumps
# in the gpusan run: kernel thunks, PTX .entry names). Each run has
# its own caches (a first run: Inductor and Triton compile) and a limit (COVERAGE_RUN_S,
# default 240 s); bench/coverage/compare.py makes each row. About 3 to 8 minutes in all.
# COVERAGE_ONLY: a regex of program names.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ $# -lt 1 ] || ! dir=$(cd "$1" 2>/dev/null && pwd); then
  echo "usage: bench/coverage.sh DIR [OUT.json]   (DIR: the gpusan binary and libgpusan_inject.so)" >&2
  exit 2
fi
out=${2:-${OUT:-/tmp/gpusan-coverage-out}/coverage.json}
mkdir -p "$(dirname "$out")"
cd "$repo" || exit 2
work=$(mktemp -d /tmp/gpusan-coverage.XXXXXX)
limit=${COVERAGE_RUN_S:-240}
only=${COVERAGE_ONLY:-.}
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export TORCHINDUCTOR_COMPILE_THREADS=1  # compile in the process: no worker pool to wait for
t0=$(date +%s)
say() { echo "[coverage +$(( $(date +%s) - t0 ))s] $*"; }
rows=()

fresh() {  # ROOT: the environment of a first run, every cache under ROOT
  local r=$1
  mkdir -p "$r"/{home,xdg,triton,inductor,cupy,nv,gpusan}
  chmod 700 "$r/gpusan"
  echo "HOME=$r/home XDG_CACHE_HOME=$r/xdg TRITON_CACHE_DIR=$r/triton TORCHINDUCTOR_CACHE_DIR=$r/inductor CUPY_CACHE_DIR=$r/cupy CUDA_CACHE_PATH=$r/nv GPUSAN_CACHE_DIR=$r/gpusan"
}

one() {  # NAME NATIVE_ARGS(one word, "" for none) then the program and its arguments
  local name=$1 native_flag=$2; shift 2
  [[ "$name" =~ $only ]] || return 0
  local w=$work/$name native_rc="" extra=()
  mkdir -p "$w"
  if [ -n "$native_flag" ]; then
    say "$name: native run ($native_flag)"
    env $(fresh "$w/native") timeout -k 5 "$limit" python3 "$@" "$native_flag" >"$w/native.out" 2>"$w/native.err"
    native_rc=$?
    extra+=(--native-out "$w/native.out" --native-rc "$native_rc")
  fi
  local xla=()
  if [ "$name" = jax ]; then
    mkdir -p "$w/xla-dump"
    xla=(XLA_FLAGS="--xla_dump_to=$w/xla-dump")
    extra+=(--xla-dump "$w/xla-dump")
  fi
  say "$name: gpusan run"
  env $(fresh "$w/gpusan") "${xla[@]}" timeout -k 5 $((limit + 15)) "$dir/gpusan" run --mode check \
    --timeout "$limit" --report-json "$w/report.json" -- python3 "$@" >"$w/gpusan.out" 2>"$w/gpusan.err"
  local rc=$?
  python3 bench/coverage/compare.py --name "$name" --report "$w/report.json" --program-out "$w/gpusan.out" \
    --log "$w/gpusan.err" --rc "$rc" "${extra[@]}" >"$w/row.json" 2>"$w/compare.err" \
    || echo "{\"program\": \"$name\", \"error\": \"compare.py failed: $(tail -1 "$w/compare.err" | tr -d '"\\')\"}" >"$w/row.json"
  say "$name: $(head -c 400 "$w/row.json")"
  rows+=("$w/row.json")
}

one torch_train --profile bench/coverage/torch_train.py
one torch_compile --profile bench/coverage/torch_train.py --compile
one cupy "" bench/coverage/cupy_program.py
one jax "" bench/coverage/jax_program.py

python3 - "$out" "$dir" "${rows[@]}" <<'PY'
import datetime, json, subprocess, sys
out, d, files = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = []
for f in files:
    try:
        rows.append(json.load(open(f)))
    except Exception as e:  # a row that says why
        rows.append({"row_file": f, "error": repr(e)})
def sh(c):
    try:
        return subprocess.run(c, shell=True, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as e:
        return f"({e})"
json.dump({"command": "bench/coverage.sh DIR", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "gpu": sh("nvidia-smi --query-gpu=name,driver_version --format=csv,noheader"), "gpusan": sh(f"{d}/gpusan --version"),
           "judging": "launches_match / kernels_match: the report's launches (and launches per kernel base name) equal "
                      "the independent count; for JAX, how many of the kernels XLA compiled the report lists",
           "programs": rows}, open(out, "w"), indent=1)
print(f"coverage: {len(rows)} programs → {out}")
for r in rows:
    print(f"  {r.get('program')}: report {(r.get('report') or {}).get('launches')} launches / "
          f"{(r.get('report') or {}).get('kernels')} kernels, independent {r.get('independent')}, "
          f"launches_match={r.get('launches_match')} kernels_match={r.get('kernels_match')} "
          f"xla_in_report={r.get('xla_kernels_in_report')} {r.get('error', '')}")
PY
tar czf "$(dirname "$out")/coverage-logs.tar.gz" -C "$work" --exclude='home' --exclude='xdg' --exclude='triton' \
  --exclude='inductor' --exclude='cupy' --exclude='nv' --exclude='gpusan' . 2>/dev/null || true
