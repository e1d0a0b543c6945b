#!/usr/bin/env bash
# Traces the BCache paper's workloads (our PARSEC-like programs and ParallelPointerBench,
# bench/bcache/programs/) with gpusan's CPU tracer, then replays them on the simulated
# machines: the paper's Figs. 9-12 and Table III for programs.
#
#   bench/bcache/trace-programs.sh OUTDIR [THREADS]     (THREADS: 16, one per core of the 4x4 mesh)
#
# Each program is built twice with gcc: natively, and with -fsanitize=thread's
# instrumentation linked against crates/cputrace (not ThreadSanitizer) and its allocation
# calls wrapped. A traced run must print what the native run prints. Writes OUTDIR/*.gstrace,
# OUTDIR/programs.json, OUTDIR/programs.txt and OUTDIR/fig{9,10,11,12}.svg.
set -euo pipefail
out=${1:?usage: bench/bcache/trace-programs.sh OUTDIR [THREADS]}
threads=${2:-16}
repo=$(cd "$(dirname "$0")/../.." && pwd)
src=$repo/bench/bcache/programs
mkdir -p "$out/bin"
(cd "$repo" && cargo build --release -q -p gpusan-cputrace -p gpusan-cli)
lib=$repo/target/release/libgpusan_cputrace.a
wrap=-Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free,--wrap=posix_memalign,--wrap=aligned_alloc
# What Rust's static library needs (`cargo rustc -- --print native-static-libs`).
native="-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"
programs=${GPUSAN_BCACHE_PROGRAMS:-ppbench blackscholes dedup fluidanimate streamcluster swaptions}
traces=()
for p in $programs; do
  gcc -O2 -pthread "$src/$p.c" -o "$out/bin/$p-native" -lm
  gcc -O2 -pthread -fsanitize=thread -c "$src/$p.c" -o "$out/bin/$p.o"
  gcc "$out/bin/$p.o" -o "$out/bin/$p-traced" "$lib" $wrap $native
  want=$("$out/bin/$p-native" "$threads")
  t0=$(date +%s%N)
  got=$(GPUSAN_CPUTRACE="$out/$p.gstrace" "$out/bin/$p-traced" "$threads")
  t1=$(date +%s%N)
  if [ "$want" != "$got" ]; then
    echo "$p: the traced run printed \"$got\", the native run \"$want\"" >&2
    exit 1
  fi
  ms=$(( (t1 - t0) / 1000000 ))
  printf '%-14s traced in %d.%03d s, %s bytes: %s\n' "$p" $((ms / 1000)) $((ms % 1000)) "$(stat -c %s "$out/$p.gstrace")" "$got"
  traces+=("$out/$p.gstrace")
done
"$repo/target/release/gpusan" sim bcache-programs "${traces[@]}" --json "$out/programs.json" --svg-dir "$out" ${GPUSAN_BCACHE_ARGS:-} | tee "$out/programs.txt"
