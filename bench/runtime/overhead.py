#!/usr/bin/env python3
"""Runs the overhead microbenchmarks of bench/runtime/ natively and under `gpusan run`,
alternating (native, gpusan, native, gpusan, ...), and writes runtime-overhead.json with each
metric's native and gpusan medians, the ratio gpusan/native, the difference, and the spread
between the native rounds (differences smaller than that spread are noise).

Called by bench/gpu-suite.sh; standard library only.

  overhead.py --bin BUILD_DIR --gpusan DIR/gpusan --out runtime-overhead.json
              [--benches launch,malloc,copy,kernel] [--rounds 2] [--mode api]
              [--deadline EPOCH] [--logs DIR] [--env-json FILE]

Each benchmark prints one JSON line last: {"bench", "ok", "params", "metrics": {name: value}}.
"""

import argparse
import json
import os
import statistics
import sys
import time

# The shared process helper lives in bench/ (this script runs as bench/runtime/overhead.py).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchproc import parse_bench, run  # noqa: E402

LAUNCH_TARGET_US = 1.0


def summarize(native_runs, gpusan_runs):
    """Per metric: medians over rounds, ratio, delta, native spread."""
    names = []
    for r in native_runs + gpusan_runs:
        for k in r.get("metrics", {}):
            if k not in names:
                names.append(k)
    table = {}
    for k in names:
        nv = [r["metrics"][k] for r in native_runs if k in r.get("metrics", {})]
        gv = [r["metrics"][k] for r in gpusan_runs if k in r.get("metrics", {})]
        row = {"native": round(statistics.median(nv), 4) if nv else None,
               "gpusan": round(statistics.median(gv), 4) if gv else None,
               "native_rounds": nv, "gpusan_rounds": gv}
        if nv and gv and row["native"]:
            row["ratio"] = round(row["gpusan"] / row["native"], 4)
            row["delta"] = round(row["gpusan"] - row["native"], 4)
        if len(nv) > 1 and row["native"]:
            row["native_spread_rel"] = round((max(nv) - min(nv)) / row["native"], 4)
        table[k] = row
    return table


KEY_METRICS = ("empty.", "saxpy4k.host", "saxpy4k.device", "size_256.", "size_65536.", "size_1048576.",
               "size_67108864.", "batch_", "memcpy_", "memset_", "saxpy_64M.ms", "saxpy_64M.gb")


