#!/usr/bin/env bash
# Prepares the real programs of the check-overhead workload set from their public sources,
# beside the repository and never committed (bench/work/ is ignored by git):
#
#   PolyBench-ACC (cavazos-lab/PolyBench-ACC, CUDA): gemm, 2mm, atax
#   Rodinia 3.1 (yuhc/gpu-rodinia, CUDA): pathfinder
#
# Each program's sources are copied into DEST/<name>/ and patched (sed, below) so that its
# kernel region is timed by CUDA events over BENCH_WARMUPS + BENCH_RUNS runs and it prints
# the JSON line of bench/runtime/bench.h (harness: bench/workloads/third_party.h, force-
# included at build time). DEST/manifest.json records, per program, the repository and
# commit it came from, the files, the nvcc arguments and the command line;
# bench/check-overhead.sh builds and runs what it lists. The GPU machine has no internet:
# run this here and carry bench/work/third_party along.
#
#   Usage: bench/third-party.sh [DEST]        (default: bench/work/third_party)
#   Sources: $POLYBENCH_GIT / $RODINIA_GIT, git directories holding the pinned commits
#   (default: the /work/.mirror snapshots the `fetch` tool makes; else a clone from GitHub
#   into bench/work/src).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=${1:-$repo/bench/work/third_party}
polybench_url=https://github.com/cavazos-lab/PolyBench-ACC
polybench_commit=70ea4ca9047dc4ec9c3ca79b4c91b3b2cc1510e7
rodinia_url=https://github.com/yuhc/gpu-rodinia
rodinia_commit=9c10d3ea16ddba2ba057cc3951a9efc4c2cc18a4

# A git directory holding COMMIT: $VAR, the fetch tool's mirror, or a fresh clone.
git_dir() {  # VAR_VALUE MIRROR URL COMMIT
  local given=$1 mirror=$2 url=$3 commit=$4
  for d in "$given" "$mirror"; do
    if [ -n "$d" ] && git --git-dir="$d" cat-file -e "$commit^{commit}" 2>/dev/null; then
      echo "$d"
      return
    fi
  done
  local clone="$repo/bench/work/src/$(basename "$url").git"
  if ! git --git-dir="$clone" cat-file -e "$commit^{commit}" 2>/dev/null; then
    rm -rf "$clone"
    git clone --quiet --bare "$url" "$clone" >&2
  fi
  echo "$clone"
}

pb=$(git_dir "${POLYBENCH_GIT:-}" /work/.mirror/cavazos-lab+PolyBench-ACC/repo "$polybench_url" "$polybench_commit")
ro=$(git_dir "${RODINIA_GIT:-}" /work/.mirror/yuhc+gpu-rodinia/repo "$rodinia_url" "$rodinia_commit")

rm -rf "$dest"
mkdir -p "$dest"
extract() {  # GIT_DIR COMMIT PATH_IN_REPO OUT_DIR
  mkdir -p "$4"
  # stderr dropped: a snapshot missing large blobs elsewhere in the tree makes git archive
  # complain about them even when the requested path is complete; tar's check follows.
  git --git-dir="$1" archive "$2" "$3" 2>/dev/null | tar -x -C "$4" --strip-components="$(awk -F/ '{print NF}' <<<"$3")"
  [ -n "$(ls -A "$4")" ] || { echo "third-party: nothing extracted for $3" >&2; exit 1; }
}

# The runner replaces @REPO@ with the repository it runs from.
harness="@REPO@/bench/workloads/third_party.h"
entries=()

