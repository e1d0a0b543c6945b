#!/usr/bin/env python3
"""What `gpusan run --mode canary` costs (issue 17), run by bench/canary-overhead.sh on the GPU
machine: each workload natively and under canary mode in the same call, alternating (the
order flips every round, so drift falls on both), the medians over rounds of each program's
own median (CUDA events, >= 10 timed runs after warm-ups), the ratio canary / native per
workload, their geometric mean and the worst, judged against the targets of the issue
(<= 1 % geomean, <= 3 % worst), evaluated from the numbers, never assumed.

Workloads: the CUDA ones of bench/check_overhead.py (saxpy, stencil2d, sgemm, reduction,
histogram, gather, tiny_launches, many_allocs: built and listed by its own code, imported),
the PyTorch MLP and Transformer training steps (bench/binary/torch_steps.py: eager, every
kernel PyTorch's or cuBLAS's machine code, also bit-identical to native), and the
torch.compile'd model (bench/workloads/torch_compile.py). Canary mode instruments nothing,
so both tools share one Triton/Inductor cache: the compiled kernels are the same.

Also: false positives (any report on these clean programs), results correct, the device
memory many_allocs sees taken around its 20,000 allocations under canary mode minus native
(per allocation, against <= 32 B plus the guard's arrays), and the report's counters about
the guard (a zero cost with a guard that never scanned would prove nothing).

  canary_overhead.py --gpusan DIR/gpusan --out canary-overhead.json [--rounds 3] [--cuda-rounds 9]
                     [--deadline EPOCH] [--work DIR] [--only REGEX] [--dry]

--dry: no GPU needed: writes the plan (build and run commands) and exits.
Standard library only.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_overhead as co  # noqa: E402  (workload list, builds, environment, geomean)
from benchproc import parse_bench, run  # noqa: E402


def cpu_list(spec):
    """The CPUs of a list as taskset and nvidia-smi write it ("0-3,8,10-11")."""
    cpus = []
    for part in spec.split(","):
        part = part.strip()
        if re.fullmatch(r"\d+", part):
            cpus.append(int(part))
        elif m := re.fullmatch(r"(\d+)-(\d+)", part):
            cpus.extend(range(int(m[1]), int(m[2]) + 1))
    return cpus


def gpu_affinity(topo):
    """GPU 0's CPU affinity in `nvidia-smi topo -m`'s table (its header names the columns,
    tab-separated, the rows' first column the device), or [] when the table has none."""
    lines = topo.splitlines()
    header = next((l for l in lines if "CPU Affinity" in l), None)
    row = next((l for l in lines if l.split("\t")[0].strip() == "GPU0"), None)
    if header is None or row is None:
        return []
    cols, vals = [c.strip() for c in header.split("\t")], [c.strip() for c in row.split("\t")]
    if "CPU Affinity" not in cols:
        return []  # not the tab-separated table this reads
    i = cols.index("CPU Affinity")
    return cpu_list(vals[i]) if i < len(vals) else []


def pinned_cpus(spec, n=4):
    """Where every run goes (taskset -c): `spec` when given, else the first `n` CPUs of GPU 0's
    affinity that this process may use. Each run of a round landing on other cores (another
    NUMA node, a core the guard thread shares) moved the same native PyTorch step by 10-30 %
    between processes on the H100 (bench/results/h100-issue17, calls 18-21): with all runs on
    the same cores, the rounds compare the tools rather than the placement. "" when unknown."""
    if spec:
        return spec
    try:
        topo = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, ValueError, subprocess.SubprocessError):
        topo = ""
    allowed = os.sched_getaffinity(0)
    near = [c for c in gpu_affinity(topo) if c in allowed] or sorted(allowed)
    return ",".join(str(c) for c in near[:n]) if len(near) >= n else ""