def format_table(doc, full=False):
    lines = [f"{'metric':44s} {'native':>12s} {'gpusan':>12s} {'ratio':>8s} {'delta':>10s} {'spread':>7s}"]

    def f(v, w, p=3):
        return f"{v:{w}.{p}f}" if isinstance(v, (int, float)) else f"{'-':>{w}s}"

    for name, entry in doc["benches"].items():
        if entry.get("error"):
            lines.append(f"{name:44s} {entry['error']}")
        for k, row in entry.get("metrics", {}).items():
            if not full and not k.startswith(KEY_METRICS):
                continue
            lines.append(f"{name + ':' + k:44s} {f(row['native'], 12)} {f(row['gpusan'], 12)} {f(row.get('ratio'), 8)} "
                         f"{f(row.get('delta'), 10)} {f(row.get('native_spread_rel'), 7, 2)}")
        fp = entry.get("false_positives")
        if fp:
            lines.append(f"{name:44s} gpusan reported {fp} errors on this (clean) benchmark")
    lo = doc["launch_overhead"]
    verdict = {True: "met", False: "NOT met", None: "not measured"}[lo["target_met"]]
    lines.append(f"launch overhead: {lo['delta_us']} us per launch (target <= {lo['target_us']} us): {verdict}"
                 f"{'' if full else '   (key metrics only; all in the JSON)'}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--gpusan", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--benches", default="launch,malloc,copy,kernel")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--mode", default="api")
    ap.add_argument("--deadline", type=float, default=0)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--logs", default="")
    ap.add_argument("--env-json", default="")
    ap.add_argument("--table-out", default="", help="also write the table to this file")
    ap.add_argument("--full-table", action="store_true", help="every metric in the table, not the key ones")
    args = ap.parse_args()
    gpusan_ok = os.access(args.gpusan, os.X_OK)
    if args.logs:
        os.makedirs(args.logs, exist_ok=True)

    def left():
        return args.deadline - time.time() if args.deadline else 1e9

    results = {}
    for name in [b for b in args.benches.split(",") if b]:
        exe = os.path.join(args.bin, name)
        entry = {"bench": name, "runs": []}
        results[name] = entry
        if not os.access(exe, os.X_OK):
            entry["error"] = "not built"
            continue
        native_ok, gpusan_ok_runs = [], []
        for rnd in range(args.rounds):
            for tool in ("native", "gpusan"):
                if tool == "gpusan" and not gpusan_ok:
                    continue
                budget = min(args.timeout, left())
                if budget < 10:
                    entry["runs"].append({"tool": tool, "round": rnd, "skipped": "suite time budget spent"})
                    continue
                report = os.path.join(args.logs or "/tmp", f"bench-{name}-{rnd}.json")
                if os.path.exists(report):
                    os.unlink(report)
                cmd = [exe] if tool == "native" else [args.gpusan, "run", "--mode", args.mode, "--leak-check", "full",
                                                      "--report-json", report, "--", exe]
                r = run(cmd, budget)
                if args.logs:
                    with open(os.path.join(args.logs, f"bench-{name}-{tool}-{rnd}.log"), "w") as f:
                        f.write(f"$ {r['cmd']}\nrc={r['rc']}\n--- stdout\n{r['stdout']}\n--- stderr\n{r['stderr']}\n")
                parsed = parse_bench(r["stdout"])
                run_entry = {"tool": tool, "round": rnd, "rc": r["rc"], "wall_s": r["wall_s"], "cmd": r["cmd"],
                             "ok": bool(parsed and parsed.get("ok")) and r["rc"] == 0,
                             "stderr_tail": r["stderr"][-600:]}
                if parsed:
                    run_entry["metrics"] = parsed.get("metrics", {})
                    entry["params"] = parsed.get("params", {})
                if tool == "gpusan":
                    try:
                        with open(report) as f:
                            doc = json.load(f)
                        s = doc.get("summary") or {}
                        run_entry["gpusan_errors"] = s.get("total")
                        run_entry["gpusan_by_kind"] = s.get("by_kind")
                    except (OSError, ValueError) as e:
                        run_entry["gpusan_report_problem"] = str(e)
                entry["runs"].append(run_entry)
                if run_entry["ok"]:
                    (native_ok if tool == "native" else gpusan_ok_runs).append(run_entry)
                print(f"bench {name:7s} {tool:6s} round {rnd} rc={r['rc']} ok={run_entry['ok']} wall={r['wall_s']}s",
                      flush=True)
        entry["metrics"] = summarize(native_ok, gpusan_ok_runs)
        entry["false_positives"] = sum((r.get("gpusan_errors") or 0) for r in gpusan_ok_runs)

    launch = results.get("launch", {}).get("metrics", {}).get("empty.host_us_per_launch", {})
    env = {}
    if args.env_json and os.path.exists(args.env_json):
        with open(args.env_json) as f:
            env = json.load(f)
    doc = {
        "what": "gpusan runtime overhead: microbenchmarks natively and under `gpusan run`, alternating rounds",
        "environment": env,
        "commands": {"native": "BIN", "gpusan": f"{args.gpusan} run --mode {args.mode} --leak-check full "
                                                 "--report-json REPORT.json -- BIN"},
        "mode": args.mode,
        "rounds": args.rounds,
        "units": "metric names end in their unit: _ns, _us, ms, gb_per_s; ratio = gpusan / native",
        "launch_overhead": {
            "metric": "empty.host_us_per_launch (host time of one launch call, median of 25 batches of 1000)",
            "native_us": launch.get("native"), "gpusan_us": launch.get("gpusan"), "delta_us": launch.get("delta"),
            "target_us": LAUNCH_TARGET_US,
            "target_met": None if launch.get("delta") is None else launch["delta"] <= LAUNCH_TARGET_US,
        },
        "benches": results,
    }
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, args.out)

    table = format_table(doc, args.full_table)
    if not args.table_out:
        print(table)
    else:
        with open(args.table_out, "w") as f:
            f.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
