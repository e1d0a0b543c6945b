"""PyTorch training with the stream-ordered allocator (PYTORCH_CUDA_ALLOC_CONF=
backend:cudaMallocAsync, set by the case script): every tensor is a cudaMallocAsync block and
every free a cudaFreeAsync, thousands a step, on the compute stream and a side stream. Under
gpusan the freed blocks are held in quarantine and given back after an event on the stream
that freed them: if gpusan ever gave one back too early, the pool would hand memory a kernel
still uses to a new tensor and the losses would differ from the native run's. Prints one JSON
line last: the backend, the losses, the time per step."""
import json
import time

import torch

STEPS = 40


def main():
    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = "cuda"
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 1024), torch.nn.GELU(),
        torch.nn.Linear(1024, 10)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator(device="cpu").manual_seed(1)
    xs = [torch.randn(256, 512, generator=g) for _ in range(8)]
    ys = [torch.randint(0, 10, (256,), generator=g) for _ in range(8)]
    side = torch.cuda.Stream()
    losses, t0 = [], None
    for step in range(STEPS):
        if step == 5:
            torch.cuda.synchronize()
            t0 = time.time()
        x, y = xs[step % 8].to(dev, non_blocking=True), ys[step % 8].to(dev, non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        # Work on a side stream whose tensors are freed there, and one handed across.
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            scratch = [torch.randn(4096, device=dev) * i for i in range(16)]
            total = sum(s.sum() for s in scratch)
            del scratch
        torch.cuda.current_stream().wait_stream(side)
        total.record_stream(torch.cuda.current_stream())
        losses.append(float(loss.item()) + 0.0 * float(total.item()))
    torch.cuda.synchronize()
    per_step = (time.time() - t0) / (STEPS - 5)
    print(json.dumps({
        "backend": torch.cuda.get_allocator_backend(),
        "losses": losses,
        "ms_per_step": round(per_step * 1000, 3),
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
