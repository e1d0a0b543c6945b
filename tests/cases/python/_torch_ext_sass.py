"""The machine-code-only CUDA extension the torch_inline_sass cases share (not a case; issue
14): one kernel, `fill_sass_kernel`, built by `torch.utils.cpp_extension.load_inline` with
`-gencode=arch=compute_90,code=sm_90` in extra_cuda_cflags, so the extension holds sm_90
machine code and no PTX (PyTorch adds no arch flags of its own when the flags name one), as
PyTorch's own kernels are: gpusan can only check it through the binary route. After loading,
`cuobjdump -lptx` lists the PTX the extension holds (a note: `ptx_entries=N`); any at all is
a broken premise and the case exits 3. Built once by the suite's `prepare:` step
(`python3 _torch_ext_sass.py`) in TORCH_EXTENSIONS_DIR; no nvcc or ninja: a skip."""
import os
import shutil
import subprocess
import sys

from _case import need, note, skip

CUDA_SOURCE = r'''
#include <cstdint>
__global__ void fill_sass_kernel(float* a, int last) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= last) a[i] = 1.0f;
}
void fill(int64_t ptr, int64_t last) {
    fill_sass_kernel<<<4, 256>>>(reinterpret_cast<float*>(ptr), (int)last);
}
'''
CPP_SOURCE = "void fill(int64_t ptr, int64_t last);"
SASS_ONLY = ["-gencode=arch=compute_90,code=sm_90"]


def ptx_entries(path, cuda_home):
    """How many PTX entries the fatbins of `path` hold, by cuobjdump; None without one."""
    tool = shutil.which("cuobjdump") or (os.path.join(cuda_home, "bin", "cuobjdump") if cuda_home else None)
    if not tool or not os.path.exists(tool):
        return None
    r = subprocess.run([tool, "-lptx", path], capture_output=True, text=True, timeout=60)
    return len([line for line in r.stdout.splitlines() if line.strip()])


def load():
    torch = need("torch")
    ext = need("torch.utils.cpp_extension")
    if not torch.cuda.is_available():
        skip("torch.cuda.is_available() is False")
    if torch.cuda.get_device_capability() != (9, 0):
        skip(f"the extension is sm_90 machine code only; this GPU is sm_{''.join(map(str, torch.cuda.get_device_capability()))}")
    if ext.CUDA_HOME is None and shutil.which("nvcc") is None:
        skip("no nvcc (CUDA_HOME unset and none on PATH): load_inline cannot build")
    if not ext.is_ninja_available():
        skip("no ninja: load_inline cannot build")
    module = ext.load_inline("gpusan_case_fill_sass", cpp_sources=CPP_SOURCE, cuda_sources=CUDA_SOURCE,
                             functions=["fill"], extra_cuda_cflags=SASS_ONLY, verbose=False)
    n = ptx_entries(module.__file__, ext.CUDA_HOME)
    note("ptx_entries", "unknown (no cuobjdump)" if n is None else n)
    if n:
        print(f"the extension holds {n} PTX entries: not a machine-code-only build", file=sys.stderr)
        sys.exit(3)
    return module


if __name__ == "__main__":
    load()
    print("_torch_ext_sass built", flush=True)
