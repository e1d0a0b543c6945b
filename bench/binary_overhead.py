#!/usr/bin/env python3
"""The binary route's overhead (issue 14; bench/binary-overhead.sh runs it on the GPU machine):
the check-overhead workloads (bench/workloads/ and the third-party programs
bench/third-party.sh prepared) built twice, as machine code only (`-gencode
arch=compute_90,code=sm_90`, no PTX: `cuobjdump -lptx` checks) and as usual (`-arch=sm_90`,
PTX embedded), and PyTorch training steps (bench/binary/torch_steps.py: an MLP and a
4-layer Transformer), run interleaved by tool:

  native   the machine-code-only build (the torch steps as they are)
  binary   `gpusan run --mode check --route binary` on the machine-code-only build
  ptx      `gpusan run --mode check --route ptx` on the PTX build (workloads only: PyTorch has no PTX)
  cs       `compute-sanitizer --tool memcheck` on the machine-code-only build

Kernel time is each program's own CUDA-event median (its first metric); binary-overhead.json
has per workload the medians over rounds, the ratios to native, compute-sanitizer over binary,
gpusan's errors (false positives) and its coverage (kernels checked by the binary route), and,
for the torch steps, whether every tool's final parameters are bit-identical to native's; the
summary judges the targets (binary ≤ 3× native by geomean, ≥ 10× faster than
compute-sanitizer). Rewritten after every run: a run cut short keeps what it has.

  binary_overhead.py --gpusan DIR/gpusan --out binary-overhead.json [--rounds 2] [--cs-rounds 1]
                     [--deadline EPOCH] [--work DIR] [--only REGEX] [--torch-steps 10]
                     [--no-torch] [--skip-build] [--dry-run] [--workloads-json FILE]

--dry-run writes the plan (every command of every round) and runs nothing; --workloads-json
replaces the workload list (tests: [{"name", "kind", "sass_cmd", "ptx_cmd"}]). Standard
library only (it runs on the GPU machine).
"""

import argparse
import concurrent.futures
import datetime
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from benchproc import parse_bench, run  # noqa: E402

TOOLS = ["native", "binary", "ptx", "cs"]
TARGETS = {"geomean_slowdown_max": 3.0, "torch_slowdown_max": 3.0, "speedup_over_cs_min": 10.0}
SASS_ARCH = ["-gencode", "arch=compute_90,code=sm_90"]
PTX_ARCH = ["-arch=sm_90"]
TORCH_MODELS = ("mlp", "transformer")


# ---------------------------------------------------------------------------- workloads

def workload_list(args):
    """[{name, kind, source, cwd, sass: {exe, cmd, build}, ptx: {…} or None}]: the
    check-overhead workloads built both ways, then the torch steps."""
    if args.workloads_json:
        with open(args.workloads_json) as f:
            given = json.load(f)
        return [{"name": w["name"], "kind": w.get("kind", "cuda"), "source": "test", "cwd": REPO,
                 "sass": {"exe": None, "cmd": w["sass_cmd"], "build": None},
                 "ptx": {"exe": None, "cmd": w["ptx_cmd"], "build": None} if w.get("ptx_cmd") else None}
                for w in given if not args.only or re.search(args.only, w["name"])]
    import check_overhead as co  # the workload set and how each is built
    ns = argparse.Namespace(work=os.path.join(args.work, "ptx"), nvcc=args.nvcc, third_party=args.third_party,
                            only="")
    out = []
    for w in co.workload_list(ns):
        if w["kind"] == "torch":  # torch.compile's kernels are Triton's PTX: not this benchmark's
            continue
        sass_exe = os.path.join(args.work, "sass", "bin", os.path.basename(w["exe"]))
        out.append({"name": w["name"], "kind": w["kind"], "source": w["source"], "cwd": w["cwd"],
                    "ptx": {"exe": w["exe"], "cmd": w["cmd"], "build": w["build"]},
                    "sass": {"exe": sass_exe, "cmd": [sass_exe, *w["cmd"][1:]],
                             "build": sass_build(w["build"], w["exe"], sass_exe)}})
    if not args.no_torch:
        for model in TORCH_MODELS:
            cmd = [sys.executable, os.path.join(REPO, "bench/binary/torch_steps.py"), model,
                   "--steps", str(args.torch_steps)]
            out.append({"name": f"torch_{model}", "kind": "torch", "source": "bench/binary/torch_steps.py",
                        "cwd": REPO, "sass": {"exe": None, "cmd": cmd, "build": None}, "ptx": None})
    return [w for w in out if not args.only or re.search(args.only, w["name"])]


