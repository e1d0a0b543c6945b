"""PyTorch training steps for bench/binary-overhead.sh (issue 14): every kernel is PyTorch's or
cuBLAS's machine code, so under `gpusan run --route binary` each is checked by the binary
route. Deterministic (seeded, deterministic algorithms, no TF32), so the final parameters of a
run are bit-identical to the native run's whatever tool it runs under.

  torch_steps.py mlp|transformer [--steps N] [--warmup W]

  mlp          Linear 512→1024, GELU, Linear 1024→1024, GELU, Linear 1024→10, AdamW,
               cross-entropy, batch 256 (torch_async_alloc's model)
  transformer  a 4-layer TransformerEncoder (d_model 256, 4 heads, feed-forward 512, batch
               16 × 128, SGD): bench/coverage/torch_train.py's model

Each step is timed with CUDA events after W warm-up steps. Prints one JSON line last
({"bench", "ok", "params", "metrics", "digest"}): metrics `<model>.ms_per_step` (median) and
`<model>.ms_per_step_min`; digest, the SHA-256 of the losses and of every parameter's bytes
after the last step; with --all-times, `times`: every timed step's ms (bench/hook_cost.py)."""
import argparse
import hashlib
import json
import os
import statistics
import struct

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch  # noqa: E402 (the cuBLAS setting must come first)


def mlp():
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 1024), torch.nn.GELU(),
        torch.nn.Linear(1024, 10)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(256, 512, generator=g).cuda()
    y = torch.randint(0, 10, (256,), generator=g).cuda()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return model, step


def transformer():
    layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=512, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=4).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 128, 256, device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        return loss

    return model, step


def param_bytes(p):
    t = p.detach().cpu().contiguous().view(-1).view(torch.uint8)
    try:
        return t.numpy().tobytes()
    except Exception:  # noqa: BLE001 (no numpy: slower, same bytes)
        return bytes(t.tolist())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=["mlp", "transformer"])
    ap.add_argument("--steps", type=int, default=int(os.environ.get("GPUSAN_TORCH_STEPS", "10")))
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--all-times", action="store_true", help="every timed step's ms in the JSON (`times`)")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model, step = mlp() if args.model == "mlp" else transformer()
    losses, times = [], []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for i in range(args.warmup + args.steps):
        start.record()
        loss = step()
        end.record()
        end.synchronize()
        losses.append(float(loss.item()))
        if i >= args.warmup:
            times.append(start.elapsed_time(end))
    torch.cuda.synchronize()
    h = hashlib.sha256(struct.pack(f"{len(losses)}d", *losses))
    for p in model.parameters():
        h.update(param_bytes(p))
    name = args.model
    print(json.dumps({
        "bench": f"torch_{name}", "ok": all(l == l for l in losses),
        "params": {"steps": args.steps, "warmup": args.warmup},
        "metrics": {f"{name}.ms_per_step": round(statistics.median(times), 4),
                    f"{name}.ms_per_step_min": round(min(times), 4)},
        "digest": h.hexdigest(), "last_loss": losses[-1],
        **({"times": [round(t, 4) for t in times]} if args.all_times else {})}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
