# gpusan-case: check
# expect: clean
# compute-sanitizer: no
# needs: cuda.core cupy
# kernel: fill take_next
# what: clean twin of the cuda.core cases: the cubin's kernel fills to the last element, the
#   linked kernel fills and reads a[i + 1] only for i < n - 1 (its n is n - 1), and an array
#   freed and allocated again is written through the new array's pointer.
from _case import done, need
from _cuda_core import cp, cubin_kernel, linked_kernel, run

np = need("numpy")
n = 1000
a = cp.zeros(n, dtype=cp.float32)
run(cubin_kernel("fill"), a.data.ptr, cp.int32(n - 1))
x = cp.asarray(np.arange(n, dtype=np.float32))
b = cp.zeros(n, dtype=cp.float32)
run(linked_kernel("take_next"), x.data.ptr, b.data.ptr, cp.int32(n - 1))
old = cp.zeros(n, dtype=cp.float32)
del old
c = cp.zeros(n, dtype=cp.float32)
run(linked_kernel("fill"), c.data.ptr, cp.int32(n - 1))
done([int(cp.asnumpy(v).sum()) for v in (a, b, c)])
