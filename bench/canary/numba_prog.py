"""A clean numba-cuda program for bench/reliability/canary_programs.sh (issue 17): @cuda.jit
kernels writing every element of device arrays of odd sizes, to_device / copy_to_host, a
shared-memory reduction. Needs numpy 2.2.6 on the GPU machine (the case puts the carried
wheel first on PYTHONPATH). Prints integer results and OK."""
import numpy as np
from numba import cuda


@cuda.jit
def fill(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = i % 7


@cuda.jit
def block_sums(a, out):
    sm = cuda.shared.array(256, dtype=np.int64)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    sm[t] = a[i] if i < a.size else 0
    cuda.syncthreads()
    s = 128
    while s > 0:
        if t < s:
            sm[t] += sm[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        out[cuda.blockIdx.x] = sm[0]


total = 0
for n in (1, 3, 1000, 4099, 65537):
    d = cuda.device_array(n, dtype=np.int64)
    blocks = (n + 255) // 256
    fill[blocks, 256](d)
    out = cuda.device_array(blocks, dtype=np.int64)
    block_sums[blocks, 256](d, out)
    total += int(out.copy_to_host().sum()) + int(d.copy_to_host().sum())
h = np.arange(12345, dtype=np.int32)
d = cuda.to_device(h)
total += int(d.copy_to_host().sum())
cuda.synchronize()
print(f"total={total}")
print("OK")
