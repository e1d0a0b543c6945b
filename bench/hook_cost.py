"""The cost of gpusan's hooks on a PyTorch training step in api mode (issue 15: at most 5%),
as a paired benchmark: bench/binary/torch_steps.py (a Transformer training step, every step
timed with CUDA events) run in rounds, each round the three configurations one after the
other, never two processes at once, in an order that turns with the round:

  native      python3 torch_steps.py transformer ...
  api         gpusan run --mode api -- python3 torch_steps.py ...   (pool hooks on)
  hooks_off   gpusan run --mode api --python-hooks off -- ...

Each process runs W warm-up steps and S timed ones (S >= 50) and gives its median. A round's
ratio is its gpusan median over its native median (the two measured minutes apart at most,
under the same machine state); the verdict is on the median of the rounds' ratios, with a
bootstrap 95% interval of that median and the rounds' min and max. The target is computed,
not assumed: `target.met` says whether the median ratio is <= 1.05, `target.met_surely`
whether the interval's top is.

Before the rounds, one unmeasured run of each (gpusan's first run builds the PyTorch
allocator shim into its cache folder, and each loads its files into the page cache). Rounds
start only while the deadline leaves room for one more, as long as the slowest round so far.

  hook_cost.py --gpusan PATH [--rounds 8] [--steps 60] [--warmup 5] [--deadline-s 200]
               [--model transformer] [--out FILE] [--dry]

Writes one JSON document (to --out and stdout). --dry plans the commands and writes the
document with `skipped` set, running nothing (no GPU needed).
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS_PY = os.path.join(HERE, "binary", "torch_steps.py")
TARGET = 1.05
CONFIGS = ["native", "api", "hooks_off"]


def command(config, gpusan, model, steps, warmup):
    prog = [sys.executable, STEPS_PY, model, "--steps", str(steps), "--warmup", str(warmup), "--all-times"]
    if config == "native":
        return prog
    extra = ["--python-hooks", "off"] if config == "hooks_off" else []
    return [gpusan, "run", "--mode", "api", *extra, "--", *prog]


def one(cmd, model, timeout):
    """Runs one process to its end; its median ms per step, every step's ms, its digest."""
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "why": f"timed out after {timeout} s", "seconds": round(time.time() - t0, 2)}
    r = {"ok": False, "rc": p.returncode, "seconds": round(time.time() - t0, 2)}
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    try:
        doc = json.loads(lines[-1])
        r.update(ok=p.returncode == 0 and bool(doc.get("ok")), median_ms=doc["metrics"][f"{model}.ms_per_step"],
                 times=doc.get("times", []), digest=doc.get("digest"))
    except Exception as e:  # noqa: BLE001 (said in the document)
        r["why"] = f"no result ({type(e).__name__}: {e}): {p.stderr[-400:]}"
    r["gpusan_lines"] = [l for l in p.stderr.splitlines() if l.startswith("gpusan:")][:5]
    return r


def bootstrap_median(xs, n=4000, seed=15):
    """95% interval of the median of `xs`, by resampling the rounds."""
    if len(xs) < 2:
        return None
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(n))
    return [round(meds[int(0.025 * n)], 4), round(meds[int(0.975 * n) - 1], 4)]


