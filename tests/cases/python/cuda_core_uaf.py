# gpusan-case: check
# expect: use_after_free
# compute-sanitizer: no
# needs: cuda.core cupy
# kernel: fill
# what: cuda-python's cuda.core: the kernel of a Program linked by cuda.core's Linker writes
#   through the pointer of a 1000-float array freed before, after an array of the same size was
#   allocated (`note: reused=`: whether natively the driver handed the same address out again).
from _case import done, note
from _cuda_core import cp, linked_kernel, run

n = 1000
fill = linked_kernel("fill")
b = cp.zeros(n, dtype=cp.float32)
stale = b.data.ptr
del b
c = cp.zeros(n, dtype=cp.float32)
note("reused", c.data.ptr == stale)
run(fill, stale, cp.int32(n - 1))
done(int(cp.asnumpy(c).sum()))
