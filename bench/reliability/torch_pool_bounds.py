"""Per-tensor bounds inside PyTorch's caching allocator (issue 15), with the allocator on.

`python3 torch_pool_bounds.py bugs|clean` runs every scenario of its kind in one process and
prints one JSON line last (what the program itself saw: sums, whether a neighbour was
overwritten, where the tensors lay). Each Triton kernel has a name of its own, so a report's
findings say which scenario they came from; the eager bugs run PyTorch's own kernels.

bugs:
- `gpusan_case_read_past`: a Triton kernel reads 1,000 floats past a 4,000,000-byte tensor,
  inside its 4 MiB segment (the block's rounding);
- `gpusan_case_write_neighbour`: a Triton kernel writes 2,048 floats from a 1,000-float
  tensor: its rounding slack, then the next tensor of the same segment;
- eager: a tensor viewing 2,000 floats at a 1,000-float tensor's address
  (`__cuda_array_interface__`, no bounds check) summed and filled by PyTorch's kernels;
- `gpusan_case_stale_read`: a Triton kernel reads a freed tensor's storage (its block back
  in the pool, not yet handed out again);
- `gpusan_case_stale_reused`: the same once the block was handed to a new tensor of the same
  size (recorded only: the address is then that live tensor's).
clean: the same kernels in bounds, the eager view of the tensor's own size, and a tensor
used on a side stream (record_stream) freed while that stream's kernels still read it.

`stale_block_reused` says whether the new tensor of the stale scenario got the freed
block's address, `stale_in_new_tensor` whether that address lies anywhere in it. With the
caching allocator it does (natively and under gpusan, whose hooks change no address): the
kernel's read is then of a live tensor, recorded only. With PyTorch's stream-ordered
allocator (`gpusan run --torch-allocator async`, torch_pool_async.sh) gpusan holds the freed
block in quarantine, so the new tensor lies elsewhere (`stale_in_new_tensor` false under
gpusan; natively the pool may hand the address out again) and the read stays a use after
free.

`--steps N` (clean) adds N timed training steps of a small MLP after 3 warm-up ones
(`ms_per_step`, the median of CUDA-event times, and `steps_digest`, the SHA-256 of the
losses): the cost of the allocator and of gpusan on a step.
"""

import hashlib
import json
import statistics
import struct
import sys

import torch
import triton
import triton.language as tl

N_BIG = 1_000_000  # 4,000,000 bytes: a 4 MiB segment, 194,304 bytes of rounding after it
N_SMALL = 1000  # 4,000 bytes: a 4,096-byte block of a 2 MiB small-pool segment
BLOCK = 1024


@triton.jit
def gpusan_case_read_past(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=m, other=0.0), mask=m)


@triton.jit
def gpusan_case_write_neighbour(dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.full([BLOCK], 7.0, tl.float32), mask=offs < n)


@triton.jit
def gpusan_case_stale_read(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=m, other=0.0), mask=m)


@triton.jit
def gpusan_case_stale_reused(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=m, other=0.0), mask=m)


class Raw:
    """A device address as Triton takes a tensor (a stale pointer, no storage held)."""

    def __init__(self, ptr, dtype=torch.float32):
        self.ptr, self.dtype = ptr, dtype
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.is_cuda = True

    def data_ptr(self):
        return self.ptr


class View:
    """`n` floats at `ptr` for torch.as_tensor, without PyTorch's storage bounds check."""

    def __init__(self, ptr, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "data": (ptr, False),
                                          "strides": None, "version": 3}


def grid(n):
    return (triton.cdiv(n, BLOCK),)


def neighbour(bug):
    a = torch.zeros(N_SMALL, device="cuda")
    b = torch.zeros(N_SMALL, device="cuda")
    n = 2 * BLOCK if bug else N_SMALL
    gpusan_case_write_neighbour[grid(n)](a, n, BLOCK=BLOCK)
    torch.cuda.synchronize()
    return {"b_after_a_bytes": b.data_ptr() - a.data_ptr(), "neighbour_sum": float(b.sum()), "a_sum": float(a.sum())}


