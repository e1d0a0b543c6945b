# gpusan-case: check
# expect: use_after_free
# compute-sanitizer: no
# needs: cupy
# kernel: poke
# what: a CuPy RawKernel writes through the pointer of a 1000-float array freed just before
#   (CuPy's memory pool off: cudaFree), after an array of the same size was allocated (natively
#   the driver usually hands the same address out again: `note: reused=`). compute-sanitizer
#   cannot see it when the address was reused.
from _case import done, need, note

cp = need("cupy")
cp.cuda.set_allocator(None)
n = 1000
poke = cp.RawKernel(r'''
extern "C" __global__ void poke(unsigned long long p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) ((float*)p)[i] = 2.0f;
}''', "poke")
b = cp.zeros(n, dtype=cp.float32)
stale = b.data.ptr
del b
c = cp.zeros(n, dtype=cp.float32)
note("reused", c.data.ptr == stale)
poke((4,), (256,), (cp.uint64(stale), cp.int32(n)))
cp.cuda.runtime.deviceSynchronize()
done(int(cp.asnumpy(c).sum()))
