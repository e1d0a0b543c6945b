#!/usr/bin/env python3
"""The check-mode overhead benchmark (bench/check-overhead.sh runs it on the GPU machine):
builds the workloads of bench/workloads/ and the third-party programs bench/third-party.sh
prepared, runs each natively, under `gpusan run --mode check` and under compute-sanitizer
memcheck, interleaved (native, gpusan, cs) for several rounds, and writes
check-overhead.json: per workload and metric the medians, ratios to native, errors each tool
reported, result correctness; a summary against the targets (geometric-mean slowdown,
worst kernel, speed-up over compute-sanitizer, metadata memory). The JSON is rewritten
after every run, so a run cut short by the deadline leaves its partial results.

Standard library only (it runs on the GPU machine).

  check_overhead.py --gpusan DIR/gpusan --out check-overhead.json [--rounds 3]
                    [--deadline EPOCH] [--work DIR] [--only REGEX] [--skip-build] [--count]

With --count (bench/check-overhead.sh: GPUSAN_BENCH_COUNT=1), after the timed rounds each
workload runs once more under `gpusan run --mode check --count-checks` (a measurement build:
not timed) and its entry gets "check_counts": the checks a naive checker would run
(accesses), the per-access and group checks that ran, and the fractions of checks the
optimizations removed, dynamic (1 - (checks + group_checks) / accesses) and static (the
same over the instrumented code), with a column in the table.

Every workload prints one JSON line last: {"bench", "ok", "params", "metrics"}; its first
metric is its headline time (ms, or us per launch), the one the targets judge.
"""

import argparse
import concurrent.futures
import datetime
import json
import math
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time

from benchproc import parse_bench, run

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# "baseline" (another build of gpusan, `--baseline-gpusan`) joins the rotation only when given:
# a change that must not cost anything is judged by gpusan / baseline in the same rounds.
TOOLS = ["native", "gpusan", "cs"]
TARGETS = {"geomean_slowdown_max": 1.15, "worst_slowdown_max": 2.0, "speedup_over_cs_min": 20.0,
           "bytes_per_allocation_max": 32, "fixed_bytes_max": 16 << 20}
NVCC_FLAGS = ["-O3", "-arch=sm_90", "-lineinfo"]
# The cuda workloads, in the order they run: cheap and bandwidth-bound first, the
# third-party programs and the PyTorch model (slowest under compute-sanitizer) last.
CUDA_WORKLOADS = ("saxpy", "stencil2d", "sgemm", "reduction", "histogram", "gather", "tiny_launches", "many_allocs")

# What the device side of gpusan's check mode allocates, from the sources (the report JSON
# carries the table's part as the counters device_table_bytes and device_table_moves):
# crates/runtime/src/registry.rs (DeviceEntry: 32 bytes per live or quarantined allocation;
# DeviceTableHeader: 32 bytes), crates/abi/src/table.rs (LOOKUP_CACHE_BYTES before the
# header), crates/abi/src/record.rs (error buffer: 16-byte header + ERROR_CAPACITY 64-byte
# records), crates/abi/src/heap.rs (a module that calls device malloc declares its own heap
# table, HEADER_BYTES + CAPACITY entries of 32 bytes, a module variable) and
# crates/inject/src/routes/table_memory.rs (one virtual range
# per context for RESERVED_ENTRIES entries, physical memory mapped as the table grows in
# multiples of the allocation granularity, never moved; without VMM, cuMemAlloc buffers of
# the cache plus next_power_of_two(32 + 32 n) bytes, at least for 1024 entries, outgrown ones
# kept since a kernel may still read them).
ENTRY_BYTES, HEADER_BYTES, RECORD_BYTES, ERROR_CAPACITY, MIN_TABLE_ENTRIES = 32, 32, 64, 4096, 1024


def abi_constant(name):
    """A `pub const NAME: u64 = <digits and shifts>;` of the ABI's table layout, read from the
    source so the model cannot drift from the runtime (the cache once grew without it)."""
    src = open(os.path.join(REPO, "crates/abi/src/table.rs")).read()
    m = re.search(rf"pub const {name}: u64 = ([0-9_ <]+);", src)
    if not m:
        raise SystemExit(f"check_overhead.py: {name} not found in crates/abi/src/table.rs")
    a, _, b = m.group(1).replace("_", "").partition("<<")
    return int(a) << int(b or 0)


