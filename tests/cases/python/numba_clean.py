# gpusan-case: check
# expect: clean
# compute-sanitizer: no
# needs: numba
# wheels: numpy
# env: NUMBA_DISABLE_PERFORMANCE_WARNINGS=1 NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT=0
# kernel: fill
# what: clean twin of the numba cases: the kernel fills a 1000-float array to its last
#   element, then an array is freed, one of the same size allocated, and the kernel writes the
#   new one (through a view made from its pointer, as the use-after-free case does).
import gc

from _case import done, need, skip

np = need("numpy")
cuda = need("numba.cuda")
if not cuda.is_available():
    skip("numba.cuda.is_available() is False")


@cuda.jit(cache=True)
def fill(a, last):
    i = cuda.grid(1)
    if i <= last:
        a[i] = 1.0


n = 1000
a = cuda.to_device(np.zeros(n, dtype=np.float32))
fill[4, 256](a, n - 1)
b = cuda.device_array(n, dtype=np.float32)
del b
gc.collect()
cuda.current_context().deallocations.clear()
c = cuda.to_device(np.zeros(n, dtype=np.float32))
view = cuda.from_cuda_array_interface(
    {"shape": (n,), "typestr": "<f4", "data": (c.__cuda_array_interface__["data"][0], False), "version": 2},
    owner=None,
    sync=False,
)
fill[4, 256](view, n - 1)
cuda.synchronize()
done(int(a.copy_to_host().sum() + c.copy_to_host().sum()))
