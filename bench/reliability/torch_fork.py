"""PyTorch's `multiprocessing` with the 'fork' start method (issue 12): the parent imports
torch but leaves CUDA alone, 4 forked workers each run CUDA ops and check their results, and
the parent uses CUDA itself once they are done (allowed: nothing of CUDA was forked). The
workers leave by os._exit, as multiprocessing's always do. Prints one JSON line last; exit 0
when every worker and the parent got the right answers."""
import json
import multiprocessing as mp
import os
import sys

import torch

WORKERS = 4


def work(i, q):
    n = 1 << 16
    x = torch.arange(n, device="cuda", dtype=torch.int64)
    ok = int((x * 2 + i).sum().item()) == n * (n - 1) + i * n
    a = torch.randn(256, 256, device="cuda")
    b = a @ a.T
    ok = ok and bool(torch.allclose(b, b.T, atol=1e-3))
    ok = ok and torch.equal(torch.sort(torch.flip(x, [0]))[0], x)
    torch.cuda.synchronize()
    q.put((i, os.getpid(), ok))


def main():
    fork_safe = not torch.cuda.is_initialized()
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=work, args=(i, q)) for i in range(WORKERS)]
    for p in procs:
        p.start()
    results = []
    for _ in procs:
        try:
            results.append(q.get(timeout=45))
        except Exception:
            break
    for p in procs:
        p.join(timeout=5)
    parent_ok = torch.ones(1000, device="cuda").sum().item() == 1000
    workers_ok = len(results) == WORKERS and all(r[2] for r in results)
    codes = [p.exitcode for p in procs]
    print(json.dumps({"fork_safe_at_fork": fork_safe, "workers": WORKERS, "results": len(results),
                      "workers_ok": workers_ok, "exit_codes": codes, "parent_ok": parent_ok,
                      "parent_pid": os.getpid(), "worker_pids": sorted(r[1] for r in results)}))
    return 0 if fork_safe and workers_ok and parent_ok and codes == [0] * WORKERS else 1


if __name__ == "__main__":
    sys.exit(main())