def sass_build(build, exe, sass_exe):
    """The PTX build's nvcc command made machine-code-only, writing `sass_exe`."""
    cmd = []
    for a in build:
        if a in PTX_ARCH:
            cmd.extend(SASS_ARCH)
        else:
            cmd.append(sass_exe if a == exe else a)
    return cmd


def has_ptx(exe, cuobjdump="cuobjdump"):
    """Whether `exe`'s fatbins hold PTX (`cuobjdump -lptx` lists it); None when unknown."""
    try:
        r = subprocess.run([cuobjdump, "-lptx", exe], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return bool(r.stdout.strip()) if r.returncode == 0 else None


def build_all(workloads, logs):
    jobs = [(w, v) for w in workloads for v in ("sass", "ptx") if w.get(v) and w[v]["build"]]

    def one(job):
        w, v = job
        os.makedirs(os.path.dirname(w[v]["exe"]), exist_ok=True)
        r = run(w[v]["build"], 300, cwd=w["cwd"])
        with open(os.path.join(logs, f"build-{w['name']}-{v}.log"), "w") as f:
            f.write(f"$ {r['cmd']}\nrc={r['rc']}\n{r['stdout']}{r['stderr']}")
        return w["name"], v, None if r["rc"] == 0 else (r["stdout"] + r["stderr"])[-1500:]

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        for name, v, err in pool.map(one, jobs):
            if err:
                next(w for w in workloads if w["name"] == name)[v]["build_error"] = err


def tools_for(w, only=None):
    return [t for t in TOOLS if (t != "ptx" or w.get("ptx")) and (not only or t in only)]


def command(args, w, tool, report):
    """The argv of `tool` on workload `w` (gpusan writes `report`)."""
    if tool == "ptx":
        return [args.gpusan, "run", "--mode", "check", "--route", "ptx", "--report-json", report, "--", *w["ptx"]["cmd"]]
    prog = w["sass"]["cmd"]
    if tool == "binary":
        return [args.gpusan, "run", "--mode", "check", "--route", "binary", *shlex.split(args.binary_args),
                "--report-json", report, "--", *prog]
    if tool == "cs":
        # PyTorch probes the runtime (errors it expects): not memory errors, and not timed work.
        api = ["--report-api-errors", "no"] if w["kind"] == "torch" else []
        return [args.compute_sanitizer, "--tool", "memcheck", *api, *prog]
    return list(prog)


def plan(args, workloads):
    """Every run in order: (round, workload, tool)."""
    out = []
    for rnd in range(args.rounds):
        for w in workloads:
            for tool in tools_for(w, args.tools.split(",") if args.tools else None):
                if tool == "cs" and rnd >= args.cs_rounds:
                    continue
                out.append((rnd, w, tool))
    return out


# ---------------------------------------------------------------------------- judging

def geomean(xs):
    import math
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def report_facts(path):
    """What a gpusan report says that the benchmark keeps: errors, kinds, coverage totals and
    the routes that checked kernels."""
    try:
        with open(path) as f:
            rep = json.load(f)
    except (OSError, ValueError) as e:
        return {"report_problem": f"{type(e).__name__}: {e}"}
    s = rep.get("summary") or {}
    cov = rep.get("coverage") or {}
    routes = {}
    for k in cov.get("kernels") or []:
        key = k.get("checked_by") or f"unchecked: {k.get('unchecked')}"
        routes[key] = routes.get(key, 0) + 1
    return {"errors": s.get("total"), "by_kind": s.get("by_kind"), "coverage": cov.get("totals"),
            "kernels_by_route": routes, "unchecked_modules": rep.get("unchecked_modules") or None,
            "counters": rep.get("counters") or None}


def summarize_workload(e):
    good = {t: [r for r in e["runs"] if r["tool"] == t and r.get("ok")] for t in TOOLS}
    names = []
    for r in e["runs"]:
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
        for t in ("binary", "ptx", "cs"):
            if row["native"] and row[t] is not None:
                row[f"ratio_{t}"] = round(row[t] / row["native"], 4)
        if row["binary"] and row["cs"] is not None:
            row["cs_over_binary"] = round(row["cs"] / row["binary"], 2)
        table[k] = row
    e["metrics"] = table
    e["headline"] = names[0] if names else None
    printed = [r for r in e["runs"] if r.get("metrics") is not None]
    e["correct"] = all(r["ok"] for r in printed) if printed else None
    digests = {r["tool"]: r["digest"] for r in printed if r.get("digest")}
    if digests:
        e["digests"] = sorted(set(digests.values()))
        e["bit_identical"] = len(e["digests"]) == 1 and "native" in digests
    e["failed_runs"] = [f"{r['tool']} round {r['round']}: rc={r['rc']}{' timed out' if r.get('timed_out') else ''}"
                        for r in e["runs"] if "rc" in r and not r["ok"]]
    for t in ("binary", "ptx"):
        g = [r for r in e["runs"] if r["tool"] == t and "gpusan" in r]
        if g:
            e[f"{t}_errors"] = sum((r["gpusan"].get("errors") or 0) for r in g)
            e[f"{t}_coverage"] = g[-1]["gpusan"].get("coverage")
            e[f"{t}_kernels_by_route"] = g[-1]["gpusan"].get("kernels_by_route")


def summary(doc):
    rows = {}
    for name, e in doc["workloads"].items():
        m = (e.get("metrics") or {}).get(e.get("headline") or "", {})
        rows[name] = (e["kind"], m)
    work = {n: m for n, (k, m) in rows.items() if k != "torch"}
    torch = {n: m for n, (k, m) in rows.items() if k == "torch"}

    def gm(ms, key):
        v = geomean([m.get(key) for m in ms.values()])
        return round(v, 4) if v else None

    g_bin, g_ptx, g_cs = gm(work, "ratio_binary"), gm(work, "ratio_ptx"), gm(work, "ratio_cs")
    sp = gm(work, "cs_over_binary")
    worst = max(((n, m.get("ratio_binary")) for n, m in work.items() if m.get("ratio_binary")),
                key=lambda x: x[1], default=(None, None))
    t_ratio = {n: m.get("ratio_binary") for n, m in torch.items()}
    t_sp = {n: m.get("cs_over_binary") for n, m in torch.items()}
    fps = {n: e["binary_errors"] for n, e in doc["workloads"].items() if e.get("binary_errors")}
    fps_ptx = {n: e["ptx_errors"] for n, e in doc["workloads"].items() if e.get("ptx_errors")}
    unchecked = {n: (e.get("binary_coverage") or {}) for n, e in doc["workloads"].items()
                 if e.get("binary_coverage") and
                 e["binary_coverage"].get("checked_launches") != e["binary_coverage"].get("launches")}
    not_identical = [n for n, e in doc["workloads"].items() if e.get("bit_identical") is False]
    wrong = [n for n, e in doc["workloads"].items() if e.get("correct") is False]
    missing = [n for n, (k, m) in rows.items() if m.get("ratio_binary") is None or m.get("cs_over_binary") is None]
    ok = lambda v, cond: None if v is None else bool(cond)  # noqa: E731
    return {
        "geomean_binary_over_native": g_bin, "geomean_ptx_over_native": g_ptx, "geomean_cs_over_native": g_cs,
        "geomean_cs_over_binary": sp, "worst_binary": {"workload": worst[0], "ratio": worst[1]},
        "torch_binary_over_native": t_ratio, "torch_cs_over_binary": t_sp,
        "binary_false_positives": fps, "ptx_false_positives": fps_ptx,
        "binary_not_all_launches_checked": unchecked, "not_bit_identical": not_identical, "wrong_results": wrong,
        "failed_runs": {n: e["failed_runs"] for n, e in doc["workloads"].items() if e.get("failed_runs")},
        "workloads_missing_a_tool": missing, "targets": TARGETS,
        "pass": {
            "workloads_binary_slowdown": ok(g_bin, g_bin is not None and g_bin <= TARGETS["geomean_slowdown_max"]),
            "workloads_speedup_over_cs": ok(sp, sp is not None and sp >= TARGETS["speedup_over_cs_min"]),
            "torch_binary_slowdown": None if not t_ratio or None in t_ratio.values()
            else all(v <= TARGETS["torch_slowdown_max"] for v in t_ratio.values()),
            "torch_speedup_over_cs": None if not t_sp or None in t_sp.values()
            else all(v >= TARGETS["speedup_over_cs_min"] for v in t_sp.values()),
            "no_false_positives": not fps and not fps_ptx,
            "all_launches_checked": not unchecked,
            "bit_identical": not not_identical,
            "results_correct": not wrong,
            "complete": not missing,
        },
    }


def table_text(doc):
    lines = [f"{'workload':16s} {'headline':26s} {'native':>9s} {'binary':>9s} {'b/n':>6s} {'ptx':>9s} {'p/n':>6s} "
             f"{'cs':>10s} {'cs/n':>7s} {'cs/bin':>7s} err ok ident checked"]

    def f(v, w, p=3):
        return f"{v:{w}.{p}f}" if isinstance(v, (int, float)) else f"{'-':>{w}s}"

    for name, e in doc["workloads"].items():
        errs = [e[k] for k in ("sass_build_error", "ptx_build_error") if e.get(k)]
        if errs:
            lines.append(f"{name:16s} BUILD FAILED (see build logs)")
            continue
        m = (e.get("metrics") or {}).get(e.get("headline") or "", {})
        cov = e.get("binary_coverage") or {}
        checked = f"{cov.get('checked_launches')}/{cov.get('launches')}" if cov else "-"
        lines.append(f"{name:16s} {str(e.get('headline'))[:26]:26s} {f(m.get('native'), 9)} {f(m.get('binary'), 9)} "
                     f"{f(m.get('ratio_binary'), 6, 2)} {f(m.get('ptx'), 9)} {f(m.get('ratio_ptx'), 6, 2)} "
                     f"{f(m.get('cs'), 10)} {f(m.get('ratio_cs'), 7, 1)} {f(m.get('cs_over_binary'), 7, 1)} "
                     f"{str(e.get('binary_errors')):>3s} {str(e.get('correct')):5s} {str(e.get('bit_identical', '-')):5s} "
                     f"{checked}")
    s = doc["summary"]
    lines.append(f"workloads: binary/native geomean {s['geomean_binary_over_native']} (<= {TARGETS['geomean_slowdown_max']}),"
                 f" worst {s['worst_binary']['ratio']} ({s['worst_binary']['workload']}); ptx/native "
                 f"{s['geomean_ptx_over_native']}; cs/binary {s['geomean_cs_over_binary']} "
                 f"(>= {TARGETS['speedup_over_cs_min']})")
    lines.append(f"torch: binary/native {s['torch_binary_over_native']}, cs/binary {s['torch_cs_over_binary']}")
    lines.append("pass: " + ", ".join(f"{k}={v}" for k, v in s["pass"].items()))
    return "\n".join(lines)


# ---------------------------------------------------------------------------- main

def environment(args):
    def sh(cmd):
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=REPO)
            return (r.stdout + r.stderr).strip()
        except Exception as e:  # noqa: BLE001 (recorded, never fatal)
            return f"unavailable: {e}"

    smi = sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm", "--format=csv,noheader"])
    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpus": [line.strip() for line in smi.splitlines() if line.strip()],
        "host": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
        "nvcc": sh([args.nvcc, "--version"]).splitlines()[-1:],
        "nvcc_flags": {"sass": ["-O3", *SASS_ARCH, "-lineinfo"], "ptx": ["-O3", *PTX_ARCH, "-lineinfo"]},
        "compute_sanitizer": sh([args.compute_sanitizer, "--version"]).splitlines()[-1:],
        "gpusan": args.gpusan, "gpusan_version": sh([args.gpusan, "--version"]),
        "git_head": sh(["git", "rev-parse", "HEAD"]),
    }


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpusan", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--compute-sanitizer", default="compute-sanitizer")
    ap.add_argument("--nvcc", default="nvcc")
    ap.add_argument("--cuobjdump", default="cuobjdump")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cs-rounds", type=int, default=1,
                    help="compute-sanitizer only in the first N rounds: its ratio is far from the others, and "
                         "its runs take longest")
    ap.add_argument("--deadline", type=float, default=0, help="epoch seconds; runs stop before it")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per run at most")
    ap.add_argument("--work", default="/tmp/gpusan-binary-overhead")
    ap.add_argument("--third-party", default=os.path.join(REPO, "bench/work/third_party"))
    ap.add_argument("--only", default="", help="regex of workload names")
    ap.add_argument("--torch-steps", type=int, default=10)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--skip-build", action="store_true")
    ap.add_argument("--dry-run", action="store_true", help="write the plan and run nothing")
    ap.add_argument("--workloads-json", default="")
    ap.add_argument("--table-out", default="")
    ap.add_argument("--binary-args", default="", help="more `gpusan run` options for the binary tool, e.g. "
                    "'--binary-kinds none'")
    ap.add_argument("--tools", default="", help="comma-separated subset of " + ",".join(TOOLS))
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    logs = os.path.join(args.work, "logs")
    os.makedirs(logs, exist_ok=True)
    workloads = workload_list(args)
    steps = plan(args, workloads)
    if args.dry_run:
        doc = {"dry_run": True, "runs": [{"round": rnd, "workload": w["name"], "tool": t,
                                          "cmd": shlex.join(command(args, w, t, os.path.join(logs, "R.json")))}
                                         for rnd, w, t in steps],
               "builds": {w["name"]: {v: shlex.join(w[v]["build"]) for v in ("sass", "ptx")
                                      if w.get(v) and w[v]["build"]} for w in workloads if w["sass"]["build"]}}
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"[binary-overhead] dry run: {len(steps)} runs of {len(workloads)} workloads planned in {args.out}")
        return 0

    def left():
        return args.deadline - time.time() if args.deadline else 1e9

    if not args.skip_build:
        build_all(workloads, logs)
    doc = {
        "what": "binary route (issue 14) kernel-time overhead: each workload built machine-code-only, natively, under "
                "gpusan run --mode check --route binary and under compute-sanitizer memcheck, and built with PTX under "
                "--route ptx; PyTorch MLP and Transformer training steps natively, under --route binary and "
                "compute-sanitizer; interleaved rounds, medians of each program's own CUDA-event medians",
        "environment": environment(args),
        "commands": {t: shlex.join(command(args, {"kind": "cuda", "sass": {"cmd": ["BIN"]}, "ptx": {"cmd": ["BIN_PTX"]}},
                                           t, "R.json")) for t in TOOLS},
        "rounds": args.rounds, "cs_rounds": min(args.cs_rounds, args.rounds), "torch_steps": args.torch_steps,
        "units": "metric names end in their unit; ratio_T = T / native; cs_over_binary = cs / binary; the "
                 "headline metric of each workload is its first",
        "third_party": os.path.exists(os.path.join(args.third_party, "manifest.json")),
        "workloads": {}, "finished": False,
    }
    for w in workloads:
        e = {"kind": w["kind"], "source": w["source"], "runs": [],
             "commands": {t: shlex.join(command(args, w, t, "R.json")) for t in tools_for(w)}}
        for v in ("sass", "ptx"):
            if w.get(v) and w[v].get("build_error"):
                e[f"{v}_build_error"] = w[v]["build_error"]
        if w["sass"]["exe"] and not e.get("sass_build_error") and not args.skip_build:
            e["sass_build_has_ptx"] = has_ptx(w["sass"]["exe"], args.cuobjdump)
        doc["workloads"][w["name"]] = e

    def save():
        for e in doc["workloads"].values():
            summarize_workload(e)
        doc["summary"] = summary(doc)
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, args.out)

    gpusan_ok = os.access(args.gpusan, os.X_OK)
    base_env = dict(os.environ)
    for rnd, w, tool in steps:
        e = doc["workloads"][w["name"]]
        if e.get("sass_build_error") or (tool == "ptx" and e.get("ptx_build_error")):
            continue
        budget = min(args.timeout, left() - 5)
        if budget < 10 or (tool in ("binary", "ptx") and not gpusan_ok):
            e["runs"].append({"tool": tool, "round": rnd, "skipped": "deadline" if budget < 10 else "no gpusan binary"})
            continue
        env = dict(base_env)
        report = os.path.join(logs, f"{w['name']}-{tool}-{rnd}.json")
        if os.path.exists(report):
            os.unlink(report)
        r = run(command(args, w, tool, report), budget, env=env, cwd=w["cwd"])
        with open(os.path.join(logs, f"{w['name']}-{tool}-{rnd}.log"), "w") as f:
            f.write(f"$ {r['cmd']}\nrc={r['rc']} wall={r['wall_s']}s\n--- stdout\n{r['stdout']}\n--- stderr\n{r['stderr']}\n")
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
        if tool in ("binary", "ptx"):
            entry["gpusan"] = report_facts(report)
        elif tool == "cs":
            m = re.search(r"ERROR SUMMARY: (\d+) error", r["stdout"] + r["stderr"])
            entry["cs_errors"] = int(m.group(1)) if m else None
        e["runs"].append(entry)
        print(f"[binary-overhead] round {rnd} {w['name']:16s} {tool:6s} rc={r['rc']} ok={entry['ok']} "
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
