"""Programs whose kernels are machine code only, for bench/binary-coverage.sh (issue 14): each
runs deterministically and prints, last, one JSON line {"program", "digest", ...}: the SHA-256
of its results' bytes, so a run under gpusan can be held bit-identical to a native run.

  coverage_programs.py compile|gemms|jax

  compile  the 4-layer Transformer of bench/coverage/torch_train.py, torch.compile'd (Inductor:
           Triton's kernels, and PyTorch's and cuBLAS's machine code), 10 training steps
  gemms    cuBLAS and cuBLASLt GEMMs through PyTorch: fp32, fp16, bf16, batched, with bias
           (addmm → cuBLASLt epilogues), odd shapes and a transposed operand
  jax      bench/coverage/jax_program.py's jitted MLP step (XLA's cubins), 20 times, with
           XLA's autotuning off (`--xla_gpu_autotune_level=0`): the autotuner times candidate
           GEMMs and keeps the fastest, so under a slower tool it may keep another algorithm and
           the results differ for a reason that is not the tool's; `jax --autotune` leaves it on
           (its many candidate modules are a coverage test of their own)
"""
import hashlib
import json
import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def torch_digest(tensors):
    import torch

    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def compile_model():
    import torch
    import torch._inductor.config as inductor_config

    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    # Autotuning times candidates: under a slower tool it could pick other kernels, and the
    # results would differ for a reason that is not the tool's.
    inductor_config.triton.autotune_pointwise = False
    layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=512, batch_first=True,
                                             dropout=0.0)
    model = torch.compile(torch.nn.TransformerEncoder(layer, num_layers=4).cuda())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 128, 256, device="cuda")
    losses = []
    for _ in range(10):
        opt.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    torch.cuda.synchronize()
    return torch_digest(losses + list(model.parameters())), {"last_loss": float(losses[-1])}


def gemms():
    import torch

    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    g = torch.Generator(device="cuda").manual_seed(3)
    out = []
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for m, n, k in ((1024, 1024, 1024), (333, 517, 129), (4096, 64, 512)):
            a = torch.randn(m, k, device="cuda", dtype=dtype, generator=g)
            b = torch.randn(k, n, device="cuda", dtype=dtype, generator=g)
            bias = torch.randn(n, device="cuda", dtype=dtype, generator=g)
            out.append(a @ b)
            out.append(torch.addmm(bias, a, b))  # cuBLASLt with a bias epilogue
            out.append(a @ b.t().contiguous().t())  # a transposed operand
        x = torch.randn(8, 128, 64, device="cuda", dtype=dtype, generator=g)
        y = torch.randn(8, 64, 96, device="cuda", dtype=dtype, generator=g)
        out.append(torch.bmm(x, y))
        out.append(torch.nn.functional.linear(x, torch.randn(32, 64, device="cuda", dtype=dtype, generator=g)))
    torch.cuda.synchronize()
    return torch_digest(out), {"gemms": len(out)}


def jax_program():
    if "--autotune" not in sys.argv:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_gpu_autotune_level=0").strip()
    import jax
    import jax.numpy as jnp
    import numpy as np

    @jax.jit
    def step(w, x):
        def loss(w):
            h = jnp.tanh(x @ w[0])
            return jnp.mean((h @ w[1]) ** 2)

        grads = jax.grad(loss)(w)
        return [wi - 0.01 * gi for wi, gi in zip(w, grads)]

    k = jax.random.PRNGKey(0)
    w = [jax.random.normal(k, (256, 256)), jax.random.normal(k, (256, 16))]
    x = jax.random.normal(k, (64, 256))
    for _ in range(20):
        w = step(w, x)
    jax.block_until_ready(w)
    h = hashlib.sha256()
    for wi in w:
        h.update(np.asarray(wi).tobytes())
    return h.hexdigest(), {"sum": float(w[1].sum())}


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else ""
    fn = {"compile": compile_model, "gemms": gemms, "jax": jax_program}.get(which)
    if fn is None:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    digest, facts = fn()
    print(json.dumps({"program": which, "digest": digest, **facts}), flush=True)


if __name__ == "__main__":
    main()
