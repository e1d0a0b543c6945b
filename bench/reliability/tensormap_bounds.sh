#!/usr/bin/env bash
# Tensor maps bounded where they are made (issue 14): TMA (`cp.async.bulk.tensor`) has no
# patch point, so gpusan judges the extent each cuTensorMapEncodeTiled declares against its
# registry. tensormap_bounds.cu (driver API through cudaGetDriverEntryPointByVersion, and
# through dlsym as Triton does) and tensormap_bounds_triton.py (Triton's host-side
# TensorDescriptor), natively, under `gpusan run --mode api` and (the .cu's clean and over)
# `--mode check` (its TMA kernel instrumented: TMA itself is not seen, the map is judged).
# Facts:
# - natively every run exits 0; `over` reads the 64 bytes after A through TMA silently
#   (sum 352 where B follows A: B's 7.0s), `clip` reads a clipped box (sum 64);
# - gpusan: `over` (both doors) is one tensor_map_out_of_bounds naming
#   cuTensorMapEncodeTiled, 1088 bytes from A's base, 64 past its end; `freed` is one
#   tensor_map_use_after_free; `clean` and `clip` are silent with tensor_maps_judged >= 1;
#   the program's output is the native one (sums equal for clean and clip);
# - Triton (when importable): `over` one tensor_map_out_of_bounds, `clean` silent, sums as
#   natively; the report's tensor-map counters say how many maps (Triton's and cuBLAS's)
#   were judged and how many were on memory gpusan did not allocate.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$WORK"
fail_build() { echo "{\"case\": \"tensormap_bounds\", \"ok\": false, \"notes\": \"build failed: $1\"}" >"$RESULT"; exit 0; }
"$NVCC" -O2 -arch=sm_90 ${NVCC_FLAGS:-} -o tmb "$here/tensormap_bounds.cu" || fail_build tensormap_bounds.cu
export GPUSAN_CACHE_DIR="$WORK/cache" TRITON_CACHE_DIR="$WORK/triton-cache"
mkdir -p "$GPUSAN_CACHE_DIR" && chmod 700 "$GPUSAN_CACHE_DIR"
runs=()
run() {  # label, then the command
  local label=$1; shift
  local t0; t0=$(date +%s.%N)
  timeout -k 3 ${TMB_TIMEOUT:-15} "$@" >"$label.out" 2>"$label.err"
  echo "$? $(python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),2))" "$t0")" >"$label.rc"
  runs+=("$label")
}
for s in clean clip over freed over:dlsym; do
  name=${s/:/_}
  run "native_$name" ./tmb ${s/:/ }
  run "api_$name" "$GPUSAN" run --mode api --report-json "$WORK/api_$name.json" -- ./tmb ${s/:/ }
done
for s in clean over; do
  run "check_$s" "$GPUSAN" run --mode check --report-json "$WORK/check_$s.json" -- ./tmb "$s"
done
if [ "${TMB_TRITON:-1}" = 1 ]; then
  for s in clean over; do
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 run "native_triton_$s" python3 "$here/tensormap_bounds_triton.py" "$s"
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 run "api_triton_$s" "$GPUSAN" run --mode api --report-json "$WORK/api_triton_$s.json" \
      -- python3 "$here/tensormap_bounds_triton.py" "$s"
  done
fi
python3 "$here/tensormap_bounds_judge.py" "$RESULT" "${runs[@]}"
