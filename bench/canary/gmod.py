#!/usr/bin/env python3
"""GMOD's Table 3 under `gpusan run --mode canary` (issue 17): the driver of
bench/reliability/canary_gmod.sh. Builds bench/canary/gmod_table3.cu twice, with PTX
(`-arch=sm_90`) and as machine code only (`-gencode arch=compute_90,code=sm_90`, checked with
`cuobjdump -lptx`: no PTX in it), and runs each scenario natively and under canary mode:

- coarse (cudaMalloc) single / seq / conc × over / under: `canary_overwrite` must be reported
  (and nothing else), naming the allocation (and, for the underflow, the next one), in both
  builds;
- coarse clean twins and fine (device malloc) clean twins: silent, exit 0, the deterministic
  output native printed, the guard having scanned;
- fine bug variants: recorded as known gaps (the plan, decision 10: the device heap is not
  guarded in this version); a finding there is noted, a miss is not a failure; the overflow
  right after the cudaMallocs (`--at-once`, the plan's known window): recorded;
- detection latency (recorded, not judged), GMOD's measure "from the occurrence of buffer
  overflow to detection", on one clock: the finding's `scan_gpu_ns` (the scan kernel's
  %globaltimer when it saw the bad bytes) minus the %globaltimer the overflowing thread read
  just before its store (`bad_store_gpu_ns`, printed by the program; its resolution is the
  timer's update period, `globaltimer_step_ns`). Beside it, on the host's clock, from the
  program's sight of the overflowing kernel's completion event to gpusan's host reading the
  finding (`detected_unix_us`), and the upper bound `since_clean_scan_ms`. For the coarse
  bugs of the machine-code build at `--canary-interval-ms 1`, `0.1` and `0.05` (`5` alone
  where fractions are refused; the PTX build at gpusan's default), next to GMOD's Table 3.

  gmod.py --gpusan G --nvcc NVCC --work DIR --result R.json [--budget 55]
"""

import argparse
import concurrent.futures
import os
import shlex
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

CASE = "canary_gmod"
EXPECTED = ("GMOD Table 3 (single, sequential, concurrent kernels) on cudaMalloc buffers: an overflow past the end and "
            "an underflow into the lower neighbour each reported as canary_overwrite, with PTX and machine code only; "
            "clean twins silent with native's output; device-malloc bugs a known gap; detection latency measured")
SOURCE = os.path.join(C.HERE, "gmod_table3.cu")
BUILDS = {"sass": ["-O2", "-gencode", "arch=compute_90,code=sm_90"], "ptx": ["-O2", "-arch=sm_90"]}
SHAPES = ("single", "seq", "conc")
COARSE_BUGS = [f"coarse_{s}_{v}" for s in SHAPES for v in ("over", "under")]
COARSE_CLEAN = [f"coarse_{s}_clean" for s in SHAPES]
FINE_BUGS = [f"fine_{s}_over" for s in SHAPES]
FINE_CLEAN = [f"fine_{s}_clean" for s in SHAPES]
# GMOD's Table 3 (GTX TITAN X, CUDA 7.5): kernel time and detection latency, ms.
GMOD_TABLE3 = {"single": {"fine": (0.947, 0.0145), "coarse": (0.9185, 0.01203)},
               "seq": {"fine": (1.273, 0.0098), "coarse": (1.223, 0.01508)},
               "conc": {"fine": (10.818, 0.0121), "coarse": (10.771, 0.016)}}


def build(args, name, flags):
    exe = os.path.join(args.work, f"gmod_table3_{name}")
    r = C.run([args.nvcc, *flags, *shlex.split(args.nvcc_extra), "-o", exe, SOURCE], 180)
    C.save_log(args.work, f"build-{name}", r)
    if r["rc"] != 0:
        return None, (r["stdout"] + r["stderr"])[-800:]
    return exe, None


