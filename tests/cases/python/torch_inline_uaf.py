# gpusan-case: check
# expect: use_after_free
# compute-sanitizer: no
# needs: torch
# prepare: _torch_ext.py
# env: PYTORCH_NO_CUDA_MEMORY_CACHING=1
# kernel: fill_kernel
# what: the load_inline kernel writes through the pointer of a 1000-float tensor freed before
#   (caching allocator off: cudaFree), after a tensor of the same size was allocated
#   (`note: reused=`: whether natively the driver handed the same address out again).
from _case import done, note
from _torch_ext import load

ext = load()
import torch  # noqa: E402

n = 1000
y = torch.zeros(n, device="cuda")
stale = y.data_ptr()
del y
z = torch.zeros(n, device="cuda")
note("reused", z.data_ptr() == stale)
ext.fill(stale, n - 1)
torch.cuda.synchronize()
done(int(z.sum().item()))
