# cases: oob uaf clean
# expect-oob: out_of_bounds_write
# expect-uaf: use_after_free
# env: PYTORCH_NO_CUDA_MEMORY_CACHING=1
# what: a Triton kernel (assembled by gpusan's ptxas stand-in, loaded as a cubin, kept in
#   Triton's cache). oob: the store mask lets one element past a 1000-float tensor through;
#   uaf: the kernel gets the pointer of a tensor freed before (PyTorch's cache off: freed with
#   cudaFree) after a tensor of the same size was allocated; clean: in bounds.
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def fill(p, last, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(p + i, 1.0, mask=i <= last)


class Stale:
    """A pointer Triton takes as a tensor (it reads data_ptr() and dtype)."""

    def __init__(self, ptr):
        self.ptr, self.dtype = ptr, torch.float32

    def data_ptr(self):
        return self.ptr


scenario = sys.argv[1]
n = 1000
x = torch.zeros(n, device="cuda")
fill[(4,)](x, n if scenario == "oob" else n - 1, BLOCK=256)
if scenario == "uaf":
    y = torch.zeros(n, device="cuda")
    stale = y.data_ptr()
    del y
    z = torch.zeros(n, device="cuda")
    fill[(4,)](Stale(stale), n - 1, BLOCK=256)
    del z
torch.cuda.synchronize()
print(f"triton {scenario} done {float(x.sum()):.0f}")