# ---------------------------------------------------------------- PolyBench-ACC
# The GPU function (FN) runs once in main: a variadic macro defined just before main turns
# that call into BENCH_WARMUPS + BENCH_RUNS calls (the function copies its inputs to the
# device each time, so every run computes the same thing). Its first timer start/stop
# become bench_begin/bench_end; compareResults reports its mismatch count.
polybench() {  # NAME DIR_IN_REPO FILE FN DATASET
  local name=$1 dir=$2 file=$3 fn=$4 dataset=$5 out="$dest/$1"
  extract "$pb" "$polybench_commit" "CUDA/$dir" "$out"
  extract "$pb" "$polybench_commit" CUDA/utilities "$out/utilities"
  sed -i \
    -e '0,/polybench_start_instruments;/s//bench_begin();/' \
    -e '0,/polybench_stop_instruments;/s//bench_end();/' \
    -e 's/^\(\s*\)printf("Non-Matching CPU-GPU Outputs/\1bench_checked(fail); &/' \
    -e "/^int main(/i #define $fn(...) for (int bench_rep_ = 0; bench_rep_ < BENCH_WARMUPS + BENCH_RUNS; bench_rep_++) $fn(__VA_ARGS__)" \
    "$out/$file"
  grep -q 'bench_begin();' "$out/$file" && grep -q 'bench_end();' "$out/$file" && grep -q 'bench_checked(fail)' "$out/$file" &&
    grep -q "^#define $fn(" "$out/$file" || { echo "third-party: patching $name failed" >&2; exit 1; }
  # STANDARD_DATASET is the headers' default, which they define themselves.
  local size_arg=""
  [ "$dataset" = STANDARD_DATASET ] || size_arg="\"-D$dataset\", "
  entries+=("$(printf '{"name": "%s", "suite": "PolyBench-ACC", "repo": "%s", "commit": "%s", "path": "CUDA/%s", "main": "%s", "dataset": "%s", "nvcc_args": ["-include", "%s", "-DBENCH_NAME=%s", %s"-Iutilities", "%s"], "args": []}' \
    "$name" "$polybench_url" "$polybench_commit" "$dir" "$file" "$dataset" "$harness" "$name" "$size_arg" "$file")")
}
# Sizes: native kernel regions of ~0.1-1 ms on an H100; the CPU reference each program
# runs once stays under a second.
polybench gemm linear-algebra/kernels/gemm gemm.cu gemmCuda STANDARD_DATASET  # 512^3
polybench 2mm linear-algebra/kernels/2mm 2mm.cu mm2Cuda SMALL_DATASET         # 2 x 512^3
polybench atax linear-algebra/kernels/atax atax.cu ataxGpu STANDARD_DATASET   # 4096^2, 2 kernels

# ---------------------------------------------------------------- Rodinia pathfinder
# calc_path (one launch per pyramid step) runs BENCH_WARMUPS + BENCH_RUNS times, each from
# the program's first row again; the last row is then checked against a host recomputation.
out="$dest/pathfinder"
extract "$ro" "$rodinia_commit" cuda/pathfinder "$out"
cat > "$out/bench_loop.inc" <<'EOF'
static int bench_calc_path(int* gpuWall, int* gpuResult[2], int rows, int cols, int pyramid_height, int blockCols,
                           int borderCols) {
    int r = 0;
    for (int i = 0; i < BENCH_WARMUPS + BENCH_RUNS; i++) {
        cudaMemcpy(gpuResult[0], data, sizeof(int) * cols, cudaMemcpyHostToDevice);
        bench_begin();
        r = calc_path(gpuWall, gpuResult, rows, cols, pyramid_height, blockCols, borderCols);
        bench_end();
    }
    return r;
}
#define calc_path bench_calc_path
EOF
python3 - "$out/pathfinder.cu" "$out/bench_loop.inc" <<'PY'
import sys
path, inc = sys.argv[1:]
src, loop = open(path).read(), open(inc).read()
head, sep, tail = src.partition("\nint main(")
assert sep, "no main in pathfinder.cu"
src = head + "\n" + loop + sep + tail
marker = "    cudaFree(gpuWall);"
assert src.count(marker) == 1, "no single cudaFree(gpuWall) in pathfinder.cu"
src = src.replace(marker, "    bench_check_pathfinder(data, result, rows, cols);\n" + marker)
open(path, "w").write(src)
PY
rm "$out/bench_loop.inc"
entries+=("$(printf '{"name": "pathfinder", "suite": "Rodinia", "repo": "%s", "commit": "%s", "path": "cuda/pathfinder", "main": "pathfinder.cu", "dataset": "100000 columns x 1000 rows, pyramid 20", "nvcc_args": ["-include", "%s", "-DBENCH_NAME=pathfinder", "pathfinder.cu"], "args": ["100000", "1000", "20"]}' \
  "$rodinia_url" "$rodinia_commit" "$harness")")

# ---------------------------------------------------------------- manifest
python3 - "$dest/manifest.json" "${entries[@]}" <<'PY'
import datetime, json, os, sys
dest, *entries = sys.argv[1:]
# Each program's nvcc arguments also one per line beside it, for the Rust test
# (crates/passes/tests/check_workloads.rs), which has no JSON parser.
for e in entries:
    p = json.loads(e)
    with open(os.path.join(os.path.dirname(dest), p["name"], "nvcc.args"), "w") as f:
        f.write("".join(a + "\n" for a in p["nvcc_args"]))
doc = {"what": "third-party programs for bench/check-overhead.sh, prepared by bench/third-party.sh; "
               "build in DIR/<name> with nvcc -O3 -arch=sm_90 -lineinfo NVCC_ARGS -o BIN; run BIN ARGS",
       "prepared_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
       "programs": [json.loads(e) for e in entries]}
json.dump(doc, open(dest, "w"), indent=1)
PY
echo "third-party: $(ls "$dest" | grep -vc manifest.json) programs in $dest"
