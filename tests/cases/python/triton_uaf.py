# gpusan-case: check
# expect: use_after_free
# compute-sanitizer: no
# needs: torch triton
# env: PYTORCH_NO_CUDA_MEMORY_CACHING=1
# kernel: fill
# what: a Triton kernel given the pointer of a 1000-float tensor freed before (caching
#   allocator off: cudaFree), after a tensor of the same size was allocated (`note: reused=`:
#   whether natively the driver handed the same address out again).
from _case import done, note
from _triton import Stale, run_fill, torch

n = 1000
y = torch.zeros(n, device="cuda")
stale = y.data_ptr()
del y
z = torch.zeros(n, device="cuda")
note("reused", z.data_ptr() == stale)
run_fill(Stale(stale), n - 1)
done(int(z.sum().item()))