# The underflow's buffers (gmod_table3 --under-bytes): 4096 - canary mode's default pad (32).
UNDER_BYTES = [4064]
# The overflow right after the cudaMallocs (gmod_table3 --at-once): the plan's known window
# (a device allocation's canary is written at once, but on the guard's stream), recorded.
AT_ONCE = "-at_once"
AT_ONCE_SCENARIOS = ("coarse_single_over", "coarse_seq_over")


def run_all(args, exes, others, clock):
    """Every run: native ones four at a time (their facts are outputs, exit codes and kernel
    times, which a spin-timed kernel keeps), gpusan's one at a time, so that nothing else
    competes with the guard while its latency is measured. Required runs first, then the
    second interval's, then the known gaps'; what the minute has no room for is skipped."""
    env = dict(os.environ, GPUSAN_CACHE_DIR=os.path.join(args.work, "cache"))
    skipped = []

    def one(label, cmd, limit=15):
        if clock.left() < 4:
            skipped.append(label)
            return None
        r = C.run(cmd, min(limit, clock.left() - 2), env=env, cwd=args.work)
        C.save_log(args.work, label, r)
        return r

    scen = COARSE_BUGS + COARSE_CLEAN + FINE_CLEAN + FINE_BUGS
    native = {}
    jobs = [(b, s) for s in scen for b in BUILDS]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for (b, s), r in zip(jobs, pool.map(lambda bs: one(f"native-{bs[0]}-{bs[1]}",
                                                           [exes[bs[0]], bs[1], "--hold-ms", "0",
                                                            "--under-bytes", str(args.under_bytes)]), jobs)):
            native[(b, s)] = r
    gp = {}
    main_iv = {"sass": "1", "ptx": None}
    plan = [(b, s, main_iv[b], "") for s in COARSE_BUGS + COARSE_CLEAN + FINE_CLEAN for b in BUILDS]
    plan += [("sass", s, other, f"-i{other}") for other in others for s in COARSE_BUGS]
    plan += [("sass", s, main_iv["sass"], AT_ONCE) for s in AT_ONCE_SCENARIOS]
    plan += [(b, s, main_iv[b], "") for s in FINE_BUGS for b in BUILDS]
    for b, s, iv, tag in plan:
        label = f"gpusan-{b}-{s}{tag}"
        rep = os.path.join(args.work, label + ".json")
        if os.path.exists(rep):
            os.unlink(rep)
        argv = [exes[b], s, "--hold-ms", str(args.hold_ms), "--under-bytes", str(args.under_bytes)]
        if tag == AT_ONCE:
            argv.append("--at-once")
        r = one(label, C.gpusan_cmd(args.gpusan, rep, argv, interval_ms=iv))
        if r is not None:
            gp[(b, s, iv, tag)] = (r, rep)

    return native, gp, skipped


