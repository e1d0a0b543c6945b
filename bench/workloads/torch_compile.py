#!/usr/bin/env python3
"""A torch.compile'd model for the check-overhead workload set (bench/workloads/README.md):
a transformer-style MLP block (LayerNorm -> Linear -> GELU -> Linear -> residual -> softmax)
on 8192 tokens of width 512, compiled by TorchInductor, whose LayerNorm, GELU, residual and
softmax become Triton kernels (the two matmuls stay cuBLAS calls, which have no PTX for
gpusan to instrument). Also a matmul-free compiled function (LayerNorm -> GELU -> softmax
over 16384 x 2048) whose time is Triton kernels only.

Each is timed with CUDA events, median of 25 runs after 3 warm-ups, and compared with the
same computation run eagerly (ok=false if they differ). Prints one JSON line last, the
format of bench/runtime/bench.h; the headline (first) metric is the model's forward time.
Needs a GPU, PyTorch with Triton, and no network. Run under gpusan, Triton's compiler is
pointed at gpusan's ptxas stand-in by `gpusan run` itself (TRITON_PTXAS_PATH); give each
tool its own TRITON_CACHE_DIR / TORCHINDUCTOR_CACHE_DIR so that cached kernels compiled
for one are not reused by another (bench/check_overhead.py does).
"""

import json
import os
import statistics
import sys

# Compile in this process: no pool of compile workers (which compute-sanitizer would also
# follow), and deterministic timing of the first run.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

import torch  # noqa: E402  (after the environment it reads)

WARMUPS, RUNS = 3, 25
TOKENS, WIDTH, HIDDEN = 8192, 512, 2048


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(WIDTH)
        self.up = torch.nn.Linear(WIDTH, HIDDEN)
        self.down = torch.nn.Linear(HIDDEN, WIDTH)

    def forward(self, x):
        h = self.down(torch.nn.functional.gelu(self.up(self.norm(x))))
        return torch.softmax(x + h, dim=-1)


def norm_gelu_softmax(x, weight, bias):
    h = torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias)
    return torch.softmax(torch.nn.functional.gelu(h) * 1.5, dim=-1)


def time_ms(fn, *args):
    """Median and minimum milliseconds of fn(*args), CUDA events around each run."""
    for _ in range(WARMUPS):
        fn(*args)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(RUNS):
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), min(times)


def main():
    torch.manual_seed(0)
    dev = "cuda"
    model = Block().to(dev).eval()
    x = torch.randn(TOKENS, WIDTH, device=dev)
    y = torch.randn(16384, 2048, device=dev)
    w, b = torch.rand(2048, device=dev) + 0.5, torch.randn(2048, device=dev)
    compiled = torch.compile(model)
    compiled_fn = torch.compile(norm_gelu_softmax)
    ok = True
    metrics = {}
    with torch.no_grad():
        ok &= torch.allclose(compiled(x), model(x), rtol=1e-3, atol=1e-5)
        ok &= torch.allclose(compiled_fn(y, w, b), norm_gelu_softmax(y, w, b), rtol=1e-3, atol=1e-6)
        med, lo = time_ms(compiled, x)
        metrics["torch_compile.ms"] = med
        metrics["torch_compile.ms_min"] = lo
        med, lo = time_ms(compiled_fn, y, w, b)
        metrics["torch_compile.triton_only.ms"] = med
        metrics["torch_compile.triton_only.ms_min"] = lo
    torch.cuda.synchronize()
    print(json.dumps({"bench": "torch_compile", "ok": bool(ok),
                      "params": {"tokens": TOKENS, "width": WIDTH, "hidden": HIDDEN, "runs": RUNS,
                                 "torch": torch.__version__},
                      "metrics": {k: round(v, 6) for k, v in metrics.items()}}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
