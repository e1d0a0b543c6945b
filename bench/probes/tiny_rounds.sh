#!/usr/bin/env bash
# Where the tiny_launches ratio's spread comes from: the workload run ROUNDS times natively
# and under `gpusan run --mode check`, alternating, each process's medians printed (device
# time per launch by events, host time to enqueue one). Runs on the GPU machine.
#
#   bench/probes/tiny_rounds.sh DIR [ROUNDS]     (DIR: gpusan + libgpusan_inject.so)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=$(cd "$1" && pwd)
rounds=${2:-8}
bin=$(mktemp -d)/tiny
"${NVCC:-nvcc}" -O3 -arch=sm_90 -lineinfo -I"$repo/bench/workloads" "$repo/bench/workloads/tiny_launches.cu" -o "$bin"
"$dir/gpusan" run --mode check -- "$bin" > /dev/null 2>&1 # instrument once: the JIT caches
for r in $(seq "$rounds"); do
  printf '{"round": %d, "tool": "native", "out": %s}\n' "$r" "$("$bin" | tail -1)"
  printf '{"round": %d, "tool": "gpusan", "out": %s}\n' "$r" "$("$dir/gpusan" run --mode check -- "$bin" 2>/dev/null | tail -1)"
done
