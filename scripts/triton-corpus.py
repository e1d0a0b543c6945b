#!/usr/bin/env python3
"""Generates the Triton PTX fixtures in tests/corpus/triton/.

Compiles a few Triton kernels written here (matmul, softmax, layer norm, in the style
of the Triton tutorials) for CUDA sm_90 without a GPU: triton.compile() is given the
target explicitly, so no driver is queried. Triton 3.6 lowers them for sm_90a (its
NVIDIA backend adds the "a" suffix for capability >= 90), so the PTX says
`.target sm_90a`; each file is checked with our ptxas -arch=sm_90a.

The PTX `.version` comes from the ptxas Triton is pointed at: Triton maps the CUDA
release of that ptxas to a PTX ISA (13.0 -> 9.0). TRITON_PTXAS_PATH is set to the
pinned toolchain's ptxas (scripts/setup-toolchain.sh), so the PTX is .version 9.0,
what the GPU machine's driver accepts. (Triton's bundled ptxas is CUDA 12.8 -> 8.7.)

Triton is not a project dependency; install it outside the repository:
    python3 -m pip install --target /tmp/tritonpkg triton==3.6.0
and run, from the repository root:
    source <(scripts/setup-toolchain.sh --env)
    PYTHONPATH=/tmp/tritonpkg python3 scripts/triton-corpus.py
Written with triton 3.6.0; the output is deterministic for that version.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "corpus" / "triton"


def find_ptxas() -> str:
    cuda = os.environ.get("GPUSAN_CUDA")
    cand = Path(cuda) / "bin" / "ptxas" if cuda else ROOT / ".toolchain/nvidia/cu13/bin/ptxas"
    if not cand.exists():
        sys.exit(f"ptxas not found at {cand}: run `source <(scripts/setup-toolchain.sh --env)` first")
    return str(cand)


PTXAS = find_ptxas()
os.environ["TRITON_PTXAS_PATH"] = PTXAS
# Keep Triton's cache out of $HOME and out of the way of other runs.
_cache = tempfile.mkdtemp(prefix="triton-corpus-cache-")
os.environ["TRITON_CACHE_DIR"] = _cache

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

# --- kernels (this section is also exec'd by load_kernels(), see there) ---------------

@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row in tl.range(row_start, n_rows, row_step):
        row_ptr = in_ptr + row * in_row_stride
        cols = tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(row_ptr + cols, mask=mask, other=-float("inf")).to(tl.float32)
        x = x - tl.max(x, axis=0)
        num = tl.exp(x)
        y = num / tl.sum(num, axis=0)
        tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def layernorm_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride, N, eps,
                     BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    y_ptr += row * stride
    x_ptr += row * stride
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(x_ptr + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_ptr + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(w_ptr + cols, mask=mask)
        b = tl.load(b_ptr + cols, mask=mask)
        x = tl.load(x_ptr + cols, mask=mask, other=0.).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_ptr + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def matmul_tma_kernel(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr):
    # Host-built TMA descriptors (triton.tools.tensor_descriptor.TensorDescriptor on the
    # host side): loads/stores become cp.async.bulk.tensor with mbarriers.
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
        b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
        acc = tl.dot(a, b, acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.float16))


# --- end of kernels ----------------------------------------------------------------


def load_kernels():
    """Returns the kernels above, compiled from this file under the repository-relative
    name "scripts/triton-corpus.py". Triton puts the kernel's file name into the PTX
    (.file and, as DW_AT_name/DW_AT_comp_dir, into .section .debug_info), and Python
    gives a script an absolute __file__; a relative name keeps the PTX the same in
    every checkout."""
    os.chdir(ROOT)
    rel = "scripts/triton-corpus.py"
    text = (ROOT / rel).read_text()
    start = text.index("# --- kernels")
    end = text.index("# --- end of kernels")
    # Keep line numbers: blank out everything outside the kernels section.
    body = "\n" * text[:start].count("\n") + text[start:end]
    ns = {"triton": triton, "tl": tl, "__name__": "triton_corpus_kernels"}
    exec(compile(body, rel, "exec"), ns)
    return ns


def matmul_sig(dt_in, dt_out, unit_strides):
    """unit_strides: make stride_ak and stride_bn compile-time 1, as Triton's JIT does
    when called with contiguous row-major A and B (it specialises int args equal to 1)."""
    sig = {"a_ptr": f"*{dt_in}", "b_ptr": f"*{dt_in}", "c_ptr": f"*{dt_out}"}
    for name in ["M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn"]:
        sig[name] = "constexpr" if unit_strides and name in ("stride_ak", "stride_bn") else "i32"
    for name in ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"]:
        sig[name] = "constexpr"
    return sig


def softmax_sig(dt):
    return {"out_ptr": f"*{dt}", "in_ptr": f"*{dt}", "in_row_stride": "i32", "out_row_stride": "i32",
            "n_rows": "i32", "n_cols": "i32", "BLOCK_SIZE": "constexpr"}


def layernorm_sig(dt):
    return {"x_ptr": f"*{dt}", "y_ptr": f"*{dt}", "w_ptr": "*fp32", "b_ptr": "*fp32", "mean_ptr": "*fp32",
            "rstd_ptr": "*fp32", "stride": "i32", "N": "i32", "eps": "fp32", "BLOCK_SIZE": "constexpr"}


def divisible(sig, *names):
    """Marks arguments (pointers, ints) as multiples of 16, as the JIT does when it
    specialises on the real arguments ("D" specialisation); keys are argument indices."""
    order = list(sig)
    return {(order.index(n), ): [["tt.divisibility", 16]] for n in names}


def variants():
    """(file name, kernel name, signature, constexprs, attrs, compile options)."""
    out = []
    sig = matmul_sig("fp16", "fp16", unit_strides=True)
    out.append(("matmul.ptx", "matmul_kernel", sig,
                dict(stride_ak=1, stride_bn=1, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8),
                divisible(sig, "a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_bk", "stride_cm"),
                dict(num_warps=8, num_stages=3)))
    # Generic strides, nothing known about alignment: scalar cp.async, tf32 wgmma.
    sig = matmul_sig("fp32", "fp32", unit_strides=False)
    out.append(("matmul_fp32_generic_64x64.ptx", "matmul_kernel", sig,
                dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8),
                divisible(sig, "a_ptr", "b_ptr", "c_ptr"), dict(num_warps=4, num_stages=4)))
    sig = {"a_desc": "tensordesc<fp16[128, 64]>", "b_desc": "tensordesc<fp16[64, 128]>",
           "c_desc": "tensordesc<fp16[128, 128]>", "M": "i32", "N": "i32", "K": "i32",
           "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr"}
    out.append(("matmul_tma.ptx", "matmul_tma_kernel", sig, dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64),
                divisible(sig, "M", "N", "K"), dict(num_warps=8, num_stages=3)))
    sig = softmax_sig("fp32")
    out.append(("softmax.ptx", "softmax_kernel", sig, dict(BLOCK_SIZE=1024),
                divisible(sig, "out_ptr", "in_ptr", "in_row_stride", "out_row_stride", "n_cols"),
                dict(num_warps=4, num_stages=2)))
    # n_cols not known to be a multiple of 16: masked scalar loads.
    sig = softmax_sig("fp16")
    out.append(("softmax_fp16_4096.ptx", "softmax_kernel", sig, dict(BLOCK_SIZE=4096),
                divisible(sig, "out_ptr", "in_ptr"), dict(num_warps=16, num_stages=1)))
    sig = layernorm_sig("fp32")
    out.append(("layernorm.ptx", "layernorm_kernel", sig, dict(BLOCK_SIZE=1024),
                divisible(sig, "x_ptr", "y_ptr", "w_ptr", "b_ptr", "mean_ptr", "rstd_ptr", "stride", "N"),
                dict(num_warps=8)))
    sig = layernorm_sig("fp16")
    out.append(("layernorm_fp16_512.ptx", "layernorm_kernel", sig, dict(BLOCK_SIZE=512),
                divisible(sig, "x_ptr", "y_ptr", "w_ptr", "b_ptr", "stride", "N"), dict(num_warps=4)))
    return out


def normalise(ptx: str) -> str:
    """Triton's own library functions (tl.max, tl.sum, ... in triton/language/*.py) get
    .file entries with the absolute path of the installed package; make those relative
    to the package's parent so the PTX does not depend on where triton is installed.
    (.file strings are not referenced by the DWARF in .debug_info, so this is safe.)"""
    pkg_parent = str(Path(triton.__file__).resolve().parent.parent) + "/"
    return "\n".join(line.replace(f'"{pkg_parent}', '"') if line.lstrip().startswith(".file") else line
                     for line in ptx.split("\n"))


def main() -> int:
    kernels = load_kernels()
    target = GPUTarget("cuda", 90, 32)
    OUT.mkdir(parents=True, exist_ok=True)
    failed = 0
    written = []
    for fname, kname, sig, consts, attrs, opts in variants():
        src = ASTSource(fn=kernels[kname], signature=sig, constexprs=consts, attrs=attrs)
        try:
            compiled = triton.compile(src, target=target, options=opts)
        except Exception as e:  # report and go on with the other kernels
            print(f"triton-corpus: {fname}: compile failed: {e}", file=sys.stderr)
            failed += 1
            continue
        ptx = normalise(compiled.asm["ptx"])
        target_line = re.search(r"^\.target\s+([^\s,]+)", ptx, re.M).group(1)
        version = re.search(r"^\.version\s+(\S+)", ptx, re.M).group(1)
        path = OUT / fname
        path.write_text(ptx)
        res = subprocess.run([PTXAS, f"-arch={target_line}", str(path), "-o", os.devnull],
                             capture_output=True, text=True)
        if res.returncode != 0:
            print(f"triton-corpus: ptxas rejected {fname}:\n{res.stderr}", file=sys.stderr)
            failed += 1
        written.append(f"{fname} (.version {version}, .target {target_line}, {len(ptx)} bytes)")
    shutil.rmtree(_cache, ignore_errors=True)
    for w in written:
        print("  " + w)
    print(f"triton-corpus: triton {triton.__version__}, {len(written)} PTX files written, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