LOOKUP_CACHE_BYTES = abi_constant("LOOKUP_CACHE_BYTES")
RESERVED_ENTRIES = 1 << 26
# cuMemGetAllocationGranularity (minimum) for pinned device memory on H100/H200.
GRANULE_BYTES = 2 << 20
HEAP_TABLE_BYTES = 16 + 32 * (1 << 16)
ERROR_BUFFER_BYTES = 16 + RECORD_BYTES * ERROR_CAPACITY
# The error buffer is mapped pinned host memory (cuMemHostAlloc) where the driver has it, as
# on the H100/H200: no device memory. Device memory holds it only where mapping fails.
ERROR_BUFFER_DEVICE_BYTES = 0


def next_pow2(n):
    return 1 << (n - 1).bit_length()


def fallback_table_bytes(n):
    """Without VMM: the current cuMemAlloc buffer and every outgrown one still allocated."""
    floor = next_pow2(HEADER_BYTES + ENTRY_BYTES * MIN_TABLE_ENTRIES)
    size = max(next_pow2(HEADER_BYTES + ENTRY_BYTES * n), floor)
    total, s = 0, size
    while s >= floor:
        total += LOOKUP_CACHE_BYTES + s
        s //= 2
    return total


def table_device_bytes(n):
    """Device bytes gpusan holds for its allocation table (lookup cache, header, entries)
    once n allocations are known: mapped granules (VMM), or cuMemAlloc buffers past the
    reservation."""
    need = LOOKUP_CACHE_BYTES + HEADER_BYTES + ENTRY_BYTES * n
    if n <= RESERVED_ENTRIES:
        mapped = -(-need // GRANULE_BYTES) * GRANULE_BYTES
        return {"path": "vmm", "entries_bytes": ENTRY_BYTES * n, "mapped_bytes": mapped, "held_bytes": mapped}
    # Past the reservation the table moves to buffers; the reservation's memory stays held.
    reserved = -(-(LOOKUP_CACHE_BYTES + HEADER_BYTES + ENTRY_BYTES * RESERVED_ENTRIES) // GRANULE_BYTES) * GRANULE_BYTES
    return {"path": "vmm, then cuMemAlloc past the reservation", "entries_bytes": ENTRY_BYTES * n,
            "mapped_bytes": reserved, "held_bytes": reserved + fallback_table_bytes(n)}


def device_bytes_held(n, table=table_device_bytes):
    return table(n)["held_bytes"] + ERROR_BUFFER_DEVICE_BYTES


def bound(n):
    return TARGETS["bytes_per_allocation_max"] * n + TARGETS["fixed_bytes_max"]


def crossover(held):
    """The first allocation count (in steps of 1,000, up to the reservation) where what the
    device holds passes 32 B per allocation + 16 MiB."""
    return next((k for k in range(1000, RESERVED_ENTRIES + 1, 1000) if held(k) > bound(k)), None)


def metadata_model(n):
    t = table_device_bytes(n)
    # Independent of n: the cache, the header, the error buffer, and at most one granule
    # of mapped memory beyond the entries.
    fixed = LOOKUP_CACHE_BYTES + HEADER_BYTES + GRANULE_BYTES + ERROR_BUFFER_DEVICE_BYTES
    held = device_bytes_held(n)
    fallback = lambda k: {"held_bytes": fallback_table_bytes(k)}  # noqa: E731
    return {
        "source": "computed from the layout in crates/abi/src + crates/runtime/src/registry.rs and the growth policy "
                  "of crates/inject/src/routes/table_memory.rs (a run's report has the table's bytes as the counter "
                  "device_table_bytes)",
        "allocations": n,
        "entry_bytes_per_allocation": ENTRY_BYTES,
        "fixed_bytes": fixed,
        "fixed_parts": {"lookup_cache": LOOKUP_CACHE_BYTES, "table_header": HEADER_BYTES,
                        "granule_rounding_at_most": GRANULE_BYTES,
                        "error_buffer": ERROR_BUFFER_DEVICE_BYTES,
                        "error_buffer_host_mapped": ERROR_BUFFER_BYTES,
                        "heap_table_per_module_calling_malloc": HEAP_TABLE_BYTES},
        "device_bytes_held": held,
        # held = 32 B x n + the rest; the rest never exceeds fixed_bytes.
        "device_bytes_beyond_entries": held - ENTRY_BYTES * n,
        "bound_bytes": bound(n),
        "within_bound": held <= bound(n) and fixed <= TARGETS["fixed_bytes_max"],
        "bound_exceeded_from_allocations": crossover(device_bytes_held),
        "held_at": {str(k): {"held_bytes": device_bytes_held(k), "bound_bytes": bound(k)}
                    for k in (1000, 20000, 100_000, 1_000_000, 10_000_000)},
        "table": t,
        "fallback_without_vmm": {
            "held_bytes": device_bytes_held(n, fallback),
            "bound_exceeded_from_allocations": crossover(lambda k: device_bytes_held(k, fallback)),
        },
        "note": "VMM path (driver and device support cuMemAddressReserve/cuMemCreate/cuMemMap): entries are 32 B "
                "each and the table holds one granule at most beyond them, at any count up to "
                f"{RESERVED_ENTRIES} entries. Entries are live and quarantined allocations, and mapped memory follows "
                "the peak count (never unmapped: a kernel may still read it). A module that calls device malloc adds "
                "its heap table (a module variable). Without VMM the table lives in doubling cuMemAlloc buffers and "
                "outgrown ones are kept (fallback_without_vmm). Host side the registry keeps an 80-byte map entry per "
                "allocation (registry.rs), not counted here",
    }


def cs_errors(text):
    m = re.search(r"ERROR SUMMARY: (\d+) error", text)
    return int(m.group(1)) if m else None


# ---------------------------------------------------------------------------- builds

def workload_list(args):
    """[{name, cmd (argv without the tool), build (argv or None), cwd, source}]"""
    bindir = os.path.join(args.work, "bin")
    out = []
    for name in CUDA_WORKLOADS:
        exe = os.path.join(bindir, name)
        out.append({"name": name, "kind": "cuda", "cmd": [exe], "exe": exe, "source": f"bench/workloads/{name}.cu",
                    "build": [args.nvcc, *NVCC_FLAGS, "-o", exe, os.path.join(REPO, "bench/workloads", name + ".cu")],
                    "cwd": REPO})
    manifest = os.path.join(args.third_party, "manifest.json")
    if os.path.exists(manifest):
        with open(manifest) as f:
            for p in json.load(f)["programs"]:
                exe = os.path.join(bindir, "tp_" + p["name"])
                nvcc_args = [a.replace("@REPO@", REPO) for a in p["nvcc_args"]]
                out.append({"name": p["name"], "kind": "third_party", "cmd": [exe, *p["args"]], "exe": exe,
                            "source": {k: p[k] for k in ("suite", "repo", "commit", "path", "dataset")},
                            "build": [args.nvcc, *NVCC_FLAGS, *nvcc_args, "-o", exe],
                            "cwd": os.path.join(args.third_party, p["name"])})
    out.append({"name": "torch_compile", "kind": "torch", "exe": None, "source": "bench/workloads/torch_compile.py",
                "cmd": [sys.executable, os.path.join(REPO, "bench/workloads/torch_compile.py")], "build": None,
                "cwd": REPO})
    if args.only:
        out = [w for w in out if re.search(args.only, w["name"])]
    return out


def build_all(workloads, args, logs):
    def one(w):
        if not w["build"]:
            return w["name"], None
        r = run(w["build"], 300, cwd=w["cwd"])
        with open(os.path.join(logs, f"build-{w['name']}.log"), "w") as f:
            f.write(f"$ {r['cmd']}\nrc={r['rc']}\n{r['stdout']}{r['stderr']}")
        return w["name"], None if r["rc"] == 0 else (r["stdout"] + r["stderr"])[-1500:]

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        return dict(pool.map(one, workloads))


# ---------------------------------------------------------------------------- summary

def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summarize_workload(entry):
    good = {t: [r for r in entry["runs"] if r["tool"] == t and r.get("ok")] for t in TOOLS}
    names = []
    for r in entry["runs"]:
        for k in r.get("metrics", {}):
            if k not in names:
                names.append(k)
    table = {}
    for k in names:
        row = {}
        for t in TOOLS:
            vals = [r["metrics"][k] for r in good[t] if k in r.get("metrics", {})]
            row[t] = round(statistics.median(vals), 6) if vals else None
            row[t + "_rounds"] = vals
        if row["native"]:
            if row["gpusan"] is not None:
                row["ratio_gpusan"] = round(row["gpusan"] / row["native"], 4)
            if row["cs"] is not None:
                row["ratio_cs"] = round(row["cs"] / row["native"], 4)
        if row["gpusan"] and row["cs"] is not None:
            row["cs_over_gpusan"] = round(row["cs"] / row["gpusan"], 2)
        if row.get("baseline") and row["gpusan"] is not None:
            row["gpusan_over_baseline"] = round(row["gpusan"] / row["baseline"], 4)
        table[k] = row
    entry["metrics"] = table
    entry["headline"] = names[0] if names else None
    # Correctness: every run that got to print its line printed ok=true (a tool that broke
    # the result is a finding even when the others were right); runs that crashed or timed
    # out are counted apart.
    printed = [r for r in entry["runs"] if r.get("metrics") is not None]
    entry["correct"] = all(r["ok"] for r in printed) if printed else None
    entry["failed_runs"] = [f"{r['tool']} round {r['round']}: rc={r['rc']}{' timed out' if r['timed_out'] else ''}, ok=false" for r in entry["runs"]
                            if "rc" in r and not r["ok"]]
    g = [r for r in entry["runs"] if r["tool"] == "gpusan" and "gpusan_errors" in r]
    entry["gpusan_errors"] = sum(r["gpusan_errors"] or 0 for r in g) if g else None
    b = [r for r in entry["runs"] if r["tool"] == "baseline" and "gpusan_errors" in r]
    if b:
        entry["baseline_errors"] = sum(r["gpusan_errors"] or 0 for r in b)
    c = [r for r in entry["runs"] if r["tool"] == "cs" and r.get("cs_errors") is not None]
    entry["cs_errors"] = sum(r["cs_errors"] for r in c) if c else None


def summary(doc):
    rows = []
    for name, e in doc["workloads"].items():
        h = e.get("headline")
        m = e.get("metrics", {}).get(h or "", {})
        rows.append((name, h, m.get("ratio_gpusan"), m.get("ratio_cs"), m.get("cs_over_gpusan")))
    ratios = [(n, r) for n, _, r, _, _ in rows if r]
    speedups = [s for *_, s in rows if s]
    gm = geomean([r for _, r in ratios])
    worst = max(ratios, key=lambda x: x[1]) if ratios else (None, None)
    sp = geomean(speedups)
    fps = {n: e["gpusan_errors"] for n, e in doc["workloads"].items() if e.get("gpusan_errors")}
    vs_base = {n: doc["workloads"][n].get("metrics", {}).get(h or "", {}).get("gpusan_over_baseline") for n, h, *_ in rows}
    vs_base = {n: v for n, v in vs_base.items() if v}
    wrong = [n for n, e in doc["workloads"].items() if e.get("correct") is False]
    failed = {n: e["failed_runs"] for n, e in doc["workloads"].items() if e.get("failed_runs")}
    missing = [n for n, _, r, _, s in rows if r is None or s is None]
    md = doc.get("metadata", {}).get("model", {})
    md_ok = md.get("within_bound")
    verdict = lambda v, ok: None if v is None else bool(ok)  # noqa: E731
    return {
        "headline_metrics": {n: h for n, h, *_ in rows},
        "workloads_measured": len(ratios),
        "workloads_missing_a_tool": missing,
        "geomean_slowdown": round(gm, 4) if gm else None,
        "worst_slowdown": {"workload": worst[0], "ratio": worst[1]},
        "geomean_speedup_over_cs": round(sp, 2) if sp else None,
        "gpusan_false_positives": fps,
        **({"gpusan_over_baseline": vs_base, "geomean_gpusan_over_baseline": round(geomean(vs_base.values()), 4)}
           if vs_base else {}),
        "wrong_results": wrong,
        "failed_runs": failed,
        "targets": TARGETS,
        "pass": {
            "geomean_slowdown": verdict(gm, gm is not None and gm <= TARGETS["geomean_slowdown_max"]),
            "worst_slowdown": verdict(worst[1], worst[1] is not None and worst[1] <= TARGETS["worst_slowdown_max"]),
            "speedup_over_cs": verdict(sp, sp is not None and sp >= TARGETS["speedup_over_cs_min"]),
            "no_false_positives": not fps,
            "results_correct": None if all(e.get("correct") is None for e in doc["workloads"].values()) else not wrong,
            "metadata_memory": md_ok,
            # The model assumes the VMM path; a run whose table moved used the fallback.
            "metadata_memory_any_count": None if not md else md["bound_exceeded_from_allocations"] is None
            and not doc.get("metadata", {}).get("reported", {}).get("device_table_moves"),
            "complete": not missing,
        },
    }


def check_counts_entry(rep):
    """What a counting run's report says (its "check_counts"), with the fractions removed;
    None when the report has none."""
    c = (rep or {}).get("check_counts")
    if not c:
        return None
    out = dict(c)
    acc = c.get("accesses", 0)
    out["dynamic_fraction_removed"] = (round(1 - (c.get("checks", 0) + c.get("group_checks", 0)) / acc, 6)
                                       if acc else None)
    sa = c.get("static_accesses", 0)
    left = sa - c.get("static_grouped", 0) - c.get("static_in_bounds", 0) + c.get("static_group_checks", 0)
    out["static_fraction_removed"] = round(1 - left / sa, 6) if sa else None
    return out


def table_text(doc):
    counted = any("check_counts" in e for e in doc["workloads"].values())
    lines = [f"{'workload':14s} {'headline metric':32s} {'native':>10s} {'gpusan':>10s} {'ratio':>7s} {'cs':>11s} "
             f"{'cs/nat':>8s} {'cs/gpusan':>9s}  gpusan-err ok" + ("  removed dyn/static" if counted else "")]

    def f(v, w, p=3):
        return f"{v:{w}.{p}f}" if isinstance(v, (int, float)) else f"{'-':>{w}s}"

    for name, e in doc["workloads"].items():
        if e.get("build_error"):
            lines.append(f"{name:14s} BUILD FAILED (see build log)")
            continue
        h = e.get("headline")
        m = e.get("metrics", {}).get(h or "", {})
        removed = ""
        if counted:
            cc = e.get("check_counts") or {}
            pct = lambda v: f"{100 * v:.1f}%" if isinstance(v, (int, float)) else "-"  # noqa: E731
            removed = f"  {pct(cc.get('dynamic_fraction_removed'))}/{pct(cc.get('static_fraction_removed'))}"
        lines.append(f"{name:14s} {str(h):32s} {f(m.get('native'), 10)} {f(m.get('gpusan'), 10)} "
                     f"{f(m.get('ratio_gpusan'), 7)} {f(m.get('cs'), 11)} {f(m.get('ratio_cs'), 8, 1)} "
                     f"{f(m.get('cs_over_gpusan'), 9, 1)}  {str(e.get('gpusan_errors')):>10s} {e.get('correct')}"
                     + removed)
    s = doc["summary"]
    if s.get("gpusan_over_baseline"):
        lines.append("gpusan / baseline build (same rounds): " + ", ".join(
            f"{n} {v:.3f}" for n, v in s["gpusan_over_baseline"].items())
            + f"; geomean {s['geomean_gpusan_over_baseline']}")
    lines.append(f"geomean slowdown {s['geomean_slowdown']} (<= {TARGETS['geomean_slowdown_max']}), worst "
                 f"{s['worst_slowdown']['ratio']} ({s['worst_slowdown']['workload']}; <= {TARGETS['worst_slowdown_max']}), "
                 f"speed-up over compute-sanitizer {s['geomean_speedup_over_cs']} (>= {TARGETS['speedup_over_cs_min']})")
    lines.append("pass: " + ", ".join(f"{k}={v}" for k, v in s["pass"].items()))
    md = doc.get("metadata", {})
    if md.get("model"):
        mm = md["model"]
        exceeded = mm["bound_exceeded_from_allocations"]
        fb = mm.get("fallback_without_vmm", {})
        lines.append(f"metadata (computed) for {mm['allocations']} allocations: {mm['device_bytes_held']} B held on the "
                     f"device ({mm['entry_bytes_per_allocation']} B/allocation + {mm['device_bytes_beyond_entries']} B: "
                     f"cache, header, granule rounding, error buffer; at most {mm['fixed_bytes']} B at any count; "
                     f"bound {mm['bound_bytes']} B); "
                     + (f"the bound is exceeded from {exceeded} allocations on" if exceeded else
                        f"within the bound at every count up to {RESERVED_ENTRIES} allocations")
                     + (f"; without VMM {fb['held_bytes']} B, exceeded from {fb['bound_exceeded_from_allocations']} "
                        "allocations on" if fb else ""))
    if md.get("reported"):
        lines.append(f"metadata (reported by the runtime, many_allocs): {md['reported']['device_table_bytes']} B for the "
                     f"table, moved {md['reported']['device_table_moves']} times")
    if md.get("measured"):
        lines.append(f"metadata (measured, many_allocs cudaMemGetInfo delta gpusan - native): {md['measured']}")
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
        "nvcc_flags": NVCC_FLAGS,
        "compute_sanitizer": sh([args.compute_sanitizer, "--version"]).splitlines()[-1:],
        "gpusan": args.gpusan, "gpusan_version": sh([args.gpusan, "--version"]),
        "git_head": sh(["git", "rev-parse", "HEAD"]),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpusan", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--baseline-gpusan", default="",
                    help="another gpusan build, run in the same rounds under check mode (tool 'baseline')")
    ap.add_argument("--compute-sanitizer", default="compute-sanitizer")
    ap.add_argument("--nvcc", default="nvcc")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cs-rounds", type=int, default=None,
                    help="compute-sanitizer only in the first N rounds (default: every round): its ratio is "
                         "far from any target, and its runs take as long as the other two tools' together, "
                         "so the time goes to more rounds of native and gpusan, whose ratio is close to one")
    ap.add_argument("--deadline", type=float, default=0, help="epoch seconds; runs stop before it")
    ap.add_argument("--timeout", type=float, default=150, help="seconds per run at most")
    ap.add_argument("--work", default="/tmp/gpusan-check-overhead")
    ap.add_argument("--third-party", default=os.path.join(REPO, "bench/work/third_party"))
    ap.add_argument("--only", default="", help="regex of workload names")
    ap.add_argument("--skip-build", action="store_true")
    ap.add_argument("--table-out", default="")
    ap.add_argument("--count", action="store_true",
                    help="after the timed rounds, one untimed run per workload under --count-checks")
    args = ap.parse_args()
    if args.baseline_gpusan:
        TOOLS.insert(2, "baseline")
    logs = os.path.join(args.work, "logs")
    os.makedirs(logs, exist_ok=True)
    os.makedirs(os.path.join(args.work, "bin"), exist_ok=True)

    def left():
        return args.deadline - time.time() if args.deadline else 1e9

    env_info = environment(args)
    workloads = workload_list(args)
    build_errors = {} if args.skip_build else build_all(workloads, args, logs)
    doc = {
        "what": "check-mode kernel-time overhead: each workload natively, under gpusan run --mode check and under "
                "compute-sanitizer memcheck, interleaved rounds; medians of the rounds of each program's own median "
                "over >= 20 CUDA-event-timed runs",
        "environment": env_info,
        "commands": {"native": "BIN", "gpusan": f"{args.gpusan} run --mode check --report-json R.json -- BIN",
                     **({"baseline": f"{args.baseline_gpusan} run --mode check --report-json R.json -- BIN"}
                        if args.baseline_gpusan else {}),
                     "cs": f"{args.compute_sanitizer} --tool memcheck BIN"},
        "rounds": args.rounds,
        "cs_rounds": args.rounds if args.cs_rounds is None else min(args.cs_rounds, args.rounds),
        "units": "metric names end in their unit; ratio_gpusan = gpusan / native, ratio_cs = cs / native, "
                 "cs_over_gpusan = cs / gpusan; the headline metric of each workload is its first",
        "third_party": os.path.exists(os.path.join(args.third_party, "manifest.json")),
        "workloads": {},
        "metadata": {"model": metadata_model(20000)},
        "finished": False,
    }
    for w in workloads:
        e = {"kind": w["kind"], "source": w["source"], "command": shlex.join(w["cmd"]), "runs": []}
        if build_errors.get(w["name"]):
            e["build_error"] = build_errors[w["name"]]
        doc["workloads"][w["name"]] = e

    def save():
        for e in doc["workloads"].values():
            summarize_workload(e)
        ma = doc["workloads"].get("many_allocs", {}).get("metrics", {}).get("many_allocs.mem_delta_mib", {})
        if ma.get("native") is not None and ma.get("gpusan") is not None:
            doc["metadata"]["measured"] = {
                "what": "device memory taken from before 20,000 cudaMallocs to after the last kernel "
                        "(cudaMemGetInfo), gpusan minus native: table (lookup cache, header, entries), error "
                        "buffer, instrumented modules; driver granularity is 2 MiB",
                "native_mib": ma["native"], "gpusan_mib": ma["gpusan"],
                "gpusan_extra_mib": round(ma["gpusan"] - ma["native"], 3),
                "allocations": 20000}
        # What the runtime itself says it holds for the table (report counters).
        runs = [r for r in doc["workloads"].get("many_allocs", {}).get("runs", [])
                if r.get("tool") == "gpusan" and "device_table_bytes" in (r.get("gpusan_counters") or {})]
        if runs:
            c = runs[-1]["gpusan_counters"]
            doc["metadata"]["reported"] = {
                "what": "many_allocs report counters: device memory held for the table, and how often it moved "
                        "(moves > 0: the cuMemAlloc fallback ran, VMM failed)",
                "device_table_bytes": c["device_table_bytes"], "device_table_moves": c.get("device_table_moves", 0)}
        doc["summary"] = summary(doc)
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, args.out)

    gpusan_ok = os.access(args.gpusan, os.X_OK)
    base_env = dict(os.environ)
    for rnd in range(args.rounds):
        for w in workloads:
            e = doc["workloads"][w["name"]]
            if e.get("build_error"):
                continue
            for tool in TOOLS:
                if tool == "cs" and args.cs_rounds is not None and rnd >= args.cs_rounds:
                    continue
                budget = min(args.timeout, left() - 5)
                if budget < 10 or (tool in ("gpusan", "baseline") and not gpusan_ok):
                    e["runs"].append({"tool": tool, "round": rnd,
                                      "skipped": "deadline" if budget < 10 else "no gpusan binary"})
                    continue
                # Own compile caches per tool: a Triton kernel cached by one tool is not
                # compiled (nor instrumented) again by the next.
                env = dict(base_env)
                cache = os.path.join(args.work, "cache", tool)
                env["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
                env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
                report = os.path.join(logs, f"{w['name']}-{tool}-{rnd}.json")
                if tool == "native":
                    cmd = w["cmd"]
                elif tool in ("gpusan", "baseline"):
                    if os.path.exists(report):
                        os.unlink(report)
                    exe = args.gpusan if tool == "gpusan" else args.baseline_gpusan
                    cmd = [exe, "run", "--mode", "check", "--report-json", report, "--", *w["cmd"]]
                else:
                    cmd = [args.compute_sanitizer, "--tool", "memcheck", *w["cmd"]]
                r = run(cmd, budget, env=env, cwd=REPO)
                with open(os.path.join(logs, f"{w['name']}-{tool}-{rnd}.log"), "w") as f:
                    f.write(f"$ {r['cmd']}\nrc={r['rc']} wall={r['wall_s']}s\n--- stdout\n{r['stdout']}\n"
                            f"--- stderr\n{r['stderr']}\n")
                parsed = parse_bench(r["stdout"])
                entry = {"tool": tool, "round": rnd, "rc": r["rc"], "wall_s": r["wall_s"], "timed_out": r["timed_out"],
                         "ok": bool(parsed and parsed.get("ok")) and r["rc"] == 0}
                if parsed:
                    entry["metrics"] = parsed.get("metrics", {})
                    e["params"] = parsed.get("params", {})
                else:
                    entry["stdout_tail"] = r["stdout"][-400:]
                if not entry["ok"]:
                    entry["stderr_tail"] = r["stderr"][-800:]
                if tool in ("gpusan", "baseline"):
                    try:
                        with open(report) as f:
                            rep = json.load(f)
                        s = rep.get("summary") or {}
                        entry["gpusan_errors"] = s.get("total")
                        entry["gpusan_by_kind"] = s.get("by_kind")
                        for k in ("unchecked_modules", "counters"):
                            if rep.get(k):
                                entry["gpusan_" + k] = rep[k]
                        # Metadata numbers, if a later runtime adds them to the report.
                        extra = {k: v for k, v in rep.items() if re.search(r"meta|table|memory", k)}
                        if extra:
                            entry["gpusan_metadata"] = extra
                    except (OSError, ValueError) as ex:
                        entry["gpusan_report_problem"] = str(ex)
                elif tool == "cs":
                    entry["cs_errors"] = cs_errors(r["stdout"] + r["stderr"])
                e["runs"].append(entry)
                print(f"[check-overhead] round {rnd} {w['name']:14s} {tool:6s} rc={r['rc']} ok={entry['ok']} "
                      f"wall={r['wall_s']}s", flush=True)
                save()
    if args.count:
        doc["check_counts_what"] = (
            "one untimed run per workload under gpusan run --mode check --count-checks: accesses = checks a naive "
            "checker (one per checked access) would run, checks = per-access checks that ran, group_checks = group "
            "range checks that ran (crates/passes/src/check/counting.rs); dynamic_fraction_removed = 1 - (checks + "
            "group_checks) / accesses; static_* and static_fraction_removed: the same over the instrumented code")
        doc["commands"]["count"] = f"{args.gpusan} run --mode check --count-checks --report-json R.json -- BIN"
        for w in workloads:
            e = doc["workloads"][w["name"]]
            budget = min(args.timeout, left() - 5)
            if e.get("build_error") or not gpusan_ok or budget < 10:
                e["check_counts"] = {"skipped": "build failed" if e.get("build_error") else
                                     "no gpusan binary" if not gpusan_ok else "deadline"}
                continue
            report = os.path.join(logs, f"{w['name']}-count.json")
            if os.path.exists(report):
                os.unlink(report)
            env = dict(base_env)
            cache = os.path.join(args.work, "cache", "count")
            env["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
            env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
            cmd = [args.gpusan, "run", "--mode", "check", "--count-checks", "--report-json", report, "--", *w["cmd"]]
            r = run(cmd, budget, env=env, cwd=REPO)
            with open(os.path.join(logs, f"{w['name']}-count.log"), "w") as f:
                f.write(f"$ {r['cmd']}\nrc={r['rc']} wall={r['wall_s']}s\n--- stdout\n{r['stdout']}\n"
                        f"--- stderr\n{r['stderr']}\n")
            try:
                with open(report) as f:
                    rep = json.load(f)
            except (OSError, ValueError) as ex:
                rep = None
                problem = str(ex)
            cc = check_counts_entry(rep) or {"missing": problem if rep is None else "no check_counts in the report"}
            cc.update({"rc": r["rc"], "wall_s": r["wall_s"], "timed_out": r["timed_out"],
                       "gpusan_errors": ((rep or {}).get("summary") or {}).get("total")})
            e["check_counts"] = cc
            print(f"[check-overhead] count {w['name']:14s} rc={r['rc']} removed "
                  f"{cc.get('dynamic_fraction_removed')} dynamic, {cc.get('static_fraction_removed')} static", flush=True)
            save()
    # Finished: no run was left out for lack of time.
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
