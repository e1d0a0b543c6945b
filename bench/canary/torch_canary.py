"""A PyTorch program for bench/reliability/canary_torch.sh (issue 17), the caching allocator
on (as PyTorch runs by default): a custom op built by `torch.utils.cpp_extension.load_inline`
as sm_90 machine code only (`-gencode=arch=compute_90,code=sm_90`, checked with
`cuobjdump -lptx`: the premise fails, exit 3, if it holds PTX) fills a 1000-float tensor.
Its block is 4096 bytes (PyTorch rounds small blocks to 512), so 96 bytes of slack follow
the tensor inside its block: canary mode's tail canary for a pool block.

  torch_canary.py build         build the extension (into TORCH_EXTENSIONS_DIR) and exit
  torch_canary.py bug           the op writes one float past the tensor (`i <= n`), 20 ms
                                after the tensor was allocated (the device synchronized)
  torch_canary.py bug_at_once   the same, right after the allocation (the usual pattern: an
                                output allocated, then written): canary17 writes a pool
                                block's canary with the guard's next batch, after the work
                                queued on its stream, so an overflow queued before that
                                batch is the plan's known window
  torch_canary.py clean         the op fills the tensor to its last element; a tensor is
                                freed, one of the same size allocated and filled: its block
                                is reused

Prints `result=<sum>` (the same natively and under gpusan for `clean`), `info:` lines
(ptx_entries, the tensor's address) and `done`. The tensors stay live 50 ms after the
kernel, so a concurrent guard can see them before the program ends.
"""
import os
import shutil
import subprocess
import sys
import time

CUDA_SOURCE = r'''
#include <cstdint>
__global__ void canary_fill_sass(float* a, int last) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= last) a[i] = 1.0f;
}
void fill(int64_t ptr, int64_t last) {
    canary_fill_sass<<<4, 256>>>(reinterpret_cast<float*>(ptr), (int)last);
}
'''
CPP_SOURCE = "void fill(int64_t ptr, int64_t last);"
SASS_ONLY = ["-gencode=arch=compute_90,code=sm_90"]


def ptx_entries(path, cuda_home):
    tool = shutil.which("cuobjdump") or (os.path.join(cuda_home, "bin", "cuobjdump") if cuda_home else None)
    if not tool or not os.path.exists(tool):
        return None
    r = subprocess.run([tool, "-lptx", path], capture_output=True, text=True, timeout=60)
    return len([line for line in r.stdout.splitlines() if line.strip().startswith("PTX file")])


def load():
    import torch
    from torch.utils import cpp_extension as ext
    if not torch.cuda.is_available():
        print("skipped: torch.cuda.is_available() is False", flush=True)
        sys.exit(4)
    # -O0 for the host side: the generated main.cpp includes torch/extension.h, whose
    # compilation is most of the build's time (the case has a minute).
    module = ext.load_inline("gpusan_canary_fill_sass", cpp_sources=CPP_SOURCE, cuda_sources=CUDA_SOURCE,
                             functions=["fill"], extra_cuda_cflags=SASS_ONLY, extra_cflags=["-O0"], verbose=False)
    n = ptx_entries(module.__file__, ext.CUDA_HOME)
    print(f"info: ptx_entries={'-1' if n is None else n}", flush=True)
    if n:
        print(f"the extension holds {n} PTX entries: not a machine-code-only build", file=sys.stderr)
        sys.exit(3)
    return module


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode not in ("build", "bug", "bug_at_once", "clean"):
        print(__doc__, file=sys.stderr)
        return 64
    for k in ("PYTORCH_NO_CUDA_MEMORY_CACHING", "PYTORCH_CUDA_ALLOC_CONF"):
        os.environ.pop(k, None)
    ext = load()
    if mode == "build":
        print("done", flush=True)
        return 0
    import torch
    n = 1000
    x = torch.zeros(n, device="cuda")
    print(f"info: tensor=0x{x.data_ptr():x} block_bytes=4096 tensor_bytes={4 * n}", flush=True)
    if mode.startswith("bug"):
        if mode == "bug":
            torch.cuda.synchronize()
            time.sleep(0.02)
        ext.fill(x.data_ptr(), n)
        torch.cuda.synchronize()
        time.sleep(0.05)
        total = x.sum().item()
    else:
        ext.fill(x.data_ptr(), n - 1)
        y = torch.zeros(n, device="cuda")
        del y
        z = torch.zeros(n, device="cuda")
        ext.fill(z.data_ptr(), n - 1)
        torch.cuda.synchronize()
        time.sleep(0.05)
        total = x.sum().item() + z.sum().item()
    print(f"result={int(total)}", flush=True)
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
