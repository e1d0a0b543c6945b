# cases: oob uaf clean
# expect-oob: out_of_bounds_write
# expect-uaf: use_after_free
# env: PYTHONPATH=/tmp/site
# what: numba-cuda @cuda.jit kernels (NVVM to LTO-IR, linked by nvJitLink; cache=True keeps
#   them in numba's cache). oob: a kernel writes one element past a 1000-float device array
#   (`i <= n`); uaf: a kernel writes through a view of an array freed before (its memory
#   released with the context's deferred deallocations), after an array of the same size was
#   allocated; clean: in bounds.
import sys

import numpy as np
from numba import cuda


@cuda.jit(cache=True)
def fill(a, last):
    i = cuda.grid(1)
    if i <= last:
        a[i] = 1.0


scenario = sys.argv[1]
n = 1000
a = cuda.device_array(n, dtype=np.float32)
fill[4, 256](a, n if scenario == "oob" else n - 1)
if scenario == "uaf":
    b = cuda.device_array(n, dtype=np.float32)
    stale = b.__cuda_array_interface__["data"][0]
    del b
    cuda.current_context().deallocations.clear()
    c = cuda.device_array(n, dtype=np.float32)
    view = cuda.from_cuda_array_interface(
        {"shape": (n,), "typestr": "<f4", "data": (stale, False), "version": 2}, owner=None, sync=False
    )
    fill[4, 256](view, n - 1)
    del c
cuda.synchronize()
print(f"numba {scenario} done {float(a.copy_to_host()[: n].sum()):.0f}")