def read_past(bug):
    x = torch.arange(N_BIG, device="cuda", dtype=torch.float32)
    n = N_BIG + 1000 if bug else N_BIG
    out = torch.zeros(N_BIG + 1000, device="cuda")
    gpusan_case_read_past[grid(n)](x, out, n, BLOCK=BLOCK)
    torch.cuda.synchronize()
    return {"read_past_sum": float(out[:N_BIG].sum())}


def eager(bug):
    x = torch.ones(N_SMALL, device="cuda")
    n = 2 * N_SMALL if bug else N_SMALL
    y = torch.as_tensor(View(x.data_ptr(), n), device="cuda")
    s = float(y.sum())
    y.fill_(2.0)
    torch.cuda.synchronize()
    return {"eager_sum": s, "eager_x_sum": float(x.sum())}


def stale():
    n = 3 * 1024 * 1024 // 4 + 123  # a size nothing else asks for: its block is its own
    # The outputs first: `v` is the one tensor made after the free, so whichever allocator
    # runs can hand it the freed memory (the stream-ordered one would give a small tensor
    # made after the free the freed address as readily).
    out = torch.zeros(BLOCK, device="cuda")
    out2 = torch.zeros(BLOCK, device="cuda")
    u = torch.ones(n, device="cuda")
    ptr = u.data_ptr()
    del u
    gpusan_case_stale_read[grid(BLOCK)](Raw(ptr), out, BLOCK, BLOCK=BLOCK)
    torch.cuda.synchronize()
    v = torch.full((n,), 3.0, device="cuda")
    gpusan_case_stale_reused[grid(BLOCK)](Raw(ptr), out2, BLOCK, BLOCK=BLOCK)
    torch.cuda.synchronize()
    return {"stale_block_reused": v.data_ptr() == ptr,
            "stale_in_new_tensor": v.data_ptr() <= ptr < v.data_ptr() + v.numel() * v.element_size(),
            "stale_sum": float(out.sum()), "stale_reused_sum": float(out2.sum())}


def side_stream():
    """A tensor read on a side stream, freed on the program's side while those kernels are
    queued (record_stream): the allocator keeps the block until they are done."""
    main = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    x = torch.ones(1 << 20, device="cuda")
    side.wait_stream(main)
    acc = None
    with torch.cuda.stream(side):
        torch.cuda._sleep(20_000_000)  # keeps the reads below queued past the free
        acc = torch.zeros(1 << 20, device="cuda")
        for _ in range(20):
            acc.add_(x)
    x.record_stream(side)
    del x
    others = [torch.randn(1 << 18, device="cuda") for _ in range(8)]  # launches after the free
    torch.cuda.synchronize()
    return {"side_sum": float(acc.sum()), "others": len(others)}


def steps(n):
    """`n` timed AdamW steps of a small MLP (tensors allocated and freed at every step)."""
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 10)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator(device="cpu").manual_seed(2)
    x = torch.randn(256, 512, generator=g).cuda()
    y = torch.randint(0, 10, (256,), generator=g).cuda()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    losses, times = [], []
    for i in range(3 + n):
        start.record()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        end.record()
        end.synchronize()
        losses.append(float(loss.item()))
        if i >= 3:
            times.append(start.elapsed_time(end))
    digest = hashlib.sha256(struct.pack(f"{len(losses)}d", *losses)).hexdigest()
    return {"ms_per_step": round(statistics.median(times), 4), "steps": n, "steps_digest": digest}


def main():
    kind = sys.argv[1]
    n_steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 0
    bug = kind == "bugs"
    torch.manual_seed(0)
    facts = {"kind": kind, "torch": torch.__version__, "triton": triton.__version__,
             "backend": torch.cuda.get_allocator_backend()}
    facts.update(neighbour(bug))
    facts.update(read_past(bug))
    facts.update(eager(bug))
    if bug:
        facts.update(stale())
    else:
        facts.update(side_stream())
        if n_steps > 0:
            facts.update(steps(n_steps))
    print(json.dumps(facts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
