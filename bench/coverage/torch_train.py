"""A 4-layer Transformer encoder's training, 20 steps (PyTorch's and cuBLAS's kernels: machine
code only). `--compile`: the model is torch.compile'd (Inductor: Triton kernels, built through
gpusan's ptxas stand-in, and PyTorch's). `--profile` (native runs): every CUDA kernel launched
from the program's start to its end is counted with torch.profiler, by name: the independent
count bench/coverage.sh compares the report's coverage with."""
import contextlib
import json
import sys

import torch

profile = "--profile" in sys.argv
if profile:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as prof

    ctx = prof(activities=[ProfilerActivity.CUDA])
else:
    ctx = contextlib.nullcontext()
with ctx as p:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=512, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=4).cuda()
    if "--compile" in sys.argv:
        # Autotuning benchmarks each candidate kernel for a time, not a count: two runs
        # would launch differently, and the native run's count could not be compared.
        import torch._inductor.config as inductor_config

        inductor_config.triton.autotune_pointwise = False
        model = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 128, 256, device="cuda")
    for _ in range(20):
        opt.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
if profile:
    by_name = {}
    for e in p.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and not e.name.startswith(("Memcpy", "Memset")):
            by_name[e.name] = by_name.get(e.name, 0) + 1
    print(json.dumps({"profiled_launches": sum(by_name.values()), "profiled_kernels": len(by_name),
                      "by_name": by_name}))
print(f"loss {float(loss):.4f}")
