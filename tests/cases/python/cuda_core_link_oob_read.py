# gpusan-case: check
# expect: out_of_bounds_read
# compute-sanitizer: yes
# needs: cuda.core cupy
# kernel: take_next
# what: cuda-python's cuda.core: a Program compiled to PTX, linked into a cubin by cuda.core's
#   Linker (nvJitLink or cuLink*: `note: linker_backend=`), reads one float past a 1000-float
#   array (`b[i] = a[i + 1]` for every i < n).
from _case import done, need
from _cuda_core import cp, linked_kernel, run

np = need("numpy")
n = 1000
a = cp.asarray(np.arange(n, dtype=np.float32))
b = cp.zeros(n, dtype=cp.float32)
run(linked_kernel("take_next"), a.data.ptr, b.data.ptr, cp.int32(n))
done(int(cp.asnumpy(b)[: n - 1].sum()))
