# gpusan-case: check
# expect: out_of_bounds_write
# compute-sanitizer: yes
# needs: torch
# prepare: _torch_ext.py
# env: PYTORCH_NO_CUDA_MEMORY_CACHING=1
# kernel: fill_kernel
# what: a kernel built by torch.utils.cpp_extension.load_inline (nvcc, PTX embedded) writes
#   one float past a 1000-float tensor (`i <= n`); PyTorch's caching allocator off, so the
#   tensor is its own cudaMalloc.
from _case import done
from _torch_ext import load

ext = load()
import torch  # noqa: E402 (after load: it skips cleanly where torch is missing)

n = 1000
x = torch.zeros(n, device="cuda")
ext.fill(x.data_ptr(), n)
torch.cuda.synchronize()
done(int(x.sum().item()))
