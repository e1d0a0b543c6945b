# gpusan-case: check
# expect: clean
# compute-sanitizer: no
# needs: torch
# env: PYTORCH_NO_CUDA_MEMORY_CACHING=1
# kernel: poke twice
# what: clean twin of the jiterator cases: `poke` writes the last element of a 1000-float
#   tensor and an element of a tensor allocated after another was freed, through its own
#   pointer; `twice`, an ordinary jiterator functor, doubles a tensor.
from _case import done
from _jiterator import poke_at, torch, twice

n = 1000
x = torch.zeros(n, device="cuda")
poke_at(x.data_ptr(), n - 1)
y = torch.zeros(n, device="cuda")
del y
z = torch.zeros(n, device="cuda")
poke_at(z.data_ptr(), 5)
r = twice(x + z)
torch.cuda.synchronize()
done(int(r.sum().item()))
