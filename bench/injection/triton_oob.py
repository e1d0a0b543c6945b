"""A Triton kernel that reads past the end of its input when MASK=0 (no mask on the
tail block), and stays in bounds when MASK=1. Run under `gpusan run --mode check` with
PYTORCH_NO_CUDA_MEMORY_CACHING=1, so each tensor is its own allocation."""
import os
import torch
import triton
import triton.language as tl


@triton.jit
def copy(x, y, n, BLOCK: tl.constexpr, MASK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if MASK:
        tl.store(y + i, tl.load(x + i, mask=i < n), mask=i < n)
    else:
        tl.store(y + i, tl.load(x + i))


n = 1000
x = torch.ones(n, device="cuda")
y = torch.empty(1024, device="cuda")
copy[(1,)](x, y, n, BLOCK=1024, MASK=int(os.environ.get("MASK", "1")))
torch.cuda.synchronize()
print("OK")
