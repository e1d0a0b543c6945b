"""A PyTorch DDP training step on every GPU of the host (run by torchrun, one process per
GPU; issue 21): after warm-up, STEPS steps timed with CUDA events, then a hash of the
parameters. DDP's all-reduce makes every rank's parameters equal, and the run is made
deterministic (seeds, deterministic algorithms, NCCL's ring and simple protocol set by the
caller), so the hash must be the same natively, under gpusan and on every rank.

Each rank writes OUT-rank<R>.json: {"rank", "world", "model", "steps", "median_ms",
"step_ms", "params_sha256"}; with --params FILE, rank 0 also saves its parameters, flattened
(float32), so that a hash that differs can be told apart from a corruption: instrumented
kernels are compiled again (ptxas may fuse a multiply and an add differently), which changes
low bits only.
"""
import argparse
import hashlib
import json
import os
import statistics

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def model_of(name):
    if name == "mlp":
        return nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)), (64, 1024)
    layer = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 4, enable_nested_tensor=False), (16, 128, 256)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", choices=["mlp", "transformer"], default="mlp")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--out", required=True, help="prefix of the per-rank JSON files")
    ap.add_argument("--params", default="", help="rank 0 saves its flattened parameters here (torch.save)")
    a = ap.parse_args()
    rank, local, world = (int(os.environ[k]) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    dev = torch.device("cuda", local)
    model, shape = model_of(a.model)
    model = model.to(dev)
    ddp = DDP(model, device_ids=[local])
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3, momentum=0.9)
    # Each rank its own batch: the gradients differ until the all-reduce averages them.
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1000 + rank)).to(dev)
    times = []
    for i in range(a.warmup + a.steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        opt.zero_grad(set_to_none=True)
        loss = ddp(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        end.record()
        end.synchronize()
        if i >= a.warmup:
            times.append(start.elapsed_time(end))
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().float().cpu().numpy().tobytes())
    doc = {"rank": rank, "world": world, "model": a.model, "steps": a.steps,
           "median_ms": statistics.median(times), "step_ms": times, "params_sha256": h.hexdigest()}
    with open(f"{a.out}-rank{rank}.json", "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    if a.params and rank == 0:
        flat = torch.cat([p.detach().float().flatten() for p in model.parameters()]).cpu()
        torch.save(flat, a.params)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
