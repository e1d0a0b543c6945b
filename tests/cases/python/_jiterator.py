"""What the jiterator cases share (not a case). PyTorch's jiterator compiles a functor with
NVRTC at its first call and keeps the kernel in PYTORCH_KERNEL_CACHE_PATH. Its functors see
values, not arrays, so the cases hand it a pointer as an int64 value: `poke` writes 7.0f at
`(float*)p + off`, one element per (p, off) pair, as a hand-written kernel with a bad index
would. The tensors are plain cudaMalloc memory (PYTORCH_NO_CUDA_MEMORY_CACHING=1)."""
from _case import need, skip

torch = need("torch")
if not torch.cuda.is_available():
    skip("torch.cuda.is_available() is False")
try:
    create = torch.cuda.jiterator._create_jit_fn
except AttributeError as e:
    skip(f"no jiterator in this PyTorch: {e}")

poke = create(
    "template <typename T> T poke(T p, T off) { reinterpret_cast<float*>(p)[off] = 7.0f; return off; }"
)
twice = create("template <typename T> T twice(T x) { return x * 2; }")


def poke_at(ptr, off):
    """One thread writes 7.0f at float index `off` of the memory at `ptr`."""
    p = torch.tensor([ptr], dtype=torch.int64, device="cuda")
    o = torch.tensor([off], dtype=torch.int64, device="cuda")
    poke(p, o)
    torch.cuda.synchronize()