REPO = co.REPO
TOOLS = ["native", "canary"]
# --variant NAME=ARGS: more canary-mode runs with extra gpusan options, each a tool of its
# own in the rotation, each with its ratio to native (`ratio_NAME`): where the cost comes from.
# Words NAME=VALUE in upper case among a variant's options are set in its environment.
VARIANTS = {}
VARIANT_ENV = {}
TARGETS = {"geomean_ratio_max": 1.01, "worst_ratio_max": 1.03, "bytes_per_allocation_max": 32,
           "allocations": 20000}
# The judged metric of each workload (its first: bench/workloads/README.md), and others
# worth a ratio.
EXTRA_METRICS = {"tiny_launches": ["tiny.host_us_per_launch"], "torch_compile": ["torch_compile.triton_only.ms"]}


def workloads(args):
    """bench/check_overhead.py's list (CUDA workloads, torch_compile; third-party programs
    only with --third-party DIR holding their manifest) plus the torch training steps."""
    ns = argparse.Namespace(work=args.work, nvcc=args.nvcc, third_party=args.third_party or "/nonexistent",
                            only="")
    ws = co.workload_list(ns)
    for w in ws:  # torch_compile: the python given
        if w["cmd"][0] == sys.executable:
            w["cmd"] = [args.python, *w["cmd"][1:]]
    steps = os.path.join(REPO, "bench/binary/torch_steps.py")
    for m in ("mlp", "transformer"):
        ws.append({"name": f"torch_{m}", "kind": "torch", "exe": None, "source": "bench/binary/torch_steps.py",
                   "cmd": [args.python, steps, m, "--steps", str(args.torch_steps)], "build": None, "cwd": REPO})
    if args.only:
        ws = [w for w in ws if re.search(args.only, w["name"])]
    return ws


def canary_cmd(args, report, cmd, tool="canary"):
    extra = ["--canary-interval-ms", args.interval_ms] if args.interval_ms else []
    # A variant's own options come last: they override the interval given to all.
    extra += VARIANTS.get(tool, [])
    return [args.gpusan, "run", "--mode", "canary", *extra, "--report-json", report, "--", *cmd]


def guard_facts(rep):
    """Counters and coverage of the report that speak of the guard and canaries."""
    ctr = rep.get("counters") or {}
    c = {k: v for k, v in ctr.items() if re.search(r"canar|guard|scan|drop|arm|entr|redzone|pad", k, re.I)}
    # The guard's scan count: `canary_scans` (a sum of every counter named "scan" once added
    # the GPU microseconds in: call 21's "9,534 scans" were 455 and 4,994 µs).
    scans = ctr.get("canary_scans")
    if not isinstance(scans, int):
        scans = sum(v for k, v in c.items() if isinstance(v, (int, float)) and re.search(r"scan", k, re.I)
                    and not re.search(r"drop|fail|skip|_us|bytes", k, re.I))
    cov = rep.get("coverage") or {}
    g = {k: v for k, v in cov.items() if re.search(r"canar|guard|alloc", k, re.I)} if isinstance(cov, dict) else {}
    section = rep.get("canary")
    if section is not None:
        g = {"canary": section, **g}
    return {"counters": c, "scans": scans if c else None, "coverage": json.loads(json.dumps(g)[:1500]) if
            len(json.dumps(g)) <= 1500 else {"truncated": json.dumps(g)[:1500]}}


