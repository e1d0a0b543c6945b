#!/usr/bin/env bash
# gpusan's own host cost per kernel launch and per pool block (a tensor's allocation and
# free), on any machine: no GPU, the fake driver of the tests (crates/cli/tests/fake_cuda/
# libcuda.c), whose calls do almost nothing, so what `gpusan run` adds is gpusan's work
# (bench/launch/launch_loop.c). Natively, then under --mode canary and --mode api, ROUNDS
# rounds (default 5), medians; one thread, then 4 threads launching at once.
#
#   bench/launch-host-cost.sh [DIR] [OUT.json]   DIR: gpusan and libgpusan_inject.so
#                                                (default target/release)
# Prints a table; writes OUT.json (default $OUT/launch-host-cost.json or /tmp).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=$(cd "${1:-$repo/target/release}" && pwd)
out=${2:-${OUT:-/tmp}/launch-host-cost.json}
work=$(mktemp -d /tmp/gpusan-launch-host.XXXXXX)
trap 'rm -rf "$work"' EXIT
cc -O2 -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$work/libcuda.so.1" "$repo/crates/cli/tests/fake_cuda/libcuda.c"
ln -s libcuda.so.1 "$work/libcuda.so"
cc -O2 -o "$work/launch_loop" "$repo/bench/launch/launch_loop.c" -L"$work" -lcuda -ldl -lpthread -Wl,-rpath,"$work"
python3 - "$dir/gpusan" "$work/launch_loop" "$out" "${ROUNDS:-5}" "$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)" <<'PY'
import json, statistics, subprocess, sys
gpusan, prog, out, rounds, commit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
tools = {"native": [], "canary": [gpusan, "run", "--mode", "canary", "--"], "api": [gpusan, "run", "--mode", "api", "--"]}
cases = {"launches_1thread": ["launches", "200000", "1"], "launches_4threads": ["launches", "100000", "4"],
         "blocks": ["blocks", "100000"], "blocks_8192_live": ["blocks", "50000", "8192"]}
runs = {c: {t: [] for t in tools} for c in cases}
for r in range(rounds):
    for c, args in cases.items():
        for t, prefix in (tools.items() if r % 2 == 0 else reversed(tools.items())):
            p = subprocess.run(prefix + [prog, *args], capture_output=True, text=True, timeout=300)
            line = [l for l in p.stdout.splitlines() if l.startswith("{")]
            if p.returncode != 0 or not line:
                sys.exit(f"{t} {c}: rc={p.returncode}\n{p.stdout}\n{p.stderr}")
            runs[c][t].append(json.loads(line[-1])["ns_per_op"])
doc = {"what": "gpusan's host cost per operation through the fake driver (no GPU): median ns per launch or per "
               "pool block (allocation + free), natively and under gpusan run; added = tool - native",
       "commit": commit, "rounds": rounds, "cases": {}}
print(f"{'case':20s} {'native':>9s} {'canary':>9s} {'api':>9s}   ns per op (added: canary, api)")
for c in cases:
    med = {t: statistics.median(v) for t, v in runs[c].items()}
    doc["cases"][c] = {"median_ns": med, "added_ns": {t: round(med[t] - med["native"], 1) for t in tools if t != "native"},
                       "runs_ns": runs[c]}
    print(f"{c:20s} {med['native']:9.1f} {med['canary']:9.1f} {med['api']:9.1f}   "
          f"(+{med['canary'] - med['native']:.1f}, +{med['api'] - med['native']:.1f})")
with open(out, "w") as f:
    json.dump(doc, f, indent=1)
print(f"written {out}")
PY
