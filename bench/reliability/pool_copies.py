#!/usr/bin/env python3
"""Host copies into pooled tensors and arrays (issue 15): `cudaMemcpy`/`cudaMemset` from the
host, through CuPy's runtime bindings, on a PyTorch tensor (caching allocator on) or a CuPy
array (MemoryPool), the way a custom extension or ctypes code copies by pointer.

    pool_copies.py torch|cupy bugs|clean

bugs: a copy of 1,020 floats into a 1,000-float tensor and a set of 1,024 floats over one
(both run into the pool's rounding to 512 bytes: past the tensor, still inside the pool's
memory, so natively they succeed and nothing else sees them; CuPy may give each array a
driver allocation of its own, rounded), and a copy into a freed tensor's storage (freed,
synchronized, not yet reused).
clean: the same copies with the right sizes, and into a live tensor. Prints one JSON line."""
import json
import sys

import numpy as np
import cupy as cp

lib, which = sys.argv[1], sys.argv[2]
rt = cp.cuda.runtime
N = 1000
bad = which == "bugs"

if lib == "torch":
    import torch

    def new(n):
        t = torch.zeros(n, device="cuda", dtype=torch.float32)
        return t, t.data_ptr()

    def total(t):
        return float(t.sum().item())

    def sync():
        torch.cuda.synchronize()
else:
    def new(n):
        a = cp.zeros(n, dtype=cp.float32)
        return a, a.data.ptr

    def total(a):
        return float(a.sum().get())

    def sync():
        cp.cuda.Device().synchronize()

a, pa = new(N)
b, pb = new(N)
c, pc = new(N)
host = np.ones(N + 20, dtype=np.float32)
rt.memcpy(pa, host.ctypes.data, (N + 20 if bad else N) * 4, rt.memcpyHostToDevice)
rt.memset(pb, 0, (1024 if bad else N) * 4)
if bad:
    del c  # the storage goes back to the pool, which keeps it cached
    sync()
    rt.memcpy(pc, host.ctypes.data, 16, rt.memcpyHostToDevice)
else:
    rt.memcpy(pc, host.ctypes.data, 16, rt.memcpyHostToDevice)
rt.deviceSynchronize()
print(json.dumps({"lib": lib, "which": which, "a_sum": total(a), "b_sum": total(b),
                  "adjacent": pb - pa}))