def summarize(entry):
    """Per metric: the medians of the rounds per tool and the ratio canary / native; and per
    round, the ratio of each tool to native in that round (`paired_TOOL`): the rounds'
    spread, which a ratio of medians hides (machines vary by 10-25 % between processes)."""
    good = {t: [r for r in entry["runs"] if r["tool"] == t and r.get("ok")] for t in TOOLS}
    names = []
    for r in entry["runs"]:
        for k in r.get("metrics") or {}:
            if k not in names:
                names.append(k)
    table = {}
    for k in names:
        row = {}
        for t in TOOLS:
            vals = [r["metrics"][k] for r in good[t] if k in (r.get("metrics") or {})]
            row[t] = round(statistics.median(vals), 6) if vals else None
            row[t + "_rounds"] = vals
        if row["native"] and row["canary"] is not None:
            row["ratio"] = round(row["canary"] / row["native"], 4)
        for v in VARIANTS:
            if row["native"] and row[v] is not None:
                row["ratio_" + v] = round(row[v] / row["native"], 4)
        native_by_round = {r["round"]: r["metrics"][k] for r in good["native"] if k in (r.get("metrics") or {})}
        for t in TOOLS:
            if t == "native":
                continue
            paired = [round(r["metrics"][k] / native_by_round[r["round"]], 4) for r in good[t]
                      if k in (r.get("metrics") or {}) and native_by_round.get(r["round"])]
            if paired:
                row["paired_" + t] = paired
        table[k] = row
    entry["metrics"] = table
    entry["headline"] = names[0] if names else None
    # The whole process's wall time (start-up, module loads, the guard's start and final
    # scan at exit included): recorded beside the judged kernel-time metric, not judged.
    walls = {t: [r["wall_s"] for r in good[t]] for t in TOOLS}
    if walls["native"] and walls["canary"]:
        # A variant may not have run yet (the JSON is saved after every run).
        entry["wall_s"] = {t: round(statistics.median(v), 3) for t, v in walls.items() if v}
        entry["wall_s"]["ratio"] = round(entry["wall_s"]["canary"] / entry["wall_s"]["native"], 4)
    printed = [r for r in entry["runs"] if r.get("metrics") is not None]
    entry["correct"] = all(r["ok"] for r in printed) if printed else None
    g = [r for r in entry["runs"] if r["tool"] == "canary" and "canary_errors" in r]
    entry["canary_errors"] = sum(r["canary_errors"] or 0 for r in g) if g else None
    kinds = {}
    for r in g:
        for k, v in (r.get("canary_by_kind") or {}).items():
            kinds[k] = kinds.get(k, 0) + v
    entry["canary_by_kind"] = kinds
    digests = {t: sorted({r["digest"] for r in entry["runs"] if r["tool"] == t and r.get("digest")}) for t in TOOLS}
    if digests["native"]:
        entry["bit_identical"] = digests["native"] == digests["canary"] and len(digests["native"]) == 1
    scans = [r["guard"]["scans"] for r in g if r.get("guard", {}).get("scans") is not None]
    entry["guard_scans"] = scans


def reported_memory(doc):
    """What canary mode's report says it holds at many_allocs' exit (canary17's counters:
    the device arrays, the host's copy, live entries), per live allocation: the plan's
    decision 6 asks <= 32 B including the host's copy. The padding (32 B by default in canary
    mode) is on top, and is the canary itself."""
    runs = [r for r in doc["workloads"].get("many_allocs", {}).get("runs", [])
            if r.get("tool") == "canary" and (r.get("guard") or {}).get("counters")]
    if not runs:
        return None
    c = runs[-1]["guard"]["counters"]
    out = {k: c[k] for k in ("canary_array_bytes", "canary_host_bytes", "canary_live", "canary_guarded") if k in c}
    live = c.get("canary_live") or c.get("canary_guarded")
    if live and "canary_array_bytes" in c:
        per = (c["canary_array_bytes"] + c.get("canary_host_bytes", 0)) / live
        out["bytes_per_live_allocation"] = round(per, 2)
        out["within_32B"] = per <= TARGETS["bytes_per_allocation_max"]
    return out


def memory(doc):
    ma = doc["workloads"].get("many_allocs", {}).get("metrics", {}).get("many_allocs.mem_delta_mib", {})
    reported = reported_memory(doc)
    if ma.get("native") is None or ma.get("canary") is None:
        return {"reported": reported} if reported else None
    extra = (ma["canary"] - ma["native"]) * (1 << 20)
    n = TARGETS["allocations"]
    return {"reported": reported,"what": "many_allocs: device memory taken (cudaMemGetInfo) from before its 20,000 cudaMallocs of 16 KiB "
                    "to after its kernels, canary minus native (driver granularity 2 MiB; gpusan reports red zones "
                    "as free, so this is the guard's arrays and staging; the padding that holds the canaries is "
                    "not in it: see the report counters in each run's guard.counters)",
            "native_mib": ma["native"], "canary_mib": ma["canary"], "extra_bytes": round(extra),
            "extra_bytes_per_allocation": round(extra / n, 2),
            # One driver granule of slack for the guard's fixed part.
            "within_32B_per_allocation_plus_one_granule": extra <= 32 * n + (2 << 20)}


