# gpusan-case: check
# expect: clean
# compute-sanitizer: no
# needs: torch
# prepare: _torch_ext_sass.py
# env: PYTORCH_NO_CUDA_MEMORY_CACHING=1
# kernel: fill_sass_kernel
# what: clean twin of torch_inline_sass_oob_write: the machine-code-only kernel fills a
#   1000-float tensor to its last element, then a tensor is freed, one of the same size
#   allocated, and the kernel fills the new one.
from _case import done
from _torch_ext_sass import load

ext = load()
import torch  # noqa: E402

n = 1000
x = torch.zeros(n, device="cuda")
ext.fill(x.data_ptr(), n - 1)
y = torch.zeros(n, device="cuda")
del y
z = torch.zeros(n, device="cuda")
ext.fill(z.data_ptr(), n - 1)
torch.cuda.synchronize()
done(int(x.sum().item() + z.sum().item()))
