# gpusan-case: check
# expect: out_of_bounds_read
# compute-sanitizer: yes
# needs: cupy numpy
# kernel: take_next
# what: a CuPy RawModule kernel reads one float past a 1000-float array (`b[i] = a[i + 1]`
#   for every i < n); CuPy's memory pool off.
from _case import done, need

cp = need("cupy")
np = need("numpy")
cp.cuda.set_allocator(None)
n = 1000
mod = cp.RawModule(code=r'''
extern "C" __global__ void take_next(const float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] = a[i + 1];
}''')
take_next = mod.get_function("take_next")
a = cp.asarray(np.arange(n, dtype=np.float32))
b = cp.zeros(n, dtype=cp.float32)
take_next((4,), (256,), (a, b, cp.int32(n)))
cp.cuda.runtime.deviceSynchronize()
done(int(cp.asnumpy(b)[: n - 1].sum()))
