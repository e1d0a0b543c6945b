#!/usr/bin/env python3
"""The Python case suite (tests/cases/python/): kernels that reach the GPU through NVRTC
(CuPy, cuda.core, PyTorch's jiterator), nvJitLink (numba-cuda), Triton's ptxas and nvcc
(torch load_inline), each with a planted out-of-bounds write, a use after free and a clean
twin. Each (case, scenario) runs natively, under `gpusan run --mode check` twice (first
with empty caches, then with the caches the first left: gpusan's and the program's own),
and under compute-sanitizer memcheck; runs go in parallel (they are judged, not timed).

    bench/python_suite.py --gpusan DIR/gpusan --out FILE.json [--work DIR] [--jobs N]

Judging: a bug run passes when every expected kind is reported and nothing else
(kernel_fault accepted); a clean run when nothing is reported and it printed what the native
run printed. compute-sanitizer detects a bug when its ERROR SUMMARY is not 0, and is silent
on a clean case when it is 0.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CASES = REPO / "tests" / "cases" / "python"
ACCEPT = {"kernel_fault"}


def header(path):
    h = {}
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        m = re.match(r"#\s*([a-z-]+):\s*(.*)", line)
        if m:
            h[m.group(1)] = m.group(2).strip()
    env = dict(kv.split("=", 1) for kv in h.get("env", "").split())
    scenarios = h.get("cases", "oob uaf clean").split()
    expect = {s: h.get(f"expect-{s}", "").split() for s in scenarios}
    return scenarios, expect, env


def run(cmd, env, timeout):
    t = time.time()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        out, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = ((e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")), 124
    lines = [l for l in out.splitlines() if " done " in l]
    return {"rc": rc, "line": lines[-1] if lines else None, "s": round(time.time() - t, 2), "tail": out[-1500:]}


def gpusan_run(gpusan, path, scenario, env, report, timeout):
    cmd = [gpusan, "run", "--mode", "check", "--report-json", str(report), "--", sys.executable, str(path), scenario]
    r = run(cmd, env, timeout)
    try:
        doc = json.loads(Path(report).read_text())
    except Exception as e:  # no report: recorded, judged a failure
        r["report_error"] = str(e)
        return r
    r["kinds"] = doc.get("summary", {}).get("by_kind", {})
    r["coverage"] = doc.get("coverage", {}).get("totals")
    r["unchecked_kernels"] = [
        {"name": k.get("name"), "why": k.get("unchecked")} for k in doc.get("coverage", {}).get("kernels", []) if k.get("unchecked")
    ]
    r["kernels"] = [
        {"name": k.get("name"), "launches": k.get("launches"), "route": k.get("checked_by")}
        for k in doc.get("coverage", {}).get("kernels", []) if not k.get("unchecked")
    ]
    r["findings"] = [
        {"kind": e.get("kind"), "kernel": e.get("details", {}).get("kernel"), "message": e.get("message")}
        for e in doc.get("errors", [])
    ][:5]
    return r


def judge(r, expect, native):
    kinds = set(r.get("kinds", {}))
    if "kinds" not in r:
        return False
    if expect:
        return set(expect) <= kinds and kinds <= set(expect) | ACCEPT
    return not kinds and r["rc"] == native["rc"] and r["line"] == native["line"]


def one(args, path, scenario, expect, extra_env, work):
    name = f"{path.stem}-{scenario}"
    home = work / "home" / name
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, HOME=str(home), PYTHONUNBUFFERED="1", **extra_env)
    # The program's build of its extension (torch load_inline) is shared: not a kernel cache.
    env["TORCH_EXTENSIONS_DIR"] = str(work / "torch-extensions")
    for k in ("CUPY_CACHE_DIR", "NUMBA_CACHE_DIR", "TRITON_CACHE_DIR", "GPUSAN_CACHE_DIR", "GPUSAN_PROGRAM_CACHES"):
        env.pop(k, None)
    native_env = dict(env, HOME=str(work / "home" / f"{name}-native"))
    Path(native_env["HOME"]).mkdir(parents=True, exist_ok=True)
    native = run([sys.executable, str(path), scenario], native_env, args.timeout)
    first = gpusan_run(args.gpusan, path, scenario, env, work / f"{name}-1.json", args.timeout)
    cached = gpusan_run(args.gpusan, path, scenario, env, work / f"{name}-2.json", args.timeout)
    row = {"case": path.stem, "scenario": scenario, "expect": expect or "clean", "native": native,
           "gpusan_first": first, "gpusan_cached": cached}
    row["gpusan_first"]["pass"] = judge(first, expect, native)
    row["gpusan_cached"]["pass"] = judge(cached, expect, native)
    if args.compute_sanitizer:
        cs_env = dict(env, HOME=str(work / "home" / f"{name}-cs"))
        Path(cs_env["HOME"]).mkdir(parents=True, exist_ok=True)
        cs = run([args.compute_sanitizer, "--tool", "memcheck", sys.executable, str(path), scenario], cs_env, args.cs_timeout)
        m = re.findall(r"ERROR SUMMARY: (\d+) error", cs["tail"])
        cs["errors"] = int(m[-1]) if m else None
        cs["verdict"] = (
            "timeout" if cs["rc"] == 124 else
            ("detected" if cs["errors"] else "missed") if expect else
            ("silent" if cs["errors"] == 0 else "false_positive")
        )
        row["compute_sanitizer"] = cs
    for r in (row["native"], row["gpusan_first"], row["gpusan_cached"]):
        if r.get("pass", True) and r["rc"] == 0:
            r.pop("tail", None)
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpusan", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/gpusan-python-suite")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--timeout", type=int, default=180)
    ap.add_argument("--cs-timeout", type=int, default=300)
    ap.add_argument("--compute-sanitizer", default=shutil.which("compute-sanitizer"))
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    jobs = []
    for path in sorted(CASES.glob("*.py")):
        if args.only and not re.search(args.only, path.stem):
            continue
        scenarios, expect, env = header(path)
        for s in scenarios:
            jobs.append((path, s, expect[s], env))
    # The first run of a case builds what it shares with its other scenarios (the
    # extension of torch load_inline): one scenario of each case first, then the rest.
    rows = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        seen, firsts = set(), []
        for j in jobs:
            if j[0] not in seen:
                seen.add(j[0])
                firsts.append(j)
        rest = [j for j in jobs if j not in firsts]
        for batch in (firsts, rest):
            futures = [pool.submit(one, args, p, s, e, env, work) for p, s, e, env in batch]
            for f in concurrent.futures.as_completed(futures):
                try:
                    rows.append(f.result())
                except Exception as e:  # recorded, never lost
                    rows.append({"error": repr(e)})
                # What is done so far, should the call be cut short.
                Path(args.out).write_text(json.dumps({"partial": True, "rows": rows}, indent=1))
    rows.sort(key=lambda r: (r.get("case", ""), r.get("scenario", "")))
    summary = {}
    for key in ("gpusan_first", "gpusan_cached"):
        bug = [r for r in rows if "case" in r and r["expect"] != "clean"]
        clean = [r for r in rows if "case" in r and r["expect"] == "clean"]
        summary[key] = {
            "bugs_found": sum(r[key]["pass"] for r in bug), "bugs": len(bug),
            "clean_silent": sum(r[key]["pass"] for r in clean), "clean": len(clean),
        }
    cs_rows = [r for r in rows if "compute_sanitizer" in r]
    summary["compute_sanitizer"] = {
        "bugs_detected": sum(r["compute_sanitizer"]["verdict"] == "detected" for r in cs_rows),
        "bugs": sum(r["expect"] != "clean" for r in cs_rows),
        "clean_silent": sum(r["compute_sanitizer"]["verdict"] == "silent" for r in cs_rows),
        "clean": sum(r["expect"] == "clean" for r in cs_rows),
        "timeouts": sum(r["compute_sanitizer"]["verdict"] == "timeout" for r in cs_rows),
    }
    doc = {"command": " ".join(sys.argv), "summary": summary, "rows": rows}
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print(json.dumps(summary, indent=1))
    for r in rows:
        if "case" not in r:
            print("ERROR", r)
            continue
        cs = r.get("compute_sanitizer", {}).get("verdict", "-")
        print(f"{r['case']:16} {r['scenario']:6} gpusan {'PASS' if r['gpusan_first']['pass'] else 'FAIL'}"
              f"/{'PASS' if r['gpusan_cached']['pass'] else 'FAIL'} kinds {sorted(r['gpusan_first'].get('kinds', {}))} "
              f"cs {cs}  native rc {r['native']['rc']} ({r['native']['s']}s) gpusan {r['gpusan_first']['s']}s/{r['gpusan_cached']['s']}s")


if __name__ == "__main__":
    main()
