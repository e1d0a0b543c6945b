# gpusan-case: check
# expect: out_of_bounds_write
# compute-sanitizer: yes
# needs: cuda.core cupy
# kernel: fill
# what: cuda-python's cuda.core: a Program compiled by NVRTC straight to a cubin, its kernel
#   launched with cuda.core's launch, writes one float past a 1000-float array (`i <= n`).
from _case import done
from _cuda_core import cp, cubin_kernel, run

n = 1000
a = cp.zeros(n, dtype=cp.float32)
run(cubin_kernel("fill"), a.data.ptr, cp.int32(n))
done(int(cp.asnumpy(a).sum()))
