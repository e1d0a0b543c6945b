"""A CuPy program with 50 distinct RawKernels, each compiled (NVRTC to a cubin, or CuPy's
cache) and launched once: what gpusan's NVRTC door adds to a program's start."""
import cupy as cp

cp.cuda.set_allocator(None)
a = cp.zeros(4096, dtype=cp.float32)
for i in range(50):
    k = cp.RawKernel(
        r'extern "C" __global__ void k%d(float* a, int n) { int j = blockIdx.x * blockDim.x + threadIdx.x; '
        r'if (j < n) a[j] += %d.0f * a[(j + %d) %% n]; }' % (i, i, i),
        f"k{i}",
    )
    k((16,), (256,), (a, cp.int32(4096)))
cp.cuda.runtime.deviceSynchronize()
print("cupy-start done", float(a.sum()))
