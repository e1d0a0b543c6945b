"""Real PyTorch work with the caching allocator on (issue 15): under `gpusan run --mode check`
with the pool hooks on, it must stay silent and give bit-identical results to the native run.

  torch_real_pools.py train|compile|threads

Each part is one process (the case script runs them side by side) and prints one JSON line
last: {"part", "digest", "seconds", ...}; `digest` is the SHA-256 of every loss (as a double)
and of the bytes of every final parameter or result tensor, so the native and gpusan runs
agree exactly or not at all. Everything is seeded and deterministic
(`torch.use_deterministic_algorithms`, no TF32, cuBLAS's deterministic workspace, Inductor's
deterministic mode).

train    a small MLP fed by a DataLoader with 2 forked workers (`multiprocessing_context`
         fork, forked after CUDA started, pinned batches) for 2 epochs, then a 2-layer
         Transformer encoder (dropout on: the GPU's random numbers too) for 6 steps, AdamW;
compile  a small MLP with LayerNorm under `torch.compile` (Inductor's Triton kernels,
         forward and backward), 4 SGD steps;
threads  4 host threads started together, each with its own CUDA stream and generator:
         matmuls, element-wise kernels and tensors of many sizes allocated and freed on its
         stream (the allocator's per-stream pools from several threads at once), its
         result handed to the main thread through the stream's order (`wait_stream`,
         `record_stream`).
"""

import hashlib
import json
import os
import struct
import sys
import threading
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
os.environ.setdefault("TORCHINDUCTOR_DETERMINISTIC", "1")
import torch  # noqa: E402 (the settings above must come first)


def deterministic():
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False


def tensor_bytes(t):
    t = t.detach().cpu().contiguous().view(-1).view(torch.uint8)
    try:
        return t.numpy().tobytes()
    except Exception:  # noqa: BLE001 (no numpy: slower, same bytes)
        return bytes(t.tolist())


def digest(losses, tensors):
    h = hashlib.sha256(struct.pack(f"{len(losses)}d", *losses))
    for t in tensors:
        h.update(tensor_bytes(t))
    return h.hexdigest()


class Synthetic(torch.utils.data.Dataset):
    """Sample `i` is made from a generator seeded with `i`: the same in any worker."""

    def __len__(self):
        return 512

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(64, generator=g)
        y = int(torch.randint(0, 10, (1,), generator=g))
        return x, y


def train():
    deterministic()
    mlp = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 10)).cuda()
    opt = torch.optim.AdamW(mlp.parameters(), lr=1e-3)
    # CUDA has started: the workers are forked from a process using it (and use none).
    loader = torch.utils.data.DataLoader(Synthetic(), batch_size=64, shuffle=False, num_workers=2,
                                         multiprocessing_context="fork", pin_memory=True)
    losses, batches = [], 0
    for _ in range(2):
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            loss = torch.nn.functional.cross_entropy(mlp(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(float(loss.item()))
            batches += 1
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.1,
                                             batch_first=True)
    tf = torch.nn.TransformerEncoder(layer, num_layers=2).cuda()
    topt = torch.optim.AdamW(tf.parameters(), lr=1e-3)
    g = torch.Generator(device="cpu").manual_seed(2)
    src = torch.randn(8, 32, 64, generator=g).cuda()
    for _ in range(6):
        loss = tf(src).square().mean()
        topt.zero_grad(set_to_none=True)
        loss.backward()
        topt.step()
        losses.append(float(loss.item()))
    torch.cuda.synchronize()
    params = list(mlp.parameters()) + list(tf.parameters())
    return {"digest": digest(losses, params), "batches": batches, "losses": len(losses), "last_loss": losses[-1]}


def compiled():
    deterministic()
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.LayerNorm(64), torch.nn.GELU(),
                                torch.nn.Linear(64, 8)).cuda()
    cmodel = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator(device="cpu").manual_seed(3)
    x = torch.randn(128, 32, generator=g).cuda()
    y = torch.randint(0, 8, (128,), generator=g).cuda()
    losses = []
    t0 = time.time()
    for i in range(4):
        loss = torch.nn.functional.cross_entropy(cmodel(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
        if i == 0:
            first_step_s = round(time.time() - t0, 2)
    torch.cuda.synchronize()
    return {"digest": digest(losses, list(model.parameters())), "losses": len(losses), "last_loss": losses[-1],
            "first_step_seconds": first_step_s}


def threads():
    deterministic()
    n, rounds = 4, 30
    results, errors = [None] * n, []
    start = threading.Barrier(n)
    main = torch.cuda.current_stream()

    def work(k):
        try:
            stream = torch.cuda.Stream()
            g = torch.Generator(device="cuda").manual_seed(100 + k)
            start.wait()
            with torch.cuda.stream(stream):
                a = torch.randn(192, 192, device="cuda", generator=g)
                for i in range(rounds):
                    b = torch.randn(192, 192, device="cuda", generator=g)
                    a = torch.tanh(a @ b / 14.0)
                    # Blocks of many sizes from this stream's pool, freed at once.
                    scratch = [torch.full((1000 * (j + 1) + 17 * k,), float(i), device="cuda") for j in range(6)]
                    a = a + sum(s[:192].sum() for s in scratch) * 1e-6
                    del scratch
            # The result crosses to the main thread's stream, freed there.
            main.wait_stream(stream)
            a.record_stream(main)
            results[k] = a
        except Exception as e:  # noqa: BLE001 (raised by the main thread: the run fails)
            errors.append(f"thread {k}: {type(e).__name__}: {e}")
            start.abort()  # the others stop waiting for this one

    ts = [threading.Thread(target=work, args=(k,)) for k in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise RuntimeError("; ".join(errors))
    total = torch.stack(results).sum(0)
    torch.cuda.synchronize()
    return {"digest": digest([], results + [total]), "threads": n, "rounds": rounds}


PARTS = {"train": train, "compile": compiled, "threads": threads}


def main():
    part = sys.argv[1] if len(sys.argv) > 1 else ""
    if part not in PARTS:
        print(f"usage: torch_real_pools.py {'|'.join(PARTS)}", file=sys.stderr)
        return 2
    t0 = time.time()
    facts = PARTS[part]()
    facts.update({"part": part, "seconds": round(time.time() - t0, 2), "torch": torch.__version__,
                  "backend": torch.cuda.get_allocator_backend()})
    print(json.dumps(facts), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
