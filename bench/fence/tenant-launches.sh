#!/usr/bin/env bash
# A fenced tenant's host cost per launch, on any machine: the fake driver of the tests
# (crates/cli/tests/fake_cuda/libcuda.c) under `gpusan serve`, and its tenant program
# (crates/cli/tests/fake_cuda/tenant.c) making N launches back to back then one
# synchronization (`tenant burst N 0`), ROUNDS times. Prints the wall time of each run and
# the median in µs per launch (the program's start and end included: about 30 ms).
#
#   bench/fence/tenant-launches.sh [DIR] [N] [ROUNDS]   DIR: gpusan and libgpusan_inject.so
#                                                        (default target/release)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=$(cd "${1:-$repo/target/release}" && pwd)
n=${2:-200000}
rounds=${3:-5}
work=$(mktemp -d /tmp/gpusan-tenant-launches.XXXXXX)
trap 'kill "$manager" 2>/dev/null; rm -rf "$work"' EXIT
cc -O2 -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$work/libcuda.so.1" "$repo/crates/cli/tests/fake_cuda/libcuda.c"
ln -s libcuda.so.1 "$work/libcuda.so"
cc -O2 -o "$work/tenant" "$repo/crates/cli/tests/fake_cuda/tenant.c" -L"$work" -lcuda -ldl -Wl,-rpath,"$work"
"$dir/gpusan" serve --driver "$work/libcuda.so.1" --socket "$work/s.sock" 2>"$work/manager.log" &
manager=$!
until "$dir/gpusan" serve --status --socket "$work/s.sock" >/dev/null 2>&1; do sleep 0.1; done
times=()
for _ in $(seq "$rounds"); do
  t0=$(date +%s%N)
  "$dir/gpusan" run --mode fence --server "$work/s.sock" -- "$work/tenant" burst "$n" 0 | grep -q "burst ok"
  t=$(( ($(date +%s%N) - t0) / 1000 ))
  times+=("$t")
  echo "run: ${t} µs"
done
printf '%s\n' "${times[@]}" | sort -n | awk -v n="$n" '{a[NR]=$1} END {m=a[int((NR+1)/2)]; printf "median %.3f µs per launch (%d launches)\n", m/n, n}'
