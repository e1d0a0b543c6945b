#!/usr/bin/env python3
"""The driver of bench/reliability/canary_programs.sh (issue 17): no false positive of
`gpusan run --mode canary` on clean, real programs, and no change of what they do. Each runs
natively and under canary mode; it passes when canary mode reports nothing, exits as
natively and prints native's output.

- every clean C++ case of tests/cases (`*clean*.cu`, built with nvcc -arch=sm_90 -lineinfo as
  the GPU suite builds them; judged as the suite does: exit code and last line);
- bench/canary/programs.cu: fork (before and after CUDA), CUDA graphs (global-mode capture
  with the host idle mid-capture, memory nodes, two streams, cudaDeviceReset), threads (8
  streams allocating, filling and freeing), allocation kinds (pitched, 3D, managed, mapped,
  a custom pool), every byte written to the last;
- a CuPy, a numba-cuda (numpy 2.2.6 from the carried wheel, as bench/python-suite.sh does),
  a JAX and a Triton program, and PyTorch blocks churned on two streams (the reuse rule's
  worst case) (bench/canary/*_prog.py).

A Python program that cannot run natively here (its framework missing or broken) is listed
in `not_run` with the reason: not a failure, not a pass; our own programs must run.

  programs_case.py --gpusan G --nvcc NVCC --work DIR --result R.json [--budget 55]
"""
import argparse
import concurrent.futures
import glob
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

CASE = "canary_programs"
EXPECTED = ("zero false positives under --mode canary on clean programs (tests/cases clean C++ cases, fork, CUDA "
            "graphs, threads, allocation kinds, CuPy, numba, JAX, Triton, PyTorch block churn), each exiting as natively with native's output")
MODES = ("fork", "graph", "threads", "kinds")
PYPROGS = ("cupy", "numba", "jax", "triton", "torch_churn")


