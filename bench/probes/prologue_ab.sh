#!/usr/bin/env bash
# Makes the PTX variants bench/probes/prologue_ab.cu times (here, with the pinned toolchain
# and a release gpusan): DIR/stencil_*.ptx and DIR/gemm_*.ptx.
#   native       nvcc's PTX, JIT-compiled like the instrumented ones
#   check        `gpusan instrument`
#   noprologue   check, with the block-wide lookup and its shared-memory reads taken out
#                (every root "found nowhere": the checks run, nothing is looked up)
#   unrolled     (gemm) check, with the checked loop made unreachable, so ptxas sees only
#                the unchecked clone (what the clone costs when ptxas unrolls it)
#   Usage: bench/probes/prologue_ab.sh GPUSAN DIR
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
gpusan=$1
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
nvcc=$repo/.toolchain/nvidia/cu13/bin/nvcc
"$nvcc" -O3 -arch=sm_90 -lineinfo -ptx -I"$repo/bench/workloads" -o "$out/stencil_native.ptx" "$repo/bench/workloads/stencil2d.cu"
g=$repo/bench/work/third_party/gemm
(cd "$g" && "$nvcc" -O3 -arch=sm_90 -lineinfo -ptx -include "$repo/bench/workloads/third_party.h" -DBENCH_NAME=gemm -Iutilities gemm.cu -o "$out/gemm_native.ptx")
for k in stencil gemm; do "$gpusan" instrument "$out/${k}_native.ptx" -o "$out/${k}_check.ptx"; done
python3 - "$out" <<'PY'
import re, sys
out = sys.argv[1]
for k, entry in [("stencil", "_Z7jacobi5"), ("gemm", "_Z11gemm_kernel")]:
    s = open(f"{out}/{k}_check.ptx").read()
    e = s.index(".visible .entry " + entry)
    a = s.index("\tmov.u32 \t%__gs_k, %ntid.x;", e)
    b = s.index("bar.sync \t0;", a) + len("bar.sync \t0;")
    t = s[:a] + s[b:]
    t = re.sub(r"\tld\.shared\.v2\.u64 \t\{%__gs_low\d+, %__gs_lim\d+\}, \[__gs_meta\+\d+\];\n", "", t)
    open(f"{out}/{k}_noprologue.ptx", "w").write(t)
s = open(f"{out}/gemm_check.ptx").read()
first = re.search(r"\t@!%__gs_vok bra \t\$L__BB\d+_\d+;\n", s)
open(f"{out}/gemm_unrolled.ptx", "w").write(s[: first.start()] + s[first.end():])
PY
ls "$out"
