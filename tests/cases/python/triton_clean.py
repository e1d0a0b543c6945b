# gpusan-case: check
# expect: clean
# compute-sanitizer: no
# needs: torch triton
# env: PYTORCH_NO_CUDA_MEMORY_CACHING=1
# kernel: fill
# what: clean twin of the Triton cases: the kernel fills a 1000-float tensor to its last
#   element, then a tensor is freed, one of the same size allocated, and the kernel fills the
#   new one through its pointer.
from _case import done
from _triton import Stale, run_fill, torch

n = 1000
x = torch.zeros(n, device="cuda")
run_fill(x, n - 1)
y = torch.zeros(n, device="cuda")
del y
z = torch.zeros(n, device="cuda")
run_fill(Stale(z.data_ptr()), n - 1)
done(int(x.sum().item() + z.sum().item()))
