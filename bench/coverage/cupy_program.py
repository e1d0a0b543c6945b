"""A CuPy program whose kernels it counts itself: 8 RawKernels launched 25 times each, and
an ElementwiseKernel launched 25 times (CuPy's own reductions and copies are avoided: each
launch here is one the program makes)."""
import json

import cupy as cp
import numpy as np

cp.cuda.set_allocator(None)
src = r'''extern "C" __global__ void k{i}(float* a, int n) {{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < n) a[j] = a[j] * {i} + 1.0f;
}}'''
kernels = [cp.RawKernel(src.format(i=i), f"k{i}") for i in range(8)]
twice = cp.ElementwiseKernel("float32 x", "float32 y", "y = x * 2", "twice")
a = cp.asarray(np.ones(1 << 16, dtype=np.float32))  # a copy, no kernel
b = cp.empty_like(a)
launches = 0
for _ in range(25):
    for k in kernels:
        k(((1 << 16) // 256,), (256,), (a, cp.int32(1 << 16)))
        launches += 1
    twice(a, b)
    launches += 1
cp.cuda.runtime.deviceSynchronize()
print(json.dumps({"program_launches": launches, "program_kernels": len(kernels) + 1}))
