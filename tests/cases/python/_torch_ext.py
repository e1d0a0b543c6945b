"""The CUDA extension the torch_inline cases share (not a case): one kernel, `fill`, built by
`torch.utils.cpp_extension.load_inline` with nvcc and ninja, PTX embedded
(TORCH_CUDA_ARCH_LIST=9.0+PTX) so that gpusan instruments it when the extension loads.
Building takes about a minute, so the suite builds it once, natively, before the cases run
(`python3 _torch_ext.py`, its `prepare:` step) in the folder TORCH_EXTENSIONS_DIR names; the
cases then only load it. No nvcc or ninja: a skip with the reason."""
import os
import shutil

from _case import need, skip

# Set, not defaulted: an ARCH_LIST the machine sets without +PTX would leave gpusan no PTX.
os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0+PTX"

CUDA_SOURCE = r'''
#include <cstdint>
__global__ void fill_kernel(float* a, int last) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= last) a[i] = 1.0f;
}
void fill(int64_t ptr, int64_t last) {
    fill_kernel<<<4, 256>>>(reinterpret_cast<float*>(ptr), (int)last);
}
'''
CPP_SOURCE = "void fill(int64_t ptr, int64_t last);"


def load():
    torch = need("torch")
    ext = need("torch.utils.cpp_extension")
    if not torch.cuda.is_available():
        skip("torch.cuda.is_available() is False")
    if ext.CUDA_HOME is None and shutil.which("nvcc") is None:
        skip("no nvcc (CUDA_HOME unset and none on PATH): load_inline cannot build")
    if not ext.is_ninja_available():
        skip("no ninja: load_inline cannot build")
    return ext.load_inline(
        "gpusan_case_fill", cpp_sources=CPP_SOURCE, cuda_sources=CUDA_SOURCE, functions=["fill"], verbose=False
    )


if __name__ == "__main__":
    load()
    print("_torch_ext built", flush=True)