def summary(doc):
    rows = []
    for name, e in doc["workloads"].items():
        h = e.get("headline")
        rows.append((name, h, (e.get("metrics", {}).get(h or "", {}) or {}).get("ratio")))
    ratios = [(n, r) for n, _, r in rows if r]
    gm = co.geomean([r for _, r in ratios])
    worst = max(ratios, key=lambda x: x[1]) if ratios else (None, None)
    fps = {n: e["canary_by_kind"] for n, e in doc["workloads"].items() if e.get("canary_errors")}
    wrong = [n for n, e in doc["workloads"].items() if e.get("correct") is False]
    not_identical = [n for n, e in doc["workloads"].items() if e.get("bit_identical") is False]
    missing = [n for n, _, r in rows if r is None]
    no_scans = [n for n, e in doc["workloads"].items() if e.get("guard_scans") == [] or
                (e.get("guard_scans") and not any(e["guard_scans"]))]
    mem = doc.get("memory")
    ran = any(r.get("tool") == "canary" and "rc" in r for e in doc["workloads"].values() for r in e["runs"])
    identical_known = any("bit_identical" in e for e in doc["workloads"].values())

    def verdict(v, ok):
        return None if v is None else bool(ok)

    return {
        "headline_metrics": {n: h for n, h, _ in rows},
        "ratios": {n: r for n, r in ratios},
        "workloads_measured": len(ratios),
        "workloads_missing": missing,
        "geomean_ratio": round(gm, 4) if gm else None,
        "worst": {"workload": worst[0], "ratio": worst[1]},
        "false_positives": fps,
        "wrong_results": wrong,
        "not_bit_identical": not_identical,
        "guard_never_scanned_in": no_scans,
        "targets": TARGETS,
        "pass": {
            "geomean_ratio": verdict(gm, gm is not None and gm <= TARGETS["geomean_ratio_max"]),
            "worst_ratio": verdict(worst[1], worst[1] is not None and worst[1] <= TARGETS["worst_ratio_max"]),
            "no_false_positives": (not fps) if ran else None,
            "results_correct": None if all(e.get("correct") is None for e in doc["workloads"].values()) else not wrong,
            "bit_identical": (not not_identical) if identical_known else None,
            "guard_scanned": (not no_scans) if ran else None,
            "memory": None if not mem or "within_32B_per_allocation_plus_one_granule" not in mem
            else mem["within_32B_per_allocation_plus_one_granule"],
            "memory_reported_per_allocation": ((mem or {}).get("reported") or {}).get("within_32B"),
            "complete": not missing,
        },
    }


