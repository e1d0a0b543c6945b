# cases: oob uaf clean
# expect-oob: out_of_bounds_write
# expect-uaf: use_after_free
# what: CuPy RawKernel (NVRTC straight to a cubin, kept in CuPy's kernel cache), RawModule and
#   ElementwiseKernel. oob: a RawKernel writes one float past a 1000-float array (`i <= n`);
#   uaf: a RawModule kernel writes through the pointer of an array freed just before, after an
#   array of the same size was allocated; clean: the same kernels in bounds. CuPy's memory pool
#   is off (`set_allocator(None)`): each array is its own cudaMalloc.
import sys

import cupy as cp

cp.cuda.set_allocator(None)
scenario = sys.argv[1]
n = 1000
raw = cp.RawKernel(r'''
extern "C" __global__ void fill(float* a, int n, int last) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= last) a[i] = 1.0f;
}''', "fill")
mod = cp.RawModule(code=r'''
extern "C" __global__ void poke(unsigned long long p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) ((float*)p)[i] = 2.0f;
}''')
poke = mod.get_function("poke")
twice = cp.ElementwiseKernel("float32 x", "float32 y", "y = x * 2", "twice")
a = cp.zeros(n, dtype=cp.float32)
raw((4,), (256,), (a, cp.int32(n), cp.int32(n if scenario == "oob" else n - 1)))
if scenario == "uaf":
    b = cp.zeros(n, dtype=cp.float32)
    stale = b.data.ptr
    del b
    c = cp.zeros(n, dtype=cp.float32)  # the driver may hand the same memory out again
    poke((4,), (256,), (cp.uint64(stale), cp.int32(n)))
    del c
else:
    poke((4,), (256,), (cp.uint64(a.data.ptr), cp.int32(n)))
y = twice(a)
cp.cuda.runtime.deviceSynchronize()
print(f"cupy {scenario} done {float(y.sum()):.0f}")
