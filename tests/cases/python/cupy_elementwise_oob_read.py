# gpusan-case: check
# expect: out_of_bounds_read
# compute-sanitizer: yes
# needs: cupy numpy
# kernel: shift_next
# what: a CuPy ElementwiseKernel with a `raw` input reads `x[i + 1]` for every element of a
#   1000-float output: the last thread reads one float past x; CuPy's memory pool off.
from _case import done, need

cp = need("cupy")
np = need("numpy")
cp.cuda.set_allocator(None)
n = 1000
shift_next = cp.ElementwiseKernel("raw float32 x", "float32 y", "y = x[i + 1]", "shift_next")
x = cp.asarray(np.arange(n, dtype=np.float32))
y = cp.zeros(n, dtype=cp.float32)
shift_next(x, y)
cp.cuda.runtime.deviceSynchronize()
done(int(cp.asnumpy(y)[: n - 1].sum()))
