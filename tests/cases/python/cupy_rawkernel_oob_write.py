# gpusan-case: check
# expect: out_of_bounds_write
# compute-sanitizer: yes
# needs: cupy
# kernel: fill
# what: a CuPy RawKernel (NVRTC straight to a cubin, kept in CuPy's on-disk kernel cache)
#   writes one float past a 1000-float array (`i <= n`). CuPy's memory pool is off: the array
#   is its own cudaMalloc, so natively the write lands in the allocation's rounding.
from _case import done, need

cp = need("cupy")
cp.cuda.set_allocator(None)
n = 1000
fill = cp.RawKernel(r'''
extern "C" __global__ void fill(float* a, int last) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= last) a[i] = 1.0f;
}''', "fill")
a = cp.zeros(n, dtype=cp.float32)
fill((4,), (256,), (a, cp.int32(n)))
cp.cuda.runtime.deviceSynchronize()
done(int(cp.asnumpy(a).sum()))
