# gpusan-case: check
# expect: out_of_bounds_write
# compute-sanitizer: yes
# needs: torch
# prepare: _torch_ext_sass.py
# env: PYTORCH_NO_CUDA_MEMORY_CACHING=1
# kernel: fill_sass_kernel
# what: a custom op built by load_inline as sm_90 machine code only (no PTX: the binary
#   route's case, issue 14) writes one float past a 1000-float tensor (`i <= n`); PyTorch's
#   caching allocator off, so the tensor is its own cudaMalloc.
from _case import done
from _torch_ext_sass import load

ext = load()
import torch  # noqa: E402 (after load: it skips cleanly where torch is missing)

n = 1000
x = torch.zeros(n, device="cuda")
ext.fill(x.data_ptr(), n)
torch.cuda.synchronize()
done(int(x.sum().item()))
