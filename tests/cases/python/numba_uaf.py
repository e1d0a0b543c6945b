# gpusan-case: check
# expect: use_after_free
# compute-sanitizer: no
# needs: numba
# wheels: numpy
# env: NUMBA_DISABLE_PERFORMANCE_WARNINGS=1 NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT=0
# kernel: fill
# what: a numba-cuda kernel writes through a view of a device array freed before (numba
#   defers frees: at most 0 pending, and the context's pending frees flushed), after an array of
#   the same size was allocated (`note: reused=` says whether natively the driver handed the
#   same address out again).
import gc

from _case import done, need, note, skip

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
b = cuda.device_array(n, dtype=np.float32)
stale = b.__cuda_array_interface__["data"][0]
del b
gc.collect()
cuda.current_context().deallocations.clear()
c = cuda.to_device(np.zeros(n, dtype=np.float32))
note("reused", c.__cuda_array_interface__["data"][0] == stale)
view = cuda.from_cuda_array_interface(
    {"shape": (n,), "typestr": "<f4", "data": (stale, False), "version": 2}, owner=None, sync=False
)
fill[4, 256](view, n - 1)
cuda.synchronize()
done(int(c.copy_to_host().sum()))
