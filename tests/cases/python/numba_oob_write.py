# gpusan-case: check
# expect: out_of_bounds_write
# compute-sanitizer: yes
# needs: numba
# wheels: numpy
# env: NUMBA_DISABLE_PERFORMANCE_WARNINGS=1
# kernel: fill
# what: a numba-cuda `@cuda.jit(cache=True)` kernel (NVVM to LTO-IR or PTX, linked by
#   nvJitLink; kept in numba's cache) writes one float past a 1000-float device array
#   (`i <= n`). numba's device arrays are plain cuMemAlloc allocations.
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
fill[4, 256](a, n)
cuda.synchronize()
done(int(a.copy_to_host().sum()))