def facts(native, gp):
    """What each run showed: native's outputs and kernel times; gpusan's report, findings
    and their times; the latency rows of the coarse bugs; the known gaps' outcomes."""
    res_native, res_gpusan, latency_rows, known_gaps, known_window = {}, {}, [], {}, {}
    for (b, s), r in native.items():
        if r is None:
            continue
        d = C.brief(r)
        d["output"] = C.deterministic(r["stdout"])
        d.update({k: v for k, v in C.fields(r["stdout"]).items() if k in ("kernel_ms", "write_to_kernel_end_ms")})
        d.update(C.fields(r["stdout"], "info:"))
        res_native[f"{b}-{s}"] = d
    for (b, s, iv, tag), (r, rep) in gp.items():
        d = C.brief(r)
        d.update(C.report_summary(rep))
        t = C.fields(r["stdout"])
        d["kernel_ms"] = t.get("kernel_ms")
        d.update(C.fields(r["stdout"], "info:"))
        full = C.read_report(rep)
        fs = C.canary_findings(full)
        if fs:
            lat = C.latency(fs[0], t.get("t_overflow_done_us"), t.get("t_main_us"), t.get("bad_store_gpu_ns"))
            # On the host's clock from the kernel's completion, plus the GPU's from the write
            # to the kernel's end: two clocks, an estimate beside the exact latency_ms.
            if "host_latency_ms" in lat and t.get("write_to_kernel_end_ms") is not None:
                lat["host_latency_from_write_ms"] = round(lat["host_latency_ms"] + t["write_to_kernel_end_ms"], 4)
            if t.get("t_exit_us") and t.get("t_overflow_done_us"):
                lat["overflow_to_exit_ms"] = round((t["t_exit_us"] - t["t_overflow_done_us"]) / 1e3, 3)
            d["latency"] = lat
        nat = native.get((b, s))
        d["same_output_as_native"] = nat is not None and C.deterministic(r["stdout"]) == C.deterministic(nat["stdout"])
        d["interval_ms"] = iv or "default"
        res_gpusan[f"{b}-{s}{tag}"] = d
        if tag == AT_ONCE:
            known_window[f"{b}-{s}"] = {"found": (d.get("by_kind") or {}).get(C.KIND, 0) > 0,
                                        "by_kind": d.get("by_kind"), "gpusan_rc": r["rc"]}
            continue
        if s in COARSE_BUGS:
            latency_rows.append({"build": b, "scenario": s, "interval_ms": iv or "default",
                                 "scan": d.get("latency", {}).get("scan"),
                                 **{k: d.get("latency", {}).get(k) for k in (
                                     "latency_ms", "basis", "host_latency_ms", "host_latency_from_write_ms",
                                     "scan_read_after_launch_ms", "latency_estimate_ms", "since_last_clean_scan_ms")},
                                 "globaltimer_step_ns": d.get("globaltimer_step_ns"),
                                 "kernel_ms": d["kernel_ms"]})
        if s in FINE_BUGS:
            known_gaps[f"{b}-{s}"] = {"found": (d.get("by_kind") or {}).get(C.KIND, 0) > 0, "by_kind": d.get("by_kind"),
                                      "native_rc": nat["rc"] if nat else None, "gpusan_rc": r["rc"]}

    return res_native, res_gpusan, latency_rows, known_gaps, known_window


def judge(checks, res_native, res_gpusan):
    """The required checks, added to `checks`."""
    def g(b, s):
        return res_gpusan.get(f"{b}-{s}")

    for b in BUILDS:
        for s in COARSE_BUGS:
            d = g(b, s)
            bk = (d or {}).get("by_kind") or {}
            checks[f"{b}:{s}:found"] = bool(d) and bk.get(C.KIND, 0) > 0 and set(bk) == {C.KIND}
            # The finding names the allocation by its size (4000 bytes past whose end the
            # loop wrote; for the underflow, the lower neighbour of --under-bytes and the
            # buffer after its canary, the one underflowed), and the first bad byte lies in
            # the float written (not always its first byte: a written byte equals the keyed
            # canary byte one time in 256).
            c = (d or {}).get("canary") or {}
            off, pad = c.get("offset_past_end"), c.get("canary_bytes")
            if "under" in s:
                ub = UNDER_BYTES[0]
                checks[f"{b}:{s}:names_both"] = c.get("allocation_size") == ub and c.get("next_size") == ub \
                    and off is not None and pad is not None and pad - 4 <= off < pad
            else:
                checks[f"{b}:{s}:names_allocation"] = c.get("allocation_size") == 4000 and off is not None \
                    and 0 <= off < 4
        for s in COARSE_CLEAN + FINE_CLEAN:
            d, n = g(b, s), res_native.get(f"{b}-{s}")
            checks[f"{b}:{s}:silent_as_native"] = bool(d and n) and d["rc"] == 0 and n["rc"] == 0 and \
                C.silent(d.get("by_kind")) and d["same_output_as_native"]
        for s in COARSE_BUGS:
            n = res_native.get(f"{b}-{s}")
            checks[f"{b}:{s}:native_ran"] = bool(n) and n["rc"] == 0
        # Silence proves something only where the guard ran: it scanned in every clean run.
        checks[f"{b}:guard_scanned_in_clean_runs"] = all((C.scans_of(g(b, s) or {}) or 0) > 0 for s in COARSE_CLEAN)


