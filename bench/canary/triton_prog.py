"""A clean Triton program for bench/reliability/canary_programs.sh (issue 17): a masked
kernel writing every element of PyTorch tensors of odd sizes (the last block partly masked,
the tensors' 512-byte blocks leaving slack after them: the pool blocks' canaries), a
reduction, PyTorch's caching allocator on. Prints integer results and OK."""
import torch
import triton
import triton.language as tl


@triton.jit
def affine(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * 3 + 1, mask=mask)


total = 0
for n in (1, 3, 1000, 1001, 4099, 65537):
    x = torch.arange(n, device="cuda", dtype=torch.int32)
    y = torch.empty_like(x)
    affine[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)
    total += int(y.sum().item())
torch.cuda.synchronize()
print(f"total={total}")
print("OK")
