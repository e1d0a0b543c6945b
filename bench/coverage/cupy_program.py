"""A CuPy program that counts its own launches: 8 RawKernels launched 25 times each and an
ElementwiseKernel launched 25 times (CuPy's own reductions and copies are avoided: each launch
here is one the program makes), by kernel name."""
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
by_name = {}
for _ in range(25):
    for i, k in enumerate(kernels):
        k(((1 << 16) // 256,), (256,), (a, cp.int32(1 << 16)))
        by_name[f"k{i}"] = by_name.get(f"k{i}", 0) + 1
    twice(a, b)
    by_name["twice"] = by_name.get("twice", 0) + 1
cp.cuda.runtime.deviceSynchronize()
print(json.dumps({"program_launches": sum(by_name.values()), "program_kernels": len(by_name), "by_name": by_name}))