def table(checks, res_native, res_gpusan, latency_rows, known_gaps, notes):
    """GMOD's Table 3 beside ours; layout notes added to `notes`."""
    # The underflow lands in the lower neighbour's canary only where the two buffers are
    # adjacent under gpusan (the program prints it): say so when they were not.
    for k, d in res_gpusan.items():
        if "under" in k and d.get("adjacent") == 0:
            notes.append(f"{k}: the two buffers were not adjacent under gpusan (gap {d.get('gap')}): the underflow "
                         "missed the neighbour's canary by layout")
    table3 = {}
    for s in SHAPES:
        for grain in ("coarse", "fine"):
            bug = f"{grain}_{s}_over"
            nat = res_native.get(f"sass-{bug}", {})
            rows = [r for r in latency_rows if r["scenario"].startswith(f"{grain}_{s}_")]
            table3[f"{grain}_{s}"] = {
                "gmod_kernel_ms": GMOD_TABLE3[s][grain][0], "gmod_latency_ms": GMOD_TABLE3[s][grain][1],
                "native_kernel_ms": nat.get("kernel_ms"),
                "gpusan_latency_ms": {str(r["interval_ms"]): r["latency_ms"] for r in rows if r["build"] == "sass"
                                      and r["scenario"].endswith("_over")},
                "gpusan_host_latency_ms": {str(r["interval_ms"]): r["host_latency_ms"] for r in rows
                                           if r["build"] == "sass" and r["scenario"].endswith("_over")},
                "gpusan_latency_upper_bound_ms": {str(r["interval_ms"]): r["since_last_clean_scan_ms"] for r in rows
                                                  if r["build"] == "sass" and r["scenario"].endswith("_over")},
                "detected": (all(checks.get(f"{b}:{bug}:found") for b in BUILDS) if grain == "coarse"
                             else {k: v["found"] for k, v in known_gaps.items() if k.endswith(bug)})}
    return table3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpusan", default=os.environ.get("GPUSAN", ""))
    ap.add_argument("--nvcc", default=os.environ.get("NVCC", "nvcc"))
    ap.add_argument("--nvcc-extra", default=os.environ.get("CANARY_NVCC_EXTRA", ""),
                    help="more nvcc arguments, one string (e.g. -L of a toolchain's lib)")
    ap.add_argument("--work", default=os.environ.get("WORK", "/tmp/canary-gmod"))
    ap.add_argument("--result", default=os.environ.get("RESULT", "/tmp/canary-gmod/result.json"))
    ap.add_argument("--budget", type=float, default=float(os.environ.get("CANARY_CASE_S", "54")))
    ap.add_argument("--hold-ms", type=int, default=40)
    ap.add_argument("--under-bytes", type=int, default=int(os.environ.get("CANARY_UNDER_BYTES", UNDER_BYTES[0])),
                    help="the underflow's buffers: 4096 minus canary mode's pad (default pad 32)")
    args = ap.parse_args()
    UNDER_BYTES[0] = args.under_bytes
    os.makedirs(args.work, exist_ok=True)
    clock = C.Clock(args.budget)

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        built = dict(zip(BUILDS, pool.map(lambda kv: build(args, *kv), BUILDS.items())))
    exes = {k: v[0] for k, v in built.items()}
    build_facts = {k: {"error": v[1]} if v[1] else {"ptx_entries": C.ptx_entries(v[0], args.nvcc)}
                   for k, v in built.items()}
    checks = {"sass_build_has_no_ptx": build_facts["sass"].get("ptx_entries") == 0,
              "ptx_build_has_ptx": (build_facts["ptx"].get("ptx_entries") or 0) > 0}
    if not C.gpu_present():
        return C.skipped_result(args.result, CASE, EXPECTED, "no GPU on this machine (or CANARY_DRY=1)",
                                builds=build_facts, checks_without_gpu=checks)
    if not os.access(args.gpusan or "", os.X_OK):
        return C.skipped_result(args.result, CASE, EXPECTED, f"no gpusan binary at {args.gpusan!r}", builds=build_facts)
    if not all(exes.values()):
        C.write_result(args.result, {"case": CASE, "ok": False, "expected": EXPECTED, "builds": build_facts,
                                     "notes": "a build failed"})
        return 0
    # Fractions of a millisecond for the interval, if gpusan takes them.
    frac_ok, frac_why = C.interval_accepts(args.gpusan, "0.1", args.work)
    # The main runs of the machine-code build name 1 ms (the plan's default) explicitly; more
    # intervals for the latency of its coarse bugs: 0.1 and 0.05 ms (the shortest gpusan
    # takes), or 5 where fractions are refused.
    others = ["0.1", "0.05"] if frac_ok else ["5"]
    intervals = ["1", *others]

    native, gp, skipped = run_all(args, exes, others, clock)

    res_native, res_gpusan, latency_rows, known_gaps, known_window = facts(native, gp)
    judge(checks, res_native, res_gpusan)
    notes = []
    table3 = table(checks, res_native, res_gpusan, latency_rows, known_gaps, notes)
    # A required run skipped for time fails its check; the latency and known-gap runs may be.
    ok = all(checks.values())
    if skipped:
        notes.append(f"skipped for time: {', '.join(skipped)}")
    if not frac_ok:
        notes.append(f"--canary-interval-ms 0.1 refused ({frac_why.strip()[-160:]}): 5 instead")
    bounds = [r["since_last_clean_scan_ms"] for r in latency_rows if r["since_last_clean_scan_ms"] is not None]
    scans = sorted({str(r["scan"]) for r in latency_rows})
    lat_ok = [r["latency_ms"] for r in latency_rows if r["latency_ms"] is not None]
    for iv in ["default", *intervals]:
        on = [r for r in latency_rows if str(r["interval_ms"]) == iv and r["latency_ms"] is not None]
        if not on:
            continue
        lat, basis = [r["latency_ms"] for r in on], sorted({str(r["basis"]) for r in on})
        host = [r["host_latency_ms"] for r in on if r["host_latency_ms"] is not None]
        line = (f"latency ms at interval {iv} (the overflowing store to the scan that saw it; {'; '.join(basis)}): "
                f"median {statistics.median(lat):.4f}, max {max(lat):.4f} over {len(lat)} runs")
        if host:
            line += (f"; host's (the kernel's completion seen to the finding read): median "
                     f"{statistics.median(host):.4f}, max {max(host):.4f}")
        notes.append(line)
    steps = sorted({r["globaltimer_step_ns"] for r in latency_rows if r.get("globaltimer_step_ns")})
    if lat_ok:
        notes.append(f"GMOD's Table 3: 0.0098-0.016 ms; %globaltimer's step here {steps} ns")
    elif any(checks.get(f"sass:{s}:found") for s in COARSE_BUGS):
        notes.append("the findings carry no absolute detection time: the latency itself is not measurable (see "
                     "latency_estimate_ms, anchored at main)")
    if bounds:
        notes.append(f"upper bound of write-to-detection (since_clean_scan_ms, whole ms): median "
                     f"{statistics.median(bounds)}, max {max(bounds)} over {len(bounds)} runs; found by scans {scans}")
    if known_window:
        notes.append("overflow right after cudaMalloc (known window): found in "
                     f"{sum(v['found'] for v in known_window.values())}/{len(known_window)}")
    gaps = [k for k, v in known_gaps.items() if v["found"]]
    notes.append(f"fine-grained (device malloc) bugs: known gap, found in {len(gaps)}/{len(known_gaps)}")
    failed = [k for k, v in checks.items() if not v]
    if failed:
        notes.append("failed: " + ", ".join(failed[:12]))
    C.write_result(args.result, {
        "case": CASE, "ok": ok, "expected": EXPECTED, "checks": checks, "builds": build_facts,
        "intervals": {"sass": intervals, "ptx": "gpusan's default (1 ms by the plan)", "fractions_accepted": frac_ok},
        "table3": table3, "latency": latency_rows, "known_gaps": known_gaps,
        "known_window_overflow_at_once": known_window,
        "native": res_native, "gpusan": res_gpusan, "seconds": clock.elapsed(), "notes": "; ".join(notes)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
