"""What the Triton cases share (not a case): `fill` stores 1.0 where the mask `i <= last`
lets it (Triton compiles it to PTX, assembles it with ptxas, where gpusan's stand-in
instruments it, and loads the cubin; kept in TRITON_CACHE_DIR), and `Stale`, a pointer that
Triton takes as a tensor (it reads data_ptr() and dtype)."""
from _case import need, skip

torch = need("torch")
triton = need("triton")
tl = need("triton.language")
if not torch.cuda.is_available():
    skip("torch.cuda.is_available() is False")


@triton.jit
def fill(p, last, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(p + i, 1.0, mask=i <= last)


class Stale:
    def __init__(self, ptr):
        self.ptr, self.dtype = ptr, torch.float32

    def data_ptr(self):
        return self.ptr


def run_fill(t, last):
    fill[(4,)](t, last, BLOCK=256)
    torch.cuda.synchronize()
