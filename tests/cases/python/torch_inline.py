# cases: oob uaf clean
# expect-oob: out_of_bounds_write
# expect-uaf: use_after_free
# env: PYTORCH_NO_CUDA_MEMORY_CACHING=1 TORCH_CUDA_ARCH_LIST=9.0+PTX
# what: a CUDA kernel built by torch.utils.cpp_extension.load_inline (nvcc; PTX embedded with
#   TORCH_CUDA_ARCH_LIST=9.0+PTX, instrumented when the extension loads) and PyTorch's
#   jiterator (NVRTC). oob: the extension's kernel writes one float past a 1000-float tensor;
#   uaf: it writes through the pointer of a tensor freed before, after a tensor of the same
#   size was allocated; clean: in bounds. The jiterator kernel runs in every scenario.
import os
import sys

import torch
from torch.utils.cpp_extension import load_inline

cuda_src = r'''
#include <torch/extension.h>
__global__ void fill_kernel(float* a, int last) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= last) a[i] = 1.0f;
}
void fill(int64_t ptr, int64_t last) {
    fill_kernel<<<4, 256>>>(reinterpret_cast<float*>(ptr), (int)last);
}
'''
cpp_src = "void fill(int64_t ptr, int64_t last);"
ext = load_inline("gpusan_case_fill", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["fill"], verbose=False)
scenario = sys.argv[1]
n = 1000
x = torch.zeros(n, device="cuda")
ext.fill(x.data_ptr(), n if scenario == "oob" else n - 1)
if scenario == "uaf":
    y = torch.zeros(n, device="cuda")
    stale = y.data_ptr()
    del y
    z = torch.zeros(n, device="cuda")
    ext.fill(stale, n - 1)
    del z
twice = torch.cuda.jiterator._create_jit_fn("template <typename T> T twice(T x) { return x * 2; }")
r = twice(x)
torch.cuda.synchronize()
print(f"torch {scenario} done {float(r.sum()):.0f}")