def table_text(doc):
    lines = [f"{'workload':16s} {'metric':32s} {'native':>10s} {'canary':>10s} {'ratio':>8s} rounds"]
    for name, e in doc["workloads"].items():
        for k in [e.get("headline")] + EXTRA_METRICS.get(name, []):
            m = (e.get("metrics") or {}).get(k or "")
            if not m:
                continue
            f = lambda v: "-" if v is None else f"{v:.4f}"  # noqa: E731
            variants = "".join(f" {v}={f(m.get('ratio_' + v))}" for v in VARIANTS)
            paired = m.get("paired_canary") or []
            if len(paired) > 1:
                variants += f" (canary/native by round {min(paired):.3f}-{max(paired):.3f})"
            lines.append(f"{name:16s} {k:32s} {f(m['native']):>10s} {f(m['canary']):>10s} {f(m.get('ratio')):>8s} "
                         f"{len(m['native_rounds'])}/{len(m['canary_rounds'])}{variants}")
    s = doc.get("summary", {})
    lines.append(f"geomean {s.get('geomean_ratio')} (target <= {TARGETS['geomean_ratio_max']}), worst "
                 f"{s.get('worst')} (target <= {TARGETS['worst_ratio_max']}); pass: {s.get('pass')}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpusan", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--nvcc", default="nvcc")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the PyTorch workloads (~15 s a run)")
    ap.add_argument("--cuda-rounds", type=int, default=9,
                    help="rounds of the CUDA workloads (~1 s a run: more rounds steady their medians)")
    ap.add_argument("--deadline", type=float, default=0, help="epoch seconds; no run starts that could end past it")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per run at most")
    ap.add_argument("--work", default="/tmp/gpusan-canary-overhead")
    ap.add_argument("--third-party", default="", help="bench/work/third_party (prepared by bench/third-party.sh)")
    ap.add_argument("--only", default="", help="regex of workload names")
    ap.add_argument("--torch-steps", type=int, default=30)
    ap.add_argument("--python", default=sys.executable, help="the python of the PyTorch workloads")
    ap.add_argument("--interval-ms", default="", help="--canary-interval-ms for canary mode (default: gpusan's)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=ARGS",
                    help="also run canary mode with these extra gpusan options (shell words), as tool NAME")
    ap.add_argument("--table-out", default="")
    ap.add_argument("--dry", action="store_true", help="write the plan, run nothing")
    ap.add_argument("--cpus", default=os.environ.get("GPUSAN_BENCH_CPUS", ""),
                    help="taskset -c list every run is pinned to (default: 4 CPUs near GPU 0; 'none': unpinned)")
    args = ap.parse_args()
    for v in args.variant:
        name, _, opts = v.partition("=")
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or name in TOOLS:
            ap.error(f"--variant {v!r}: NAME must be a new lower-case identifier")
        VARIANTS[name] = shlex.split(opts)
        TOOLS.append(name)
        VARIANT_ENV[name] = dict(w.split("=", 1) for w in VARIANTS[name] if re.match(r"[A-Z_][A-Z0-9_]*=", w))
        VARIANTS[name] = [w for w in VARIANTS[name] if not re.match(r"[A-Z_][A-Z0-9_]*=", w)]
    logs = os.path.join(args.work, "logs")
    os.makedirs(logs, exist_ok=True)
    os.makedirs(os.path.join(args.work, "bin"), exist_ok=True)
    ws = workloads(args)
    doc = {
        "what": "canary-mode overhead: each workload natively and under gpusan run --mode canary in the same call, "
                "order alternating by round; medians over rounds of each program's own median of CUDA-event-timed runs",
        "commands": {"native": "BIN", **{t: shlex.join([f"{k}={v}" for k, v in VARIANT_ENV.get(t, {}).items()]
                                                       + canary_cmd(args, "R.json", ["BIN"], t)) for t in TOOLS[1:]}},
        "rounds": {"torch": args.rounds, "cuda": max(args.cuda_rounds, args.rounds)},
        "units": "metric names end in their unit; ratio = canary / native; the headline metric of each workload is "
                 "its first",
        "workloads": {w["name"]: {"kind": w["kind"], "source": w["source"], "command": shlex.join(w["cmd"]),
                                  **({"build": shlex.join(w["build"])} if w["build"] else {}), "runs": []}
                      for w in ws},
        "finished": False,
    }

    def save():
        for e in doc["workloads"].values():
            summarize(e)
        doc["memory"] = memory(doc)
        doc["summary"] = summary(doc)
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, args.out)

    if args.dry:
        doc["dry"] = True
        doc["skipped"] = "--dry: the plan only"
        save()
        print(json.dumps({"dry": True, "workloads": [w["name"] for w in ws]}))
        return 0
    doc["environment"] = co.environment(argparse.Namespace(nvcc=args.nvcc, gpusan=args.gpusan,
                                                           compute_sanitizer="true"))
    errors = co.build_all(ws, argparse.Namespace(nvcc=args.nvcc), logs)
    cpus = "" if args.cpus == "none" else pinned_cpus(args.cpus)
    pin = ["taskset", "-c", cpus] if cpus and shutil.which("taskset") else []
    doc["pinned_cpus"] = cpus if pin else None
    for w in ws:
        if errors.get(w["name"]):
            doc["workloads"][w["name"]]["build_error"] = errors[w["name"]]
    env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(args.work, "cache", "triton"),
               TORCHINDUCTOR_CACHE_DIR=os.path.join(args.work, "cache", "inductor"),
               GPUSAN_CACHE_DIR=os.path.join(args.work, "cache", "gpusan"))
    os.makedirs(env["GPUSAN_CACHE_DIR"], mode=0o700, exist_ok=True)
    gpusan_ok = os.access(args.gpusan, os.X_OK)
    # Seconds each workload's last run took, so that no run starts that the deadline cuts.
    took = {}

    def left():
        return args.deadline - time.time() if args.deadline else 1e9

    cuda_rounds = max(args.cuda_rounds, args.rounds)
    for rnd in range(cuda_rounds):
        order = TOOLS if rnd % 2 == 0 else TOOLS[::-1]
        for w in ws:
            e = doc["workloads"][w["name"]]
            if e.get("build_error") or rnd >= (cuda_rounds if w["kind"] == "cuda" else args.rounds):
                continue
            for tool in order:
                need = took.get((w["name"], tool), 10) * 1.5 + 3
                if left() < need or (tool != "native" and not gpusan_ok):
                    e["runs"].append({"tool": tool, "round": rnd,
                                      "skipped": "deadline" if left() < need else "no gpusan binary"})
                    continue
                report = os.path.join(logs, f"{w['name']}-{tool}-{rnd}.json")
                if os.path.exists(report):
                    os.unlink(report)
                cmd = pin + (w["cmd"] if tool == "native" else canary_cmd(args, report, w["cmd"], tool))
                r = run(cmd, min(args.timeout, left()), env={**env, **VARIANT_ENV.get(tool, {})}, cwd=w["cwd"])
                took[(w["name"], tool)] = r["wall_s"]
                with open(os.path.join(logs, f"{w['name']}-{tool}-{rnd}.log"), "w") as f:
                    f.write(f"$ {r['cmd']}\nrc={r['rc']} wall={r['wall_s']}s\n--- stdout\n{r['stdout']}\n"
                            f"--- stderr\n{r['stderr']}\n")
                parsed = parse_bench(r["stdout"])
                entry = {"tool": tool, "round": rnd, "rc": r["rc"], "wall_s": r["wall_s"], "timed_out": r["timed_out"],
                         "ok": bool(parsed and parsed.get("ok")) and r["rc"] == 0}
                if parsed:
                    entry["metrics"] = parsed.get("metrics", {})
                    if parsed.get("digest"):
                        entry["digest"] = parsed["digest"]
                    e["params"] = parsed.get("params", {})
                else:
                    entry["stdout_tail"] = r["stdout"][-400:]
                if not entry["ok"]:
                    entry["stderr_tail"] = r["stderr"][-800:]
                if tool != "native":
                    try:
                        with open(report) as f:
                            rep = json.load(f)
                        s = rep.get("summary") or {}
                        entry["canary_errors"] = s.get("total")
                        entry["canary_by_kind"] = s.get("by_kind")
                        entry["guard"] = guard_facts(rep)
                        if rep.get("errors"):
                            entry["first_error"] = json.dumps(rep["errors"][0])[:600]
                    except (OSError, ValueError) as ex:
                        entry["report_problem"] = str(ex)
                e["runs"].append(entry)
                print(f"[canary-overhead] round {rnd} {w['name']:14s} {tool:6s} rc={r['rc']} ok={entry['ok']} "
                      f"wall={r['wall_s']}s", flush=True)
                save()
    doc["finished"] = not any(r.get("skipped") == "deadline" for e in doc["workloads"].values() for r in e["runs"])
    save()
    text = table_text(doc)
    if args.table_out:
        with open(args.table_out, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