def unpack_wheels(wheels, site, log):
    """The carried wheels (numpy 2.2.6 for numba-cuda) into `site`; None without any."""
    whl = sorted(glob.glob(os.path.join(wheels, "*.whl")))
    if not whl:
        return None
    os.makedirs(site, exist_ok=True)
    r = C.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
               "--no-cache-dir", "--target", site, *whl], 120)
    if r["rc"] != 0:  # pip refused: unpack as zip files, as bench/python-suite.sh does
        for w in whl:
            subprocess.run([sys.executable, "-m", "zipfile", "-e", w, site], capture_output=True, timeout=60)
    with open(log, "w") as f:
        f.write(r["stdout"] + r["stderr"])
    return site


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpusan", default=os.environ.get("GPUSAN", ""))
    ap.add_argument("--nvcc", default=os.environ.get("NVCC", "nvcc"))
    ap.add_argument("--nvcc-extra", default=os.environ.get("CANARY_NVCC_EXTRA", ""))
    ap.add_argument("--work", default=os.environ.get("WORK", "/tmp/canary-programs"))
    ap.add_argument("--result", default=os.environ.get("RESULT", "/tmp/canary-programs/result.json"))
    ap.add_argument("--budget", type=float, default=float(os.environ.get("CANARY_CASE_S", "55")))
    ap.add_argument("--wheels", default=os.environ.get("GPUSAN_PY_WHEELS", os.path.join(C.BENCH, "work", "wheels")))
    ap.add_argument("--jobs", type=int, default=6)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    clock = C.Clock(args.budget)
    extra = args.nvcc_extra.split()

    # Builds, all at once.
    sources = {"programs": os.path.join(C.HERE, "programs.cu")}
    for src in sorted(glob.glob(os.path.join(C.REPO, "tests", "cases", "*clean*.cu"))):
        sources[os.path.basename(src)[:-3]] = src

    def build(item):
        name, src = item
        exe = os.path.join(args.work, "bin", name)
        r = C.run([args.nvcc, "-arch=sm_90", "-lineinfo", *extra, "-o", exe, src], 240)
        C.save_log(args.work, f"build-{name}", r)
        return name, exe if r["rc"] == 0 else None, (r["stdout"] + r["stderr"])[-600:]

    os.makedirs(os.path.join(args.work, "bin"), exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 4) as pool:
        built = {n: (exe, err) for n, exe, err in pool.map(build, sources.items())}
    build_errors = {n: err for n, (exe, err) in built.items() if not exe}
    if not C.gpu_present():
        return C.skipped_result(args.result, CASE, EXPECTED, "no GPU on this machine (or CANARY_DRY=1)",
                                built=sorted(n for n, (exe, _) in built.items() if exe), build_errors=build_errors)
    if not os.access(args.gpusan or "", os.X_OK):
        return C.skipped_result(args.result, CASE, EXPECTED, f"no gpusan binary at {args.gpusan!r}")

    base = dict(os.environ, GPUSAN_CACHE_DIR=os.path.join(args.work, "cache"), PYTHONUNBUFFERED="1",
                CUPY_CACHE_DIR=os.path.join(args.work, "cupy"), NUMBA_CACHE_DIR=os.path.join(args.work, "numba"),
                XLA_PYTHON_CLIENT_MEM_FRACTION="0.15", TRITON_CACHE_DIR=os.path.join(args.work, "triton"))
    os.makedirs(base["GPUSAN_CACHE_DIR"], mode=0o700, exist_ok=True)
    site = unpack_wheels(args.wheels, os.path.join(args.work, "site"), os.path.join(args.work, "wheels.log"))
    programs = []  # (name, argv, env, ours)
    # tests/cases print facts that may differ under any tool (whether a freed address came
    # back: gpusan's quarantine delays that); the GPU suite judges their last line, so does
    # this case. Everything else must print native's output line for line.
    last_line_only = set()
    for py in PYPROGS:
        env = dict(base)
        if py == "numba" and site:
            env["PYTHONPATH"] = site + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        programs.append((py, [sys.executable, os.path.join(C.HERE, f"{py}_prog.py")], env, False))
    if built["programs"][0]:
        programs += [(f"programs_{m}", [built["programs"][0], m], base, True) for m in MODES]
    programs += [(n, [exe], base, True) for n, (exe, _) in sorted(built.items()) if exe and n != "programs"]
    last_line_only.update(n for n in built if n != "programs")

    def one(job):
        name, argv, env, tool = job
        limit = min(40, clock.left() - 2)
        if limit < 3:
            return job, None
        label = f"{tool}-{name}"
        rep = os.path.join(args.work, label + ".json")
        if os.path.exists(rep):
            os.unlink(rep)
        cmd = argv if tool == "native" else C.gpusan_cmd(args.gpusan, rep, argv)
        r = C.run(cmd, limit, env=env, cwd=args.work)
        C.save_log(args.work, label, r)
        r["report"] = rep
        return job, r

    jobs = [(n, a, e, t) for n, a, e, _ in programs for t in ("native", "gpusan")]
    results = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for (name, _, _, tool), r in pool.map(one, jobs):
            results[(name, tool)] = r

    rows, not_run, failed, skipped = {}, {}, [], []
    for name, _, _, ours in programs:
        n, g = results.get((name, "native")), results.get((name, "gpusan"))
        if n is None or g is None:
            skipped.append(name)
            continue
        row = {"native": C.brief(n), "gpusan": C.brief(g)}
        row["gpusan"].update(C.report_summary(g["report"]))
        if n["rc"] != 0 and not ours:
            not_run[name] = (n["stderr"] or n["stdout"]).strip().splitlines()[-1:] or [f"rc={n['rc']}"]
            row["not_run"] = True
            rows[name] = row
            continue
        ours_out, theirs = C.deterministic(n["stdout"]), C.deterministic(g["stdout"])
        same = ours_out[-1:] == theirs[-1:] if name in last_line_only else ours_out == theirs
        row["same_output"] = same
        row["output"] = n["stdout"].strip().splitlines()[-3:]
        row["pass"] = n["rc"] == 0 and g["rc"] == n["rc"] and C.silent(row["gpusan"].get("by_kind")) and same
        if not same:
            row["gpusan"]["stdout_tail"] = g["stdout"][-400:]
        if not row["pass"]:
            failed.append(name)
        rows[name] = row
    ran = [n for n, r in rows.items() if "pass" in r]
    # Silence means more where the guard scanned: recorded (a program whose allocations were
    # all short-lived or unguarded may see no scan).
    unscanned = [n for n in ran if not (C.scans_of(rows[n]["gpusan"]) or 0)]
    ok = not failed and not skipped and not build_errors and bool(ran)
    notes = [f"{len(ran) - len(failed)}/{len(ran)} programs silent with native's output under canary mode"]
    if failed:
        notes.append("failed: " + ", ".join(failed))
    if not_run:
        notes.append("not run natively (not judged): " + ", ".join(f"{k} ({' '.join(v)[:100]})" for k, v in not_run.items()))
    if skipped:
        notes.append("skipped for time: " + ", ".join(skipped))
    if unscanned:
        notes.append(f"no guard scan reported in {len(unscanned)}: " + ", ".join(unscanned[:12]))
    if build_errors:
        notes.append("build failed: " + ", ".join(build_errors))
    C.write_result(args.result, {
        "case": CASE, "ok": ok, "expected": EXPECTED, "programs": rows, "not_run": not_run, "unscanned": unscanned,
        "build_errors": build_errors, "wheel_site": site, "seconds": clock.elapsed(),
        "native": {k: v["native"] for k, v in rows.items()}, "gpusan": {k: v["gpusan"] for k, v in rows.items()},
        "notes": "; ".join(notes)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
