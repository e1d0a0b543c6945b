#!/usr/bin/env bash
# The Python case suite of issue 13 on the GPU machine (tests/cases/python: CuPy, numba-cuda,
# cuda.core, torch load_inline and jiterator, Triton; an out-of-bounds access, a use after
# free and a clean twin each): every case natively, under `gpusan run --mode check` with empty
# caches and again with the caches the first run left, and under compute-sanitizer memcheck.
#
#   bench/python-suite.sh DIR      DIR holds the prebuilt `gpusan` and `libgpusan_inject.so`
#
# Writes $OUT/python-cases.json (per case and a summary: bugs found, missed, false positives
# for gpusan's first run, its cached run and compute-sanitizer) and $OUT/python-logs.tar.gz
# (every run's output and report). Called by bench/gpu-suite.sh when GPUSAN_SUITE_PY=1.
#
# numba-cuda there needs numpy 2.2.6 (the machine's numpy 2.5 breaks its import): the wheels
# in bench/work/wheels (ignored by git, so name it in the device call's `carry`) are unpacked
# into a private site folder, first on PYTHONPATH for the cases whose header says
# `wheels: numpy`. Fetch them here once with
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux2014_x86_64 numpy==2.2.6 -d bench/work/wheels
#
# Knobs: OUT (default /tmp/gpusan-python-out), GPUSAN_PY_BUDGET_S (default 240: the whole
# suite; each run has its own limit), GPUSAN_PY_ONLY (regex of case names), GPUSAN_PY_JOBS,
# GPUSAN_PY_WHEELS (default bench/work/wheels), COMPUTE_SANITIZER (a path, or none).
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ $# -lt 1 ] || ! dir=$(cd "$1" 2>/dev/null && pwd); then
  echo "usage: bench/python-suite.sh DIR   (DIR: the gpusan binary and libgpusan_inject.so)" >&2
  exit 2
fi
cd "$repo" || exit 2
out=${OUT:-/tmp/gpusan-python-out}
mkdir -p "$out"
budget=${GPUSAN_PY_BUDGET_S:-240}
work=$(mktemp -d /tmp/gpusan-python.XXXXXX)
export PATH="/usr/local/cuda/bin:$PATH"
export PYTHONUNBUFFERED=1
say() { echo "[python-suite] $*"; }
[ -x "$dir/gpusan" ] || say "WARNING: $dir/gpusan missing or not executable: every gpusan run will have no report"
cs=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/compute-sanitizer/compute-sanitizer)}

site_args=()
wheels=${GPUSAN_PY_WHEELS:-$repo/bench/work/wheels}
if compgen -G "$wheels/*.whl" >/dev/null; then
  site=$work/site
  mkdir -p "$site"
  if ! timeout 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" \
      "$wheels"/*.whl >"$work/wheels.log" 2>&1; then
    say "pip could not install the wheels ($(tail -1 "$work/wheels.log")); unpacking them as zip files"
    for w in "$wheels"/*.whl; do python3 -m zipfile -e "$w" "$site" || say "cannot unpack $w"; done
  fi
  site_args=(--site "$site")
  say "wheels from $wheels unpacked into $site: $(ls "$site" | tr '\n' ' ')"
else
  say "no wheels in $wheels: the numba cases run with the machine's numpy (they skip, with the reason, if numba cannot import)"
fi

only_args=()
[ -n "${GPUSAN_PY_ONLY:-}" ] && only_args=(--only "$GPUSAN_PY_ONLY")
jobs_args=()
[ -n "${GPUSAN_PY_JOBS:-}" ] && jobs_args=(--jobs "$GPUSAN_PY_JOBS")
say "budget ${budget} s, work in $work"
timeout -k 10 $((budget + 60)) python3 bench/python_suite.py --gpusan "$dir/gpusan" --cases tests/cases/python \
  --out "$out/python-cases.json" --work "$work" --budget "$budget" --compute-sanitizer "$cs" \
  "${site_args[@]}" "${only_args[@]}" "${jobs_args[@]}"
rc=$?
say "python_suite.py exit $rc"
# Every run's output, and gpusan's reports (<case>/gpusan_first.json, gpusan_cached.json).
(cd "$work" && tar czf "$out/python-logs.tar.gz" logs $(find . -mindepth 2 -maxdepth 2 -name 'gpusan_*.json') 2>/dev/null) || true
[ -f "$out/python-cases.json" ] || echo '{"error": "python_suite.py wrote nothing", "rc": '"$rc"'}' >"$out/python-cases.json"
exit "$rc"
