# gpusan-case: check
# expect: out_of_bounds_write
# compute-sanitizer: yes
# needs: torch
# env: PYTORCH_NO_CUDA_MEMORY_CACHING=1
# kernel: poke
# what: a PyTorch jiterator kernel (NVRTC at its first call, kept in PyTorch's kernel cache)
#   writes one float past a 1000-float tensor, through a pointer it is given as a value.
from _case import done
from _jiterator import poke_at, torch

n = 1000
x = torch.zeros(n, device="cuda")
poke_at(x.data_ptr(), n)
done(int(x.sum().item()))