def summarize(rounds, steps):
    out = {"per_config": {}, "ratios": {}}
    for c in CONFIGS:
        meds = [r[c]["median_ms"] for r in rounds if r.get(c, {}).get("ok")]
        pooled = [t for r in rounds if r.get(c, {}).get("ok") for t in r[c]["times"]]
        out["per_config"][c] = {
            "round_medians_ms": meds,
            "median_of_rounds_ms": round(statistics.median(meds), 4) if meds else None,
            "pooled_median_ms": round(statistics.median(pooled), 4) if pooled else None,
            "pooled_steps": len(pooled),
        }
    # The hooks' own cost is api over hooks_off (the same api mode without them); api mode's
    # whole cost over native is given beside it, both judged against the same 5%.
    for c, base in [("api", "native"), ("hooks_off", "native"), ("api", "hooks_off")]:
        ratios = [round(r[c]["median_ms"] / r[base]["median_ms"], 4) for r in rounds
                  if r.get(c, {}).get("ok") and r.get(base, {}).get("ok")]
        med = round(statistics.median(ratios), 4) if ratios else None
        ci = bootstrap_median(ratios)
        out["ratios"][f"{c}/{base}"] = {
            "per_round": ratios, "median": med, "bootstrap95": ci,
            "min": min(ratios) if ratios else None, "max": max(ratios) if ratios else None,
        }

    def verdict(r, what):
        return {
            "what": what,
            "ratio_at_most": TARGET,
            "steps_per_process": steps,
            "rounds": len(r["per_round"]),
            "median_ratio": r["median"],
            "met": r["median"] is not None and r["median"] <= TARGET,
            "met_surely": r["bootstrap95"] is not None and r["bootstrap95"][1] <= TARGET,
            "cost_percent": None if r["median"] is None else round((r["median"] - 1) * 100, 2),
        }

    out["target"] = verdict(out["ratios"]["api/native"], "api mode with the pool hooks over native")
    out["hooks_target"] = verdict(out["ratios"]["api/hooks_off"],
                                  "the pool hooks alone: api mode over api mode with --python-hooks off")
    digests = {r[c].get("digest") for r in rounds for c in CONFIGS if r.get(c, {}).get("ok")}
    out["same_results"] = len(digests) == 1
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpusan", required=True)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--deadline-s", type=float, default=200.0, help="stop starting rounds after this (from start)")
    ap.add_argument("--model", default="transformer", choices=["transformer", "mlp"])
    ap.add_argument("--out")
    ap.add_argument("--dry", action="store_true")
    args = ap.parse_args()
    if args.steps < 50:
        ap.error("--steps must be at least 50 (the target is on the median of >= 50 steps)")
    t0 = time.time()
    deadline = t0 + args.deadline_s
    doc = {"bench": "hook_cost", "model": args.model, "steps": args.steps, "warmup": args.warmup,
           "rounds_asked": args.rounds, "deadline_s": args.deadline_s,
           "commands": {c: command(c, args.gpusan, args.model, args.steps, args.warmup) for c in CONFIGS},
           "order": "one process at a time; round r runs the configurations rotated by r"}
    if args.dry:
        doc["skipped"] = "dry run: nothing was run"
    else:
        timeout = max(30.0, min(120.0, args.deadline_s / 2))
        doc["warmup_runs"] = {c: one(command(c, args.gpusan, args.model, args.steps, args.warmup), args.model, timeout)
                              for c in CONFIGS}
        for r in doc["warmup_runs"].values():
            r.pop("times", None)
        rounds, slowest = [], 0.0
        for i in range(args.rounds):
            if time.time() + slowest > deadline:
                doc["stopped"] = f"deadline: {len(rounds)} of {args.rounds} rounds"
                break
            start = time.time()
            order = CONFIGS[i % 3:] + CONFIGS[:i % 3]
            rnd = {"order": order}
            for c in order:
                rnd[c] = one(command(c, args.gpusan, args.model, args.steps, args.warmup), args.model, timeout)
            rounds.append(rnd)
            slowest = max(slowest, time.time() - start)
            print(f"hook-cost round {i + 1}: " + ", ".join(
                f"{c} {rnd[c].get('median_ms')}" for c in CONFIGS), file=sys.stderr, flush=True)
        doc.update(summarize(rounds, args.steps))
        failed = [f"round {i + 1} {c}: {r[c].get('why') or r[c].get('rc')}" for i, r in enumerate(rounds)
                  for c in CONFIGS if not r[c].get("ok")]
        doc["failures"] = failed
        for r in rounds:
            for c in CONFIGS:
                r[c].pop("times", None)
        doc["rounds"] = rounds
        doc["seconds"] = round(time.time() - t0, 1)
    text = json.dumps(doc, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)
    t = doc.get("target")
    if t:
        for key, ratio in [("target", "api/native"), ("hooks_target", "api/hooks_off")]:
            t = doc[key]
            print(f"hook-cost: {ratio} median {t['median_ratio']} over {t['rounds']} rounds "
                  f"(95% {doc['ratios'][ratio]['bootstrap95']}); target <= {TARGET}: "
                  f"{'met' if t['met'] else 'NOT met'}{' surely' if t['met_surely'] else ''}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
