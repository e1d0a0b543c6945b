#!/usr/bin/env bash
# Runs on the GPU machine (issue 17): where canary mode's cost per launch comes from. The
# tiny_launches workload (cudart, 1000 launches of a one-warp kernel per run) and a
# driver-API loop of empty launches (bench/fence/cotenants.cpp `nops`), natively, under
# --mode canary, under --mode api, and under canary with the guard launching no kernels
# (GPUSAN_CANARY_DIAG=no_kernels) and with launches going straight from the stand-in to the
# driver (GPUSAN_CANARY_DIAG=bare_launch: the stand-in's frame alone); ROUNDS rounds, alternating. Then one canary run of each
# with $GPUSAN_PROBE_OUT: which of gpusan's stand-ins ran how often (per launch).
# $LAUNCH_COST_TOOLS (comma-separated) runs only those tools: more rounds of fewer tools
# resolve a smaller cost against the spread between processes. Writes $OUT/launch-cost.json.
#
#   bench/canary/launch-cost.sh DIR [ROUNDS]    DIR: gpusan, libgpusan_inject.so
set -uo pipefail
dir=$(cd "$1" && pwd)
rounds=${2:-5}
out=${OUT:-/tmp/out}
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
export PATH=/usr/local/cuda/bin:$PATH
nvcc -O3 -arch=sm_90 -lineinfo -o "$work/tiny" "$repo/bench/workloads/tiny_launches.cu" || exit 1
nvcc -O2 -o "$work/cot" "$repo/bench/fence/cotenants.cpp" -lcuda || exit 1
mkdir -p "$work/probe-tiny" "$work/probe-nops"
python3 - "$dir/gpusan" "$work" "$rounds" "$out/launch-cost.json" <<'PY'
import json, os, re, statistics, subprocess, sys, glob
gpusan, work, rounds, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
tools = {"native": [], "canary": [gpusan, "run", "--mode", "canary", "--"],
         "api": [gpusan, "run", "--mode", "api", "--"],
         "canary_no_kernels": [gpusan, "run", "--mode", "canary", "--"],
         "canary_bare_launch": [gpusan, "run", "--mode", "canary", "--"]}
programs = {"tiny": [os.path.join(work, "tiny")], "nops": [os.path.join(work, "cot"), "nops", "200000"]}
only = [t for t in os.environ.get("LAUNCH_COST_TOOLS", "").split(",") if t]
if only:
    tools = {t: c for t, c in tools.items() if t in only or t == "native"}
res = {p: {t: [] for t in tools} for p in programs}
def metric(prog, text):
    if prog == "tiny":
        m = re.search(r'"tiny\.host_us_per_launch":\s*([0-9.]+)', text)
    else:
        m = re.search(r"us_per_launch ([0-9.]+)", text)
    return float(m.group(1)) if m else None
for r in range(rounds):
    order = list(tools) if r % 2 == 0 else list(reversed(list(tools)))
    for prog, cmd in programs.items():
        for t in order:
            env = dict(os.environ)
            if t == "canary_no_kernels":
                env["GPUSAN_CANARY_DIAG"] = "no_kernels"
            if t == "canary_bare_launch":
                env["GPUSAN_CANARY_DIAG"] = "bare_launch"
            p = subprocess.run(tools[t] + cmd, capture_output=True, text=True, timeout=120, env=env)
            res[prog][t].append(metric(prog, p.stdout))
probes = {}
for prog, cmd in programs.items():
    env = dict(os.environ, GPUSAN_PROBE_OUT=os.path.join(work, f"probe-{prog}"))
    subprocess.run(tools["canary"] + cmd, capture_output=True, text=True, timeout=120, env=env)
    calls = {}
    for f in glob.glob(os.path.join(work, f"probe-{prog}", "*.json")):
        d = json.load(open(f))
        wc = d.get("wrapper_calls") or {}
        items = wc.items() if isinstance(wc, dict) else [(x.get("symbol") or x.get("name"), x.get("count")) for x in wc]
        for k, v in items:
            calls[k] = calls.get(k, 0) + (v or 0)
    probes[prog] = dict(sorted(calls.items(), key=lambda kv: -kv[1])[:40])
summary = {}
for prog in programs:
    med = {t: (statistics.median([v for v in vs if v is not None]) if any(v is not None for v in vs) else None)
           for t, vs in res[prog].items()}
    summary[prog] = {"median_us_per_launch": med,
                     "ratio": {t: round(med[t] / med["native"], 4) for t in tools if med[t] and med["native"]}}
doc = {"what": "canary mode's host cost per launch: tiny_launches (cudart) and a driver-API loop of empty launches",
       "rounds": rounds, "runs": res, "summary": summary, "stand_in_calls_under_canary": probes}
json.dump(doc, open(out, "w"), indent=1)
for prog in programs:
    print(prog, summary[prog])
    print("  stand-ins:", list(probes[prog].items())[:12])
PY
