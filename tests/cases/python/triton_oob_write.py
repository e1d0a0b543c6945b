# gpusan-case: check
# expect: out_of_bounds_write
# compute-sanitizer: yes
# needs: torch triton
# env: PYTORCH_NO_CUDA_MEMORY_CACHING=1
# kernel: fill
# what: a Triton kernel whose store mask (`i <= n`) lets one element past a 1000-float tensor
#   through; PyTorch's caching allocator off, so the tensor is its own cudaMalloc.
from _case import done
from _triton import run_fill, torch

n = 1000
x = torch.zeros(n, device="cuda")
run_fill(x, n)
done(int(x.sum().item()))
