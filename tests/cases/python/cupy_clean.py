# gpusan-case: check
# expect: clean
# compute-sanitizer: no
# needs: cupy numpy
# kernel: fill take_next reverse sum_r poke
# what: clean twin of the CuPy cases: the RawKernel fills to the last element, the RawModule
#   kernel reads a[i + 1] for i < n - 1, an ElementwiseKernel reads a raw input reversed to
#   its first element, a ReductionKernel sums, and an array freed and allocated again is
#   written through the new array's pointer.
from _case import done, need

cp = need("cupy")
np = need("numpy")
cp.cuda.set_allocator(None)
n = 1000
fill = cp.RawKernel(r'''
extern "C" __global__ void fill(float* a, int last) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= last) a[i] = 1.0f;
}''', "fill")
mod = cp.RawModule(code=r'''
extern "C" __global__ void take_next(const float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i + 1 < n) b[i] = a[i + 1];
}
extern "C" __global__ void poke(unsigned long long p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) ((float*)p)[i] = 2.0f;
}''')
take_next, poke = mod.get_function("take_next"), mod.get_function("poke")
reverse = cp.ElementwiseKernel("raw float32 x", "float32 y", "y = x[_ind.size() - 1 - i]", "reverse")
sum_r = cp.ReductionKernel("float32 x", "float32 y", "x", "a + b", "y = a", "0", "sum_r")

a = cp.zeros(n, dtype=cp.float32)
fill((4,), (256,), (a, cp.int32(n - 1)))
x = cp.asarray(np.arange(n, dtype=np.float32))
b = cp.zeros(n, dtype=cp.float32)
take_next((4,), (256,), (x, b, cp.int32(n)))
r = cp.zeros(n, dtype=cp.float32)
reverse(x, r)
total = sum_r(x)
old = cp.zeros(n, dtype=cp.float32)
del old
c = cp.zeros(n, dtype=cp.float32)
poke((4,), (256,), (cp.uint64(c.data.ptr), cp.int32(n)))
cp.cuda.runtime.deviceSynchronize()
h = [int(cp.asnumpy(v).sum()) for v in (a, b, r, c)]
done(f"{h} {int(total.get())}")
